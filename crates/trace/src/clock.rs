//! The request clock: the CPU's time-stamp counter through `quanta`,
//! calibrated once per process. Reading it makes no system call.

use std::sync::OnceLock;

static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();

#[inline]
fn clock() -> &'static quanta::Clock {
    CLOCK.get_or_init(quanta::Clock::new)
}

/// Calibrates the clock now rather than on the first request.
pub fn calibrate() {
    clock();
}

/// A raw reading, in clock ticks; only differences through [`nanos`] mean
/// anything.
#[inline]
pub fn now() -> u64 {
    clock().raw()
}

/// Nanoseconds from `start` to `end`; 0 when `end` is not later.
#[inline]
pub fn nanos(start: u64, end: u64) -> u64 {
    clock().delta_as_nanos(start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_sleep() {
        let t0 = now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let ns = nanos(t0, now());
        assert!((19_000_000..2_000_000_000).contains(&ns), "{ns}");
        assert_eq!(nanos(now(), t0), 0);
    }
}
