//! Log lines a client can cause, at most one per interval for each kind:
//! a client that triggers one in a loop must not fill the disk or keep a
//! core busy writing. What was held back is counted in the next line.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct RateLimit {
    every: Duration,
    state: Mutex<State>,
}

struct State {
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    pub const fn new(every: Duration) -> RateLimit {
        RateLimit {
            every,
            state: Mutex::new(State {
                last: None,
                suppressed: 0,
            }),
        }
    }

    /// Writes `copyless: <message>` to standard error unless a line of this
    /// kind went out less than the interval ago, or warnings are not
    /// written (`[log] level`).
    pub fn log(&self, message: impl FnOnce() -> String) {
        if !crate::log_level::logs(crate::log_level::LogLevel::Warning) {
            return;
        }
        if let Some(line) = self.line(Instant::now(), message) {
            eprintln!("{line}");
        }
    }

    fn line(&self, now: Instant, message: impl FnOnce() -> String) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state
            .last
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            state.suppressed += 1;
            return None;
        }
        state.last = Some(now);
        let suppressed = std::mem::take(&mut state.suppressed);
        let mut line = format!("copyless: {}", message());
        if suppressed > 0 {
            line.push_str(&format!(
                " ({suppressed} more like this in the last {} s not shown)",
                self.every.as_secs()
            ));
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_a_count_of_the_rest() {
        let limit = RateLimit::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(
            limit.line(t0, || "first".into()).as_deref(),
            Some("copyless: first")
        );
        for i in 1..=5 {
            let at = t0 + Duration::from_secs(i);
            assert_eq!(limit.line(at, || unreachable!("not formatted")), None);
        }
        let line = limit.line(t0 + Duration::from_secs(10), || "again".into());
        assert_eq!(
            line.as_deref(),
            Some("copyless: again (5 more like this in the last 10 s not shown)")
        );
        assert!(limit
            .line(t0 + Duration::from_secs(21), || "x".into())
            .is_some_and(|l| !l.contains("more like this")));
    }
}
