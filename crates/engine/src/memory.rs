//! Memory freed when connections go is given back to the kernel.
//!
//! glibc's malloc keeps what a thread frees in that thread's arena for the
//! next allocation there, and returns pages to the kernel only from the
//! top of a heap. A burst of connections that each held large directory
//! listings and reply buffers leaves most of it free but resident: with
//! the io_uring engine, whose blocking pool spreads the work over dozens
//! of threads and arenas, 20 connections x 22 enumerations of a large
//! folder left 110 MiB over idle after they had all gone, 38 MiB after a
//! `malloc_trim` (measured; the threaded engine: 17 and 11 MiB). So once
//! connections stop going for a moment, one trim gives the free pages of
//! every arena back; under steady churn, at most one every few seconds.

use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long after the last connection went a trim waits, so that a burst
/// of closes is trimmed once, after the last.
const SETTLE: Duration = Duration::from_secs(1);
/// The longest a trim waits while connections keep going.
const AT_MOST: Duration = Duration::from_secs(10);

struct Trimmer {
    /// When connections went since the last trim: the first and the last.
    gone: Mutex<Option<(Instant, Instant)>>,
    wake: Condvar,
}

/// A connection went, its memory freed: a trim follows once closes
/// settle. Never blocks on the trim itself.
pub fn connection_gone() {
    let Some(t) = trimmer() else {
        return;
    };
    let now = Instant::now();
    let mut gone = t.gone.lock().unwrap_or_else(|e| e.into_inner());
    *gone = Some(gone.map_or((now, now), |(first, _)| (first, now)));
    t.wake.notify_one();
}

/// The thread that trims, started with the first connection that goes;
/// None where it cannot start (it is then never tried again).
fn trimmer() -> Option<&'static Trimmer> {
    static TRIMMER: OnceLock<Option<&'static Trimmer>> = OnceLock::new();
    *TRIMMER.get_or_init(|| {
        let t: &'static Trimmer = Box::leak(Box::new(Trimmer {
            gone: Mutex::new(None),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("memory-trim".into())
            .spawn(move || trim_loop(t))
            .ok()
            .map(|_| t)
    })
}

fn trim_loop(t: &Trimmer) {
    let mut gone = t.gone.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let Some((first, last)) = *gone else {
            gone = t.wake.wait(gone).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let due = (last + SETTLE).min(first + AT_MOST);
        let now = Instant::now();
        if now < due {
            gone = t
                .wake
                .wait_timeout(gone, due - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        *gone = None;
        drop(gone);
        trim();
        gone = t.gone.lock().unwrap_or_else(|e| e.into_inner());
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim takes no pointer from us; it walks glibc's own
    // arenas, each under its own lock, and gives whole free pages back with
    // madvise. Nothing another thread holds is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators give memory back by themselves, or not at all.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
