//! `copyless man --out DIR`: the man pages, rendered by clap_mangen from
//! the same clap definitions as `--help`, so the two cannot drift apart.
//! The package build (`dist/build-deb`) runs it on the release binary
//! before `cargo deb`; it is hidden since nobody else needs it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Command;

/// Where the package puts the documentation that SEE ALSO points to.
const DOC_DIR: &str = "/usr/share/doc/copyless";

/// Writes one page for `root` and one for each of its visible
/// subcommands, at any depth: `copyless.1`, `copyless-user.1`,
/// `copyless-user-add.1`, ... dated `date` (YYYY-MM-DD). Returns the
/// files written.
pub fn write_pages(root: Command, dir: &Path, date: &str) -> io::Result<Vec<PathBuf>> {
    // `help` as a subcommand would get a page of its own; `--help` stays.
    let mut root = root.disable_help_subcommand(true);
    // Fills in the display names ("copyless-user-add") the file names
    // and cross-references are made of.
    root.build();
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    write_tree(&root, &[], dir, date, &mut written)?;
    Ok(written)
}

fn write_tree(
    cmd: &Command,
    ancestors: &[&Command],
    dir: &Path,
    date: &str,
    written: &mut Vec<PathBuf>,
) -> io::Result<()> {
    let page = clap_mangen::Man::new(cmd.clone())
        // Without a date clap_mangen leaves an empty argument out of .TH,
        // and the source then shows where the date belongs.
        .date(date)
        // Subcommands carry no version of their own; every page is of
        // this release.
        .source(format!("copyless {}", env!("CARGO_PKG_VERSION")))
        .manual("copyless");
    let path = dir.join(page.get_filename());
    let mut text = Vec::new();
    page.render(&mut text)?;
    see_also(&mut text, ancestors)?;
    std::fs::write(&path, text)?;
    written.push(path);
    let mut below = ancestors.to_vec();
    below.push(cmd);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, &below, dir, date, written)?;
    }
    Ok(())
}

/// The pages above this one (its subcommands are already listed in its
/// SUBCOMMANDS section), and the documentation the package installs.
fn see_also(w: &mut dyn Write, ancestors: &[&Command]) -> io::Result<()> {
    writeln!(w, ".SH \"SEE ALSO\"")?;
    for cmd in ancestors.iter().rev() {
        let name = cmd.get_display_name().unwrap_or_else(|| cmd.get_name());
        // Roff reads a plain "-" as a hyphen; `\-` is the minus sign that
        // survives copy and paste into a shell and man's search.
        writeln!(w, ".BR {} (1),", name.replace('-', "\\-"))?;
    }
    writeln!(
        w,
        "{DOC_DIR}/README.md (the configuration file, users, running as a \
         service, coming from Samba) and the guides in {DOC_DIR}/docs."
    )
}

/// The pages' date: that of SOURCE_DATE_EPOCH when set (as reproducible
/// package builds set it; `dist/build-deb` sets it to the last commit's),
/// else today's.
fn page_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        });
    iso_date(secs)
}

/// YYYY-MM-DD of a Unix time, in UTC (days to the proleptic Gregorian
/// calendar as in Howard Hinnant's `civil_from_days`).
fn iso_date(unix_secs: i64) -> String {
    let z = unix_secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Runs `copyless man --out DIR`.
pub fn run(root: Command, dir: &Path) -> ExitCode {
    match write_pages(root, dir, &page_date()) {
        Ok(written) => {
            for path in written {
                println!("{}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("copyless: {}: {e}", dir.display());
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use clap::CommandFactory;

    use super::*;

    /// Every visible command at any depth, with the names above it:
    /// ["copyless"], ["copyless", "user"], ["copyless", "user", "add"], ...
    fn commands(cmd: &Command, above: &[String], out: &mut Vec<(Vec<String>, Command)>) {
        let mut path = above.to_vec();
        path.push(cmd.get_name().to_string());
        out.push((path.clone(), cmd.clone()));
        for sub in cmd.get_subcommands() {
            // clap's own `help` subcommand, and the hidden `man`.
            if sub.get_name() != "help" && !sub.is_hide_set() {
                commands(sub, &path, out);
            }
        }
    }

    fn all_commands() -> Vec<(Vec<String>, Command)> {
        let mut out = Vec::new();
        commands(&crate::Cli::command(), &[], &mut out);
        out
    }

    fn options(cmd: &Command) -> impl Iterator<Item = &clap::Arg> {
        cmd.get_arguments()
            .filter(|a| !a.is_hide_set() && !["help", "version"].contains(&a.get_id().as_str()))
    }

    #[test]
    fn the_definitions_hold_together() {
        crate::Cli::command().debug_assert();
    }

    #[test]
    fn every_command_gets_a_page_naming_its_options_and_the_pages_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_pages(crate::Cli::command(), dir.path(), "2026-11-30").unwrap();
        let files: BTreeSet<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(written.len(), files.len());

        let commands = all_commands();
        let expected: BTreeSet<String> = commands
            .iter()
            .map(|(path, _)| format!("{}.1", path.join("-")))
            .collect();
        assert_eq!(files, expected);
        // Should the walk above and the writer both miss a level, the
        // pages the package promises would still be asked for here.
        for page in [
            "copyless.1",
            "copyless-serve.1",
            "copyless-user.1",
            "copyless-user-add.1",
            "copyless-user-import.1",
            "copyless-check-config.1",
            "copyless-import.1",
            "copyless-import-smb.conf.1",
            "copyless-top.1",
            "copyless-status.1",
            "copyless-bench.1",
            "copyless-bench-io.1",
        ] {
            assert!(files.contains(page), "no {page} in {files:?}");
        }
        assert!(!files
            .iter()
            .any(|f| f.contains("help") || f.contains("man")));

        for (path, cmd) in &commands {
            let name = path.join("-");
            let text = std::fs::read_to_string(dir.path().join(format!("{name}.1"))).unwrap();
            assert!(
                text.contains(&format!(".TH {name} 1 2026-11-30 \"copyless ")),
                "{name}: {}",
                text.lines()
                    .find(|l| l.starts_with(".TH"))
                    .unwrap_or("no .TH")
            );
            for arg in options(cmd) {
                if let Some(long) = arg.get_long() {
                    let flag = format!("\\-\\-{}", long.replace('-', "\\-"));
                    assert!(text.contains(&flag), "{name} does not name {flag}");
                }
            }
            let see_also = &text[text.find(".SH \"SEE ALSO\"").expect(&name)..];
            for level in 1..path.len() {
                let above = format!(".BR {} (1)", path[..level].join("\\-"));
                assert!(
                    see_also.contains(&above),
                    "{name}: no {above} in {see_also}"
                );
            }
            assert!(see_also.contains("/usr/share/doc/copyless/README.md"));
        }
    }

    #[test]
    fn every_command_and_option_says_what_it_does_and_its_default() {
        let mut silent = Vec::new();
        for (path, cmd) in all_commands() {
            let name = path.join(" ");
            if cmd.get_about().is_none() {
                silent.push(format!("`{name}` says nothing of itself"));
            }
            for arg in options(&cmd) {
                let id = arg.get_id();
                let help = arg
                    .get_long_help()
                    .or(arg.get_help())
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                if help.trim().is_empty() {
                    silent.push(format!("`{name}`: {id} has no help"));
                }
                // A flag is off unless given, and a required value has no
                // default; every other value needs its default said, by
                // clap or in words where it is worked out at run time.
                let optional_value = arg.get_action().takes_values() && !arg.is_required_set();
                if optional_value
                    && arg.get_default_values().is_empty()
                    && !help.contains("default")
                {
                    silent.push(format!("`{name}`: {id} does not say its default: {help}"));
                }
            }
        }
        assert!(silent.is_empty(), "{}", silent.join("\n"));
    }

    #[test]
    fn dates_are_the_utc_days_of_unix_times() {
        assert_eq!(iso_date(0), "1970-01-01");
        assert_eq!(iso_date(86_399), "1970-01-01");
        assert_eq!(iso_date(951_782_400), "2000-02-29");
        assert_eq!(iso_date(1_700_000_000), "2023-11-14");
        assert_eq!(iso_date(-1), "1969-12-31");
    }
}
