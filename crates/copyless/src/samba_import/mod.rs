//! `copyless import smb.conf FILE`: a Samba server's smb.conf as a copyless
//! config, with a list of what copyless cannot do the same way.

mod address_lists;
mod convert;
mod full_audit;
mod host;
mod options;
pub mod passdb;
mod smbconf;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Config;

#[derive(clap::Subcommand, Debug)]
pub enum ImportCommand {
    /// Convert a Samba smb.conf into a copyless config (on standard output
    /// unless --output); what is not carried over is listed on standard
    /// error.
    #[command(name = "smb.conf")]
    SmbConf {
        /// The smb.conf to read.
        file: PathBuf,
        /// Write the config to this file (default: standard output).
        #[arg(long, short, value_name = "OUT")]
        output: Option<PathBuf>,
    },
}

pub fn run(cmd: ImportCommand) -> ExitCode {
    let ImportCommand::SmbConf { file, output } = cmd;
    let conf = match smbconf::load(&file, &mut |path| std::fs::read(path)) {
        Ok(conf) => conf,
        Err(e) => return fail(e, 2),
    };
    let converted = match convert::convert(&conf, &file.display().to_string(), &host::System) {
        Ok(converted) => converted,
        Err(e) => return fail(e, 2),
    };
    for note in &converted.notes {
        eprintln!("{note}");
    }
    // Whatever the converter writes must pass check-config; if it does not,
    // that is a bug here, and no config is better than a broken one.
    let check_as = output
        .clone()
        .unwrap_or_else(|| PathBuf::from("copyless.toml"));
    let checked = Config::from_text(&converted.toml, &check_as).and_then(|config| {
        // The store is not the converter's business: only the config.
        crate::validate::validate(&config, Err(String::new())).map(drop)
    });
    if let Err(e) = checked {
        return fail(
            format!("internal error: the converted config does not pass check-config: {e}"),
            1,
        );
    }
    if converted.shares == 0 {
        eprintln!(
            "{}: no share carried over: `copyless serve` needs a [[share]] table or \
             --share NAME=PATH",
            file.display()
        );
    }
    match &output {
        Some(out) => {
            if let Err(e) = std::fs::write(out, &converted.toml) {
                return fail(format!("cannot write {}: {e}", out.display()), 1);
            }
            eprintln!(
                "copyless: wrote {} ({} share{}); check it with `copyless check-config {}`",
                out.display(),
                converted.shares,
                if converted.shares == 1 { "" } else { "s" },
                out.display()
            );
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            if let Err(e) = stdout
                .write_all(converted.toml.as_bytes())
                .and_then(|()| stdout.flush())
            {
                return fail(format!("cannot write to standard output: {e}"), 1);
            }
        }
    }
    ExitCode::SUCCESS
}

fn fail(message: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("copyless: {message}");
    ExitCode::from(code)
}

#[cfg(test)]
mod tests;
