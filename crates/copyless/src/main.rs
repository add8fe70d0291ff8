//! The `copyless` command: serve, user, check-config.

mod config;
mod control;
mod dashboard;
mod deadline;
mod descriptors;
mod discovery;
mod first_user;
mod machine_sid;
mod metrics;
mod privileges;
mod reload;
mod samba_import;
mod serve;
mod share_keeper;
mod status;
mod systemd;
mod top;
mod user_cmd;
mod users_watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "copyless", version, about = "An SMB 2/3 file server")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the configured shares.
    Serve(config::ServeArgs),
    /// Manage the user store.
    #[command(subcommand)]
    User(user_cmd::UserCommand),
    /// Check a configuration file and report the first error.
    CheckConfig { file: PathBuf },
    /// Convert another server's configuration (Samba's smb.conf).
    #[command(subcommand)]
    Import(samba_import::ImportCommand),
    /// Show where the running server's time goes, per phase and command.
    Top(top::TopArgs),
    /// Show the running server's sessions and open files.
    Status(status::StatusArgs),
    /// Load an SMB server and measure it (see `copyless bench --help`).
    Bench(copyless_bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => match config::Config::from_serve_args(&args) {
            Ok(config) => {
                // Only the built-in default share is created on demand: a
                // configured path that is missing is more likely a typo.
                let builtin = args.config.is_none() && args.share.is_empty();
                match serve::serve(config, args, builtin) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err((msg, code)) => {
                        eprintln!("copyless: {msg}");
                        ExitCode::from(code)
                    }
                }
            }
            Err(e) => {
                eprintln!("copyless: {e}");
                ExitCode::from(2)
            }
        },
        Command::User(cmd) => user_cmd::run(cmd),
        Command::Top(args) => top::run(args),
        Command::Status(args) => status::run(args),
        Command::Bench(args) => copyless_bench::run(args),
        Command::Import(cmd) => samba_import::run(cmd),
        Command::CheckConfig { file } => match config::Config::load(&file) {
            Ok(_) => {
                println!("{}: ok", file.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("copyless: {e}");
                ExitCode::from(2)
            }
        },
    }
}
