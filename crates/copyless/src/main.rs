//! The `copyless` command: serve, user, check-config.

mod config;
mod control;
mod dashboard;
mod deadline;
mod descriptors;
mod discovery;
mod first_user;
mod homes;
mod machine_sid;
mod metrics;
mod no_root;
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
mod validate;
mod writable;

use std::path::{Path, PathBuf};
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
    /// Check a configuration file as `serve` would: report the first
    /// error, and warnings.
    CheckConfig { file: PathBuf },
    /// Convert another server's configuration (Samba's smb.conf).
    #[command(subcommand)]
    Import(samba_import::ImportCommand),
    /// Show where the running server's time goes, per phase and command.
    Top(top::TopArgs),
    /// Show the running server's sessions and open files.
    Status(status::StatusArgs),
    /// Load an SMB server (this one, Samba or any other) and measure it:
    /// block I/O, small files, metadata, idle connections.
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
        Command::CheckConfig { file } => check_config(&file),
    }
}

/// `check-config FILE`: the file as `serve --config FILE` takes it,
/// through the same validation, with the user store it names.
fn check_config(file: &Path) -> ExitCode {
    let args = config::ServeArgs {
        config: Some(file.to_path_buf()),
        ..Default::default()
    };
    let checked = config::Config::from_serve_args(&args).and_then(|config| {
        let store = match copyless_auth::UserStore::load(&config.state_dir) {
            Ok(store) => Ok(store),
            // Not ours to read (a root service checked by another user):
            // the rest is still worth checking.
            Err(copyless_auth::userstore::UserError::Io(e))
                if e.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Err(e.to_string())
            }
            // serve would refuse it.
            Err(e) => return Err(config::ConfigError::plain(e.to_string())),
        };
        validate::validate(&config, store.as_ref().map_err(Clone::clone))
    });
    match checked {
        Ok(warnings) => {
            for warning in warnings {
                eprintln!("copyless: {warning}");
            }
            println!("{}: ok", file.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("copyless: {e}");
            ExitCode::from(2)
        }
    }
}
