//! `copyless bench`: an SMB 2/3 load generator. A small client (NTLMv2,
//! signing, encryption, credits, pipelining) built on the server's own
//! codec, and three workloads: block I/O, small-file copy, and metadata.
//!
//! The side-by-side comparison against Samba is `bench/compare` at the
//! repository root; it drives this command.

pub mod cli;
pub mod client;
mod idle;
mod io;
mod meta;
mod progress;
mod report;
mod smallfiles;
mod stats;
mod units;

pub use cli::{run, BenchArgs};
pub use report::{Report, SessionInfo};

/// Why a workload did not produce a report.
#[derive(Debug)]
pub enum RunError {
    /// The arguments cannot work (exit status 2).
    Usage(String),
    /// The run failed (exit status 1).
    Failed(String),
}

impl From<client::Error> for RunError {
    fn from(e: client::Error) -> Self {
        RunError::Failed(e.to_string())
    }
}

/// The negotiated session, for the report header.
fn session_info(conn: &client::Connection, args: &cli::ConnectArgs) -> SessionInfo {
    SessionInfo {
        address: args.address.clone(),
        share: args.share.clone(),
        dialect: units::dialect_name(conn.dialect()),
        signing: conn.is_signing(),
        encryption: conn.is_encrypting(),
    }
}

/// Seconds since the Unix epoch, for default directory names.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
