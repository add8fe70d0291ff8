//! The progress line: rewritten in place twice a second while a workload
//! runs, only when standard output is a terminal (scripts and `--json`
//! get the final report alone).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counters the workers bump and the progress line reads.
#[derive(Default)]
pub struct Counters {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
}

impl Counters {
    pub fn add(&self, ops: u64, bytes: u64) {
        self.ops.fetch_add(ops, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

pub struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the line unless stdout is not a terminal or `quiet`.
    pub fn start(
        label: &str,
        unit: &'static str,
        counters: Arc<Counters>,
        quiet: bool,
    ) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        if quiet || !std::io::stdout().is_terminal() {
            return Progress { stop, thread: None };
        }
        let label = label.to_string();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            let mut last = (start, 0u64, 0u64);
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let now = Instant::now();
                if now.duration_since(last.0) < Duration::from_millis(500) {
                    continue;
                }
                let ops = counters.ops.load(Ordering::Relaxed);
                let bytes = counters.bytes.load(Ordering::Relaxed);
                let dt = now.duration_since(last.0).as_secs_f64();
                let rate = (ops - last.1) as f64 / dt;
                let mbs = (bytes - last.2) as f64 / dt / 1e6;
                let mut out = std::io::stdout().lock();
                let _ = write!(
                    out,
                    "\r\x1b[K{label}: {:.1} s, {ops} {unit}, {rate:.0} {unit}/s, {mbs:.1} MB/s",
                    now.duration_since(start).as_secs_f64()
                );
                let _ = out.flush();
                last = (now, ops, bytes);
            }
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[K");
            let _ = out.flush();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_thread();
    }
}
