//! The clock and randomness the protocol core asks for.

use std::time::{SystemTime, UNIX_EPOCH};

/// 1601-01-01 to 1970-01-01 in 100 ns units.
const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

pub struct SystemEnv;

/// [`SystemEnv`] on an io_uring loop's thread, which serves every
/// connection of its ring: the core leaves there what may wait for a
/// filesystem (`Env::may_wait`).
pub struct LoopEnv;

pub fn filetime_now() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    FILETIME_UNIX_EPOCH + d.as_secs() * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

impl copyless_core::Env for SystemEnv {
    fn now(&self) -> u64 {
        filetime_now()
    }

    fn fill_random(&mut self, buf: &mut [u8]) {
        // The kernel's generator does not fail on Linux once booted; a
        // failure here means no safe challenge can be made at all.
        getrandom::fill(buf).expect("kernel random number generator");
    }
}

impl copyless_core::Env for LoopEnv {
    fn now(&self) -> u64 {
        SystemEnv.now()
    }

    fn fill_random(&mut self, buf: &mut [u8]) {
        SystemEnv.fill_random(buf);
    }

    fn may_wait(&self) -> bool {
        false
    }
}
