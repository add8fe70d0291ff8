//! Always-on request tracing: a TSC clock, per-thread counters and
//! log-scale histograms merged only when read, and the views built on them
//! (`copyless top`, the Prometheus text, static probes).
//!
//! Recording is split from reading so that the hot path never waits on a
//! reader: each connection thread owns a [`Recorder`] whose statistics sit
//! behind a mutex only that thread and an occasional reader ever take.

pub mod clock;
pub mod command;
pub mod histogram;
pub mod phase;
pub mod probes;
pub mod prometheus;
pub mod recorder;
pub mod report;
pub mod snapshot;
mod stats;
pub mod syscall;
pub mod timed_vfs;

pub use phase::Phase;
pub use recorder::{FailedLogon, FrameTimes, Recorder, Request, Scope, Tracer};
pub use report::Report;
pub use snapshot::Snapshot;
pub use syscall::Syscall;
pub use timed_vfs::TimedVfs;
