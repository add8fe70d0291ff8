//! `copyless bench WORKLOAD [options]`: the arguments and the entry point.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};

use crate::client::{ClientOptions, Signing};
use crate::units::{parse_dialect, parse_seconds, parse_size};

#[derive(Debug, Args)]
#[command(
    subcommand_value_name = "WORKLOAD",
    subcommand_help_heading = "Workloads",
    about = "Load an SMB server and measure it",
    long_about = "Load an SMB 2/3 server with one of three workloads and report \
        what it sustained: a table at the end, or one JSON object with --json. \
        Sizes take binary suffixes (4k = 4096, 1m = 1 MiB)."
)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub workload: Workload,
}

#[derive(Debug, Subcommand)]
pub enum Workload {
    /// Iometer-style block I/O on one file per connection: IOPS, MB/s,
    /// latency percentiles and client CPU.
    Io(IoArgs),
    /// Copy many small files into directories, as a desktop client does
    /// (CREATE, QUERY_INFO, SET_INFO end of file, WRITE, SET_INFO times,
    /// CLOSE per file; the directories are made before the clock starts):
    /// files/s.
    Smallfiles(SmallfilesArgs),
    /// Metadata loops (create, stat, close, rename, delete) and the listing
    /// of a large directory: ops/s and latency.
    Meta(MetaArgs),
    /// Open many authenticated connections, hold them idle (the caller
    /// measures the server meanwhile; "idle: N connections up" on standard
    /// error says when), then check each still answers.
    Idle(IdleArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SigningArg {
    /// Ask the server to sign every message.
    Required,
    /// Do not ask for signing (the session is still signed if the server
    /// requires it).
    Off,
}

/// Where to connect and as whom; shared by every workload.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Server address, HOST:PORT.
    #[arg(long, default_value = "127.0.0.1:445")]
    pub address: String,
    /// Share name.
    #[arg(long, default_value = "share")]
    pub share: String,
    /// User name.
    #[arg(long, short = 'U', default_value = "copyless")]
    pub user: String,
    /// Password (or the environment variable COPYLESS_BENCH_PASSWORD).
    #[arg(long, env = "COPYLESS_BENCH_PASSWORD", hide_env_values = true)]
    pub password: String,
    /// Domain for NTLM; empty means the server's own.
    #[arg(long, default_value = "")]
    pub domain: String,
    /// Signing: required or off.
    #[arg(long, value_enum, default_value = "required")]
    pub signing: SigningArg,
    /// Encrypt every message (SMB 3 only).
    #[arg(long)]
    pub encrypt: bool,
    /// Highest dialect to offer: 2.0.2, 2.1, 3.0, 3.0.2 or 3.1.1.
    #[arg(long, default_value = "3.1.1", value_parser = parse_dialect)]
    pub max_dialect: u16,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Directory on the share to work in, created if missing (default:
    /// copyless-bench for io, copyless-bench\meta for meta, a new
    /// copyless-bench\smallfiles-TIME-PID for each smallfiles run).
    #[arg(long)]
    pub dir: Option<String>,
}

impl ConnectArgs {
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            address: self.address.clone(),
            share: self.share.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            domain: self.domain.clone(),
            signing: match self.signing {
                SigningArg::Required => Signing::Required,
                SigningArg::Off => Signing::Off,
            },
            encrypt: self.encrypt,
            max_dialect: self.max_dialect,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    Random,
    Sequential,
}

#[derive(Debug, Clone, Args)]
pub struct IoArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Request size, 512 B to 8 MiB.
    #[arg(long, default_value = "4k", value_parser = parse_size)]
    pub size: u64,
    /// Outstanding I/Os per connection, 1 to 128.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    pub depth: u32,
    /// Connections, each on its own thread and its own file.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub connections: u32,
    /// Percentage of reads; the rest are writes (100 = all reads).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub read_pct: u8,
    /// Offsets: random (aligned to the request size) or sequential.
    #[arg(long, value_enum, default_value = "random")]
    pub pattern: Pattern,
    /// Size of each connection's file (written once before the run).
    #[arg(long, default_value = "64m", value_parser = parse_size)]
    pub file_size: u64,
    /// Seconds of load before measuring starts.
    #[arg(long, default_value = "1", value_parser = parse_seconds)]
    pub ramp: f64,
    /// Seconds measured.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    pub time: f64,
}

#[derive(Debug, Clone, Args)]
pub struct SmallfilesArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Number of files.
    #[arg(long, default_value_t = 10_000)]
    pub files: u64,
    /// Size of each file.
    #[arg(long, default_value = "10k", value_parser = parse_size)]
    pub file_size: u64,
    /// Directories the files are spread over.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub dirs: u64,
    /// Connections copying in parallel (files are dealt round-robin).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub connections: u32,
    /// Send CREATE + WRITE + CLOSE as one compound per file.
    #[arg(long)]
    pub compound: bool,
}

#[derive(Debug, Clone, Args)]
pub struct MetaArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Iterations of create, stat, close, rename, delete.
    #[arg(long, default_value_t = 2_000)]
    pub loops: u64,
    /// Entries of the directory to list (created once, kept for later runs;
    /// 0 skips the listing).
    #[arg(long, default_value_t = 50_000)]
    pub list_entries: u64,
}

#[derive(Debug, Clone, Args)]
pub struct IdleArgs {
    #[command(flatten)]
    pub connect: ConnectArgs,
    /// Connections to open, one after another.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=60000))]
    pub connections: u32,
    /// Seconds to hold them once all are up.
    #[arg(long, default_value = "5", value_parser = parse_seconds)]
    pub hold: f64,
}

/// Runs a workload and prints its report; the exit status is 0 on
/// success, 1 when the run failed, 2 for unusable arguments.
pub fn run(args: BenchArgs) -> ExitCode {
    let result = match args.workload {
        Workload::Io(a) => crate::io::run(&a).map(|r| (r, a.connect.json)),
        Workload::Smallfiles(a) => crate::smallfiles::run(&a).map(|r| (r, a.connect.json)),
        Workload::Meta(a) => crate::meta::run(&a).map(|r| (r, a.connect.json)),
        Workload::Idle(a) => crate::idle::run(&a).map(|r| (r, a.connect.json)),
    };
    match result {
        Ok((report, json)) => {
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
            ExitCode::SUCCESS
        }
        Err(crate::RunError::Usage(m)) => {
            eprintln!("copyless bench: {m}");
            ExitCode::from(2)
        }
        Err(crate::RunError::Failed(m)) => {
            eprintln!("copyless bench: {m}");
            ExitCode::from(1)
        }
    }
}
