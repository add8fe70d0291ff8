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
mod no_root;
mod privileges;
mod reload;
mod samba_import;
mod serve;
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
        Command::Serve(mut args) => match config::Config::from_serve_args(&args) {
            Ok(config) => {
                let builtin = args.serves_builtin_share();
                if args.config.is_none() {
                    if let Some(file) = args.config_file() {
                        eprintln!("copyless: configuration {}", file.display());
                        // A reload reads the same file, whatever appears meanwhile.
                        args.config = Some(file);
                    }
                }
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
