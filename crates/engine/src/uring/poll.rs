//! How long a loop that has run out of work keeps looking for completions
//! before it sleeps in the kernel.
//!
//! A sleeping loop costs its next request a wake-up: on this project's
//! guests (and on any machine whose idle cores drop into a sleep state) a
//! halted core takes tens of microseconds to run a woken thread, about as
//! long as the request itself. When requests come back-to-back, as over
//! loopback or a fast LAN, looking a little longer finds the next one
//! awake. When they come further apart, looking only burns the core, so
//! the window adapts as the kernel's guest `haltpoll` governor does: it
//! grows while sleeps end soon after they begin, and shrinks while they
//! last longer than the longest window, down to not looking at all (an
//! idle server does not poll). Each look yields the core, so a client or
//! another process waiting for it runs first.

use std::time::Duration;

/// The first window after sleeps turned short.
const START: Duration = Duration::from_micros(12);
/// The longest window: a sleep longer than this counts as long.
const MAX: Duration = Duration::from_micros(100);

#[derive(Debug, Default)]
pub(super) struct Poll {
    window: Duration,
}

impl Poll {
    /// How long to look before sleeping now.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// After a sleep (not a look that found something) that lasted
    /// `slept`.
    pub fn slept(&mut self, slept: Duration) {
        if slept <= MAX {
            self.window = (self.window * 2).clamp(START, MAX);
        } else {
            self.window /= 2;
            if self.window < START {
                self.window = Duration::ZERO;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_while_sleeps_are_short_and_stops_while_they_are_long() {
        let mut p = Poll::default();
        assert_eq!(p.window(), Duration::ZERO, "an idle loop does not look");
        p.slept(Duration::from_micros(40));
        assert_eq!(p.window(), START);
        for _ in 0..10 {
            p.slept(Duration::from_micros(40));
        }
        assert_eq!(p.window(), MAX, "capped");
        p.slept(Duration::from_millis(5));
        assert_eq!(p.window(), MAX / 2);
        for _ in 0..10 {
            p.slept(Duration::from_secs(1));
        }
        assert_eq!(p.window(), Duration::ZERO, "requests far apart: no looking");
    }
}
