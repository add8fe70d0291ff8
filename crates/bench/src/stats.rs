//! Latency histograms, the client's CPU time, and a small random number
//! generator for offsets and read/write choices.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies in nanoseconds, one histogram per thread, merged at the end.
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        // 1 ns to 10 minutes at 3 significant digits: bounds are constants,
        // so creation cannot fail.
        let hist = Histogram::new_with_bounds(1, 600_000_000_000, 3)
            .expect("constant histogram bounds are valid");
        Latency { hist }
    }
}

impl Latency {
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail; a failure
        // would only lose samples from a report.
        let _ = self.hist.add(&other.hist);
    }

    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: self.hist.len(),
            avg_us: self.hist.mean() / 1000.0,
            p50_us: us(self.hist.value_at_quantile(0.5)),
            p99_us: us(self.hist.value_at_quantile(0.99)),
            p999_us: us(self.hist.value_at_quantile(0.999)),
            max_us: us(self.hist.max()),
        }
    }
}

/// Latency figures in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// User plus system CPU seconds of this process, all threads (getrusage).
pub fn cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    use nix::sys::time::TimeValLike;
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let micros = u.user_time().num_microseconds() + u.system_time().num_microseconds();
            micros as f64 / 1e6
        }
        Err(_) => 0.0,
    }
}

/// xorshift64*: fast, and good enough to spread offsets and mix reads
/// with writes. Not for anything secret.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // One splitmix64 step, so that nearby seeds give unrelated streams
        // (and the state is never zero).
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in 0..n (n > 0), with negligible bias for our ranges.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut a = Latency::default();
        let mut b = Latency::default();
        for i in 1..=500u64 {
            a.record(Duration::from_micros(i));
            b.record(Duration::from_micros(500 + i));
        }
        a.merge(&b);
        let s = a.summary();
        assert_eq!(s.count, 1000);
        // Within the histogram's 3 significant digits.
        assert!((s.p50_us - 500.0).abs() <= 1.0, "{s:?}");
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.p999_us - 999.0).abs() <= 1.0, "{s:?}");
        assert!((s.max_us - 1000.0).abs() <= 1.0, "{s:?}");
        assert!((s.avg_us - 500.5).abs() <= 1.0, "{s:?}");
        assert_eq!(Latency::default().summary(), LatencySummary::default());
    }

    #[test]
    fn cpu_time_grows_with_work() {
        let before = cpu_seconds();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(cpu_seconds() > before);
    }

    #[test]
    fn rng_stays_in_range_and_varies() {
        let mut r = Rng::new(7);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(r.below(0), 0);
    }
}
