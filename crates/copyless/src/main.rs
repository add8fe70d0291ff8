//! The `copyless` command: serve, user, check-config, import, top, status,
//! bench, and the hidden man that writes the man pages.

mod config;
mod control;
mod dashboard;
mod deadline;
mod descriptors;
mod discovery;
mod first_user;
mod homes;
mod machine_sid;
mod man;
mod metrics;
mod no_root;
mod privileges;
mod recycle_sweeper;
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

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "copyless",
    version,
    about = "An SMB 2/3 file server",
    long_about = "An SMB 2/3 file server for Linux: it serves folders as shares to \
        Windows, macOS and Linux clients. `copyless serve` runs the server; the other \
        commands manage its users, check or import a configuration, show what the \
        running server does, and measure a server. `copyless COMMAND --help` (or \
        `man copyless-COMMAND` where the package is installed) tells more."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: serve the configured shares until stopped (SIGTERM
    /// or Ctrl-C); SIGHUP reads the configuration again.
    ///
    /// Without --config and --share, root reads /etc/copyless/copyless.toml
    /// when it exists (the service's file); otherwise the flags apply to the
    /// built-in defaults: listen on 0.0.0.0:445, serve the folder ./share
    /// (made when missing) as "share", state in the default state directory.
    Serve(config::ServeArgs),
    /// Manage the user store: the users who may log on, each linked to the
    /// Unix account it acts as on disk.
    ///
    /// The store is the one the server uses: in the state_dir of the
    /// configuration `copyless serve` reads, unless --state-dir or --config
    /// name another. A running server takes up changes within a second.
    #[command(subcommand)]
    User(user_cmd::UserCommand),
    /// Check a configuration file as `serve` would: report the first error
    /// (exit status 2), and warnings.
    ///
    /// Given an smb.conf, it says to convert it with `copyless import
    /// smb.conf` first.
    CheckConfig {
        /// The configuration file (TOML) to check.
        file: PathBuf,
    },
    /// Convert another server's configuration into a copyless one (Samba's
    /// smb.conf).
    #[command(subcommand)]
    Import(samba_import::ImportCommand),
    /// Show where the running server's time goes, per phase and command:
    /// a live view that refreshes each second, or one report with --once.
    Top(top::TopArgs),
    /// Show the running server's sessions and open files, as smbstatus does
    /// for Samba.
    Status(status::StatusArgs),
    /// Load an SMB server (this one, Samba or any other) and measure it:
    /// block I/O, small files, metadata, idle connections.
    Bench(copyless_bench::BenchArgs),
    /// Write the man pages (copyless.1 and one per subcommand) into DIR;
    /// the package build runs it.
    #[command(hide = true)]
    Man {
        /// Directory to write the pages into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
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
        Command::Man { out } => man::run(Cli::command(), &out),
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
