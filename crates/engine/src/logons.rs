//! The log of logons: each logon the core reports is counted by outcome
//! and written as one line on standard error (the journal under
//! systemd), where administrators and fail2ban read it.
//!
//! A client can log on as often as it likes, so the lines are limited:
//! at most [`PER_ADDRESS`] a minute from one client address and
//! [`IN_ALL`] a minute from all, the rest counted and said in one line
//! when the minute is over ("25 more logons from 192.0.2.7 not
//! logged"). The addresses followed are bounded too ([`ADDRESSES`]), so
//! a client with many addresses cannot grow the table. Lines are written
//! by a thread of their own: a connection never waits on standard error.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use copyless_core::logon::{Logon, Outcome};
use copyless_core::Event;
use copyless_trace::Tracer;

use crate::audit_log::AuditLog;
use crate::log_level::{logs, LogLevel};

/// Lines a minute about one client address.
pub const PER_ADDRESS: u32 = 10;
/// Lines a minute about all clients together.
pub const IN_ALL: u32 = 600;
/// Client addresses whose lines are counted apart in a minute; logons
/// from more are counted together and not logged.
pub const ADDRESSES: usize = 1024;
const WINDOW: Duration = Duration::from_secs(60);
/// Logons waiting for the writer; past this they are counted, not
/// logged.
const QUEUE: usize = 1024;
/// How long the end of the engine waits for the last lines.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

enum Message {
    Logon(Logon),
    /// Write what is held back now, then say so.
    Flush(mpsc::Sender<()>),
}

/// Where the engine's connections report their logons (and hand their
/// audit events on to the audit log).
pub struct Logons {
    tracer: Arc<Tracer>,
    audit: Arc<AuditLog>,
    queue: SyncSender<Message>,
    /// Logons the writer had no room for.
    lost: Arc<AtomicU64>,
}

/// The thread that writes the lines.
pub struct Writer {
    queue: SyncSender<Message>,
    thread: JoinHandle<()>,
}

/// Has `tracer` count every logon outcome from now, at zero until one
/// happens: called before the metrics are served, so that the first
/// scrape shows every outcome.
pub fn expect_logon_outcomes(tracer: &Tracer) {
    let names: Vec<&'static str> = Outcome::ALL.iter().map(|o| o.name()).collect();
    tracer.expect_logons(&names);
}

impl Logons {
    /// Starts the writer; the counters of every outcome show from now.
    pub fn start(tracer: Arc<Tracer>, audit: Arc<AuditLog>) -> io::Result<(Arc<Logons>, Writer)> {
        expect_logon_outcomes(&tracer);
        let (queue, incoming) = mpsc::sync_channel(QUEUE);
        let lost = Arc::new(AtomicU64::new(0));
        let thread = {
            let lost = lost.clone();
            std::thread::Builder::new()
                .name("logons".into())
                .spawn(move || write_lines(incoming, &lost, Limiter::new()))?
        };
        let logons = Arc::new(Logons {
            tracer,
            audit,
            queue: queue.clone(),
            lost,
        });
        Ok((logons, Writer { queue, thread }))
    }

    /// Counts and logs the logons among `events`, and passes on the
    /// audit events.
    pub fn report(&self, events: Vec<Event>) {
        for event in events {
            let logon = match event {
                Event::Logon(logon) => logon,
                Event::Audit(audit) => {
                    self.audit.record(audit);
                    continue;
                }
            };
            let outcome = logon.outcome().name();
            self.tracer.count_logon(outcome);
            if !logon.succeeded() {
                self.tracer
                    .note_failed_logon(logon.client.ip(), &logon.user, outcome);
            }
            // fail2ban reads the failures: they are warnings, written
            // unless only errors are.
            let level = if logon.succeeded() {
                LogLevel::Info
            } else {
                LogLevel::Warning
            };
            if !logs(level) {
                continue;
            }
            match self.queue.try_send(Message::Logon(logon)) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    self.lost.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

impl Writer {
    /// The engine has stopped: what was held back is said, then the
    /// thread is left to end with the process.
    pub fn finish(self) {
        let (done, wait) = mpsc::channel();
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(FLUSH_WAIT);
        }
        drop(self.thread);
    }
}

fn write_lines(incoming: mpsc::Receiver<Message>, lost: &AtomicU64, mut limiter: Limiter) {
    let write = |lines: Vec<String>| {
        let mut err = io::stderr().lock();
        for line in lines {
            let _ = writeln!(err, "copyless: {line}");
        }
    };
    loop {
        let message = match limiter.next_due() {
            Some(at) => incoming.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => incoming.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let now = Instant::now();
        let mut lines = limiter.due(now);
        let n = lost.swap(0, Ordering::Relaxed);
        if n > 0 {
            lines.push(format!("{n} more logons not logged: the log fell behind"));
        }
        match message {
            Ok(Message::Logon(logon)) => {
                lines.extend(limiter.logon(logon.client.ip(), now, || logon.to_string()));
                write(lines);
            }
            Ok(Message::Flush(done)) => {
                lines.extend(limiter.flush());
                write(lines);
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => write(lines),
            Err(RecvTimeoutError::Disconnected) => {
                lines.extend(limiter.flush());
                write(lines);
                return;
            }
        }
    }
}

/// One minute's count of lines, and of logons held back.
#[derive(Debug, Clone, Copy)]
struct Window {
    since: Instant,
    shown: u32,
    held: u64,
}

impl Window {
    fn new(since: Instant) -> Window {
        Window {
            since,
            shown: 0,
            held: 0,
        }
    }

    fn ends(&self) -> Instant {
        self.since + WINDOW
    }
}

/// Decides which logons get a line: the counting, without the clock or
/// the writing, so that it can be tested.
pub(crate) struct Limiter {
    per_address: u32,
    in_all: u32,
    capacity: usize,
    addresses: HashMap<IpAddr, Window>,
    all: Option<Window>,
    /// Logons of addresses past `capacity`, in the current minute of `all`.
    others: u64,
}

impl Limiter {
    fn new() -> Limiter {
        Limiter::with(PER_ADDRESS, IN_ALL, ADDRESSES)
    }

    pub(crate) fn with(per_address: u32, in_all: u32, capacity: usize) -> Limiter {
        Limiter {
            per_address,
            in_all,
            capacity,
            addresses: HashMap::new(),
            all: None,
            others: 0,
        }
    }

    /// The line of a logon from `ip` at `now` (made by `line` only if it
    /// is written), after the summaries of minutes that ended.
    pub(crate) fn logon(
        &mut self,
        ip: IpAddr,
        now: Instant,
        line: impl FnOnce() -> String,
    ) -> Vec<String> {
        let mut out = self.due(now);
        let ip = ip.to_canonical();
        let all = self.all.get_or_insert_with(|| Window::new(now));
        if !self.addresses.contains_key(&ip) && self.addresses.len() >= self.capacity {
            self.others += 1;
            return out;
        }
        let mine = self.addresses.entry(ip).or_insert_with(|| Window::new(now));
        if mine.shown >= self.per_address {
            mine.held += 1;
        } else if all.shown >= self.in_all {
            all.held += 1;
        } else {
            mine.shown += 1;
            all.shown += 1;
            out.push(line());
        }
        out
    }

    /// Summaries of the minutes that ended by `now`; their addresses are
    /// forgotten.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        let per_address = self.per_address;
        self.addresses.retain(|ip, w| {
            if now < w.ends() {
                return true;
            }
            if w.held > 0 {
                out.push(held_back(w.held, &format!("from {ip}"), per_address));
            }
            false
        });
        if self.all.is_some_and(|w| now >= w.ends()) {
            out.extend(self.summary_of_all());
            self.all = None;
        }
        out
    }

    /// Summaries of everything held back, whether or not its minute
    /// ended.
    pub(crate) fn flush(&mut self) -> Vec<String> {
        let mut out: Vec<String> = self
            .addresses
            .drain()
            .filter(|(_, w)| w.held > 0)
            .map(|(ip, w)| held_back(w.held, &format!("from {ip}"), self.per_address))
            .collect();
        out.sort();
        out.extend(self.summary_of_all());
        self.all = None;
        out
    }

    fn summary_of_all(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(w) = self.all.filter(|w| w.held > 0) {
            out.push(format!(
                "{} more logons not logged (at most {} lines a minute)",
                w.held, self.in_all
            ));
        }
        let others = std::mem::take(&mut self.others);
        if others > 0 {
            out.push(format!(
                "{others} more logons not logged, from addresses past the {} followed in a \
                 minute",
                self.capacity
            ));
        }
        out
    }

    /// When the next summary is due, if one is.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        let addresses = self
            .addresses
            .values()
            .filter(|w| w.held > 0)
            .map(Window::ends);
        let all = self
            .all
            .filter(|w| w.held > 0 || self.others > 0)
            .map(|w| w.ends());
        addresses.chain(all).min()
    }
}

fn held_back(n: u64, whence: &str, per_address: u32) -> String {
    format!("{n} more logons {whence} not logged (at most {per_address} lines a minute from one address)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_address_gets_its_lines_then_one_summary_a_minute() {
        let mut l = Limiter::with(3, 100, 16);
        let t0 = Instant::now();
        let a = ip("192.0.2.7");
        let mut shown = Vec::new();
        for i in 0..10 {
            shown.extend(l.logon(a, t0 + Duration::from_secs(i), || format!("line {i}")));
        }
        assert_eq!(shown, ["line 0", "line 1", "line 2"]);
        assert_eq!(l.next_due(), Some(t0 + WINDOW));
        assert!(l.due(t0 + Duration::from_secs(59)).is_empty());
        assert_eq!(
            l.due(t0 + WINDOW),
            ["7 more logons from 192.0.2.7 not logged (at most 3 lines a minute from one address)"]
        );
        assert_eq!(l.next_due(), None);
        // A new minute, new lines; a dual-stack listener's form is the
        // same address.
        let later = t0 + WINDOW + Duration::from_secs(1);
        assert_eq!(
            l.logon(ip("::ffff:192.0.2.7"), later, || "again".into()),
            ["again"]
        );
        // Another address is not held back by this one.
        assert_eq!(l.logon(ip("192.0.2.8"), later, || "b".into()), ["b"]);
    }

    #[test]
    fn all_addresses_together_are_limited_too() {
        let mut l = Limiter::with(5, 4, 16);
        let t0 = Instant::now();
        let mut shown = 0;
        for i in 0..8u8 {
            let who = IpAddr::from([10, 0, 0, i]);
            shown += l.logon(who, t0, || "x".into()).len();
        }
        assert_eq!(shown, 4);
        assert_eq!(
            l.due(t0 + WINDOW),
            ["4 more logons not logged (at most 4 lines a minute)"]
        );
    }

    #[test]
    fn the_addresses_followed_are_bounded() {
        let mut l = Limiter::with(5, 1000, 3);
        let t0 = Instant::now();
        let mut shown = 0;
        for i in 0..100u8 {
            let who = IpAddr::from([10, 0, 1, i]);
            shown += l.logon(who, t0, || "x".into()).len();
        }
        assert_eq!(shown, 3);
        assert_eq!(l.addresses.len(), 3);
        assert_eq!(l.next_due(), Some(t0 + WINDOW));
        assert_eq!(
            l.due(t0 + WINDOW),
            ["97 more logons not logged, from addresses past the 3 followed in a minute"]
        );
        // The minute over, the table is empty again.
        assert!(l.addresses.is_empty());
        assert_eq!(l.logon(ip("10.0.2.1"), t0 + WINDOW, || "y".into()), ["y"]);
    }

    #[test]
    fn a_flush_says_what_is_held_back_at_once() {
        let mut l = Limiter::with(1, 100, 16);
        let t0 = Instant::now();
        for _ in 0..4 {
            l.logon(ip("fd00::1"), t0, || "x".into());
        }
        l.logon(ip("192.0.2.1"), t0, || "x".into());
        assert_eq!(
            l.flush(),
            ["3 more logons from fd00::1 not logged (at most 1 lines a minute from one address)"]
        );
        assert!(l.flush().is_empty());
    }
}
