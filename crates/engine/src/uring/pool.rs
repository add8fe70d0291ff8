//! Threads for the work that may wait on a disk and has no ring
//! operation: a job runs on one of them, and its result goes back to the
//! loop that asked, through that loop's ready list and bell.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::bell::Bell;

/// An idle thread ends after this long without a job.
const IDLE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: usize,
}

pub(crate) struct Pool {
    queue: Mutex<Queue>,
    more: Condvar,
    max: usize,
}

/// Where a loop finds the results of the jobs it gave the pool.
pub(crate) struct Results<R> {
    done: Mutex<Vec<(usize, R)>>,
    bell: Arc<Bell>,
}

impl<R: Send + 'static> Results<R> {
    pub fn new(bell: Arc<Bell>) -> Arc<Results<R>> {
        Arc::new(Results {
            done: Mutex::new(Vec::new()),
            bell,
        })
    }

    /// The results that came back, each with whom it is for.
    pub fn take(&self) -> Vec<(usize, R)> {
        std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Pool {
    /// A pool of at most `max` threads, started as jobs need them.
    pub fn new(max: usize) -> Arc<Pool> {
        Arc::new(Pool {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                idle: 0,
                threads: 0,
            }),
            more: Condvar::new(),
            max: max.max(1),
        })
    }

    /// Runs `job` on a pool thread; its result goes to `results` for
    /// `who`, and rings its loop's bell. A job that panics gives no
    /// result: the caller's loop must not wait for it forever (see its
    /// use).
    pub fn run<R: Send + 'static>(
        self: &Arc<Self>,
        results: &Arc<Results<R>>,
        who: usize,
        job: impl FnOnce() -> R + Send + 'static,
    ) {
        let results = results.clone();
        let job: Job = Box::new(move || {
            let r = job();
            results
                .done
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((who, r));
            results.bell.ring(who);
        });
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.jobs.push_back(job);
        if q.idle > 0 {
            self.more.notify_one();
        } else if q.threads < self.max {
            q.threads += 1;
            let pool = self.clone();
            let spawned = std::thread::Builder::new()
                .name("uring-pool".into())
                .spawn(move || pool.serve());
            if spawned.is_err() {
                q.threads -= 1;
            }
        }
    }

    fn serve(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(job) = q.jobs.pop_front() {
                drop(q);
                // A panic is the job's own: the thread goes on.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            q.idle += 1;
            let (next, waited) = self
                .more
                .wait_timeout(q, IDLE)
                .unwrap_or_else(|e| e.into_inner());
            q = next;
            q.idle -= 1;
            if waited.timed_out() && q.jobs.is_empty() {
                q.threads -= 1;
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_to_whom_asked_and_ring_the_bell() {
        let bell = Bell::new().unwrap();
        let results = Results::new(bell.clone());
        let pool = Pool::new(2);
        for who in 0..10 {
            pool.run(&results, who, move || who * 2);
        }
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < 10 && std::time::Instant::now() < deadline {
            got.extend(results.take());
            std::thread::yield_now();
        }
        got.sort_unstable();
        assert_eq!(got, (0..10).map(|w| (w, w * 2)).collect::<Vec<_>>());
        let mut woken = bell.take();
        woken.sort_unstable();
        woken.dedup();
        assert_eq!(woken, (0..10).collect::<Vec<_>>());
        assert!(pool.queue.lock().unwrap().threads <= 2);
    }

    #[test]
    fn a_job_that_panics_leaves_the_pool_working() {
        let bell = Bell::new().unwrap();
        let results = Results::new(bell);
        let pool = Pool::new(1);
        pool.run(&results, 1, || -> u32 { panic!("a job's own") });
        pool.run(&results, 2, || 5u32);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() && std::time::Instant::now() < deadline {
            got = results.take();
            std::thread::yield_now();
        }
        assert_eq!(got, [(2, 5)]);
    }
}
