//! How other threads wake a ring's loop: they note who has news (a
//! connection with letters, a job the pool finished) in the loop's ready
//! list and make its eventfd readable, whose read the loop keeps under
//! way on the ring. One write per wake-up of the loop, however many notes.

use std::io;
use std::mem;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use rustix::event::{eventfd, EventfdFlags};

pub(crate) struct Bell {
    fd: Arc<OwnedFd>,
    ready: Mutex<Vec<usize>>,
    /// Rung since the loop last took the list: more notes need no write.
    rung: AtomicBool,
}

impl Bell {
    pub fn new() -> io::Result<Arc<Bell>> {
        Ok(Arc::new(Bell {
            fd: Arc::new(eventfd(0, EventfdFlags::CLOEXEC)?),
            ready: Mutex::new(Vec::new()),
            rung: AtomicBool::new(false),
        }))
    }

    /// The eventfd the loop reads on its ring.
    pub fn fd(&self) -> Arc<OwnedFd> {
        self.fd.clone()
    }

    /// Notes that `who` has news, and wakes the loop if it was not yet.
    pub fn ring(&self, who: usize) {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(who);
        if !self.rung.swap(true, Ordering::AcqRel) {
            // A full counter is still readable: nothing is lost.
            let _ = rustix::io::write(&*self.fd, &1u64.to_ne_bytes());
        }
    }

    /// Who has had news since the last call, in order (one may be named
    /// more than once). The loop calls it when the eventfd's read
    /// completes, before reading it again: a note made meanwhile rings
    /// again.
    pub fn take(&self) -> Vec<usize> {
        self.rung.store(false, Ordering::Release);
        mem::take(&mut *self.ready.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A waker that rings for `who`: for what wakes tasks (an inbox's
    /// letters).
    pub fn waker(self: &Arc<Self>, who: usize) -> Waker {
        Waker::from(Arc::new(Note {
            bell: self.clone(),
            who,
        }))
    }
}

struct Note {
    bell: Arc<Bell>,
    who: usize,
}

impl Wake for Note {
    fn wake(self: Arc<Self>) {
        self.bell.ring(self.who);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.bell.ring(self.who);
    }
}

#[cfg(test)]
mod tests {
    use super::super::ops::{Fd, Kept, Ops};
    use super::*;
    use std::time::Duration;

    #[test]
    fn notes_from_other_threads_wake_the_ring_once_and_are_all_taken() {
        let bell = Bell::new().unwrap();
        let mut ops = Ops::new(8).unwrap();
        let fd: Fd = bell.fd();
        ops.read_counter(fd.clone(), ()).unwrap();
        let waker = bell.waker(7);
        std::thread::scope(|s| {
            s.spawn(|| bell.ring(3));
            s.spawn(|| waker.wake_by_ref());
        });
        let mut done = Vec::new();
        while done.is_empty() {
            ops.wait(Some(Duration::from_secs(5))).unwrap();
            ops.reap(&mut done);
        }
        let Kept::Counter(c) = &done[0].kept else {
            panic!("the counter comes back");
        };
        assert_eq!(u64::from_ne_bytes(**c), 1, "one write for both notes");
        let mut who = bell.take();
        who.sort_unstable();
        assert_eq!(who, [3, 7]);
        assert!(bell.take().is_empty());
        // Taken, the next note rings again.
        ops.read_counter(fd, ()).unwrap();
        bell.ring(1);
        done.clear();
        while done.is_empty() {
            ops.wait(Some(Duration::from_secs(5))).unwrap();
            ops.reap(&mut done);
        }
        assert_eq!(bell.take(), [1]);
    }
}
