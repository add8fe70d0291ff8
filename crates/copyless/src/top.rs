//! `copyless top`: the running server's per-request statistics, read over
//! its control socket.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use copyless_trace::{command, histogram, Report, Snapshot};

use crate::control;

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// Print one report and exit (everything since the server started,
    /// or the next N seconds with --window).
    #[arg(long)]
    pub once: bool,
    /// Report a window of N seconds: the next N seconds with --once or
    /// --histogram, the refresh interval otherwise (default: since the
    /// server started with --once or --histogram, 1 second in the live
    /// view).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub window: Option<u64>,
    /// Print JSON (one document per refresh in the live view).
    #[arg(long)]
    pub json: bool,
    /// Draw the distribution of one command's times (e.g. WRITE) and exit
    /// (default: the report of all commands).
    #[arg(long, value_name = "CMD")]
    pub histogram: Option<String>,
    /// The server's control socket (default: the `control` of the
    /// configuration, else /run/copyless/control.sock for root and
    /// control.sock in the state directory for others).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Take the control socket's path from this configuration file
    /// (default: the one `copyless serve` reads).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How many of the busiest clients to show.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub clients: usize,
}

fn control_path(args: &TopArgs) -> Result<PathBuf, String> {
    control::socket_path(args.control.as_deref(), args.config.as_deref())
}

fn fetch(path: &Path) -> Result<Snapshot, String> {
    control::fetch(path).map_err(|e| {
        format!(
            "cannot read statistics from {}: {e} (is `copyless serve` running? \
             --control PATH names its socket)",
            path.display()
        )
    })
}

/// Two snapshots `seconds` apart, and what happened between them.
fn window(path: &Path, seconds: u64) -> Result<Snapshot, String> {
    let before = fetch(path)?;
    std::thread::sleep(Duration::from_secs(seconds));
    Ok(fetch(path)?.since(&before))
}

pub fn run(args: TopArgs) -> ExitCode {
    match run_inner(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err((msg, code)) => {
            eprintln!("copyless: {msg}");
            ExitCode::from(code)
        }
    }
}

fn run_inner(args: &TopArgs) -> Result<(), (String, u8)> {
    let path = control_path(args).map_err(|m| (m, 2))?;
    let runtime = |m: String| (m, 1);
    if let Some(name) = &args.histogram {
        let code = command::parse(name).ok_or_else(|| {
            (
                format!("--histogram {name:?}: not an SMB2 command (e.g. READ, WRITE, CREATE)"),
                2,
            )
        })?;
        let s = match args.window {
            Some(n) => window(&path, n).map_err(runtime)?,
            None => fetch(&path).map_err(runtime)?,
        };
        let buckets = s
            .command(code)
            .map(|c| c.histogram.clone())
            .unwrap_or_default();
        let text = if args.json {
            let doc = serde_json::json!({
                "command": command::name(code),
                "samples": buckets.count(),
                "buckets_ns": buckets,
            });
            format!("{doc}\n")
        } else {
            histogram::render(command::name(code), &buckets)
        };
        let _ = emit(&text);
        return Ok(());
    }
    if args.once {
        let report = match args.window {
            Some(n) => Report::new(&window(&path, n).map_err(runtime)?, false),
            None => Report::new(&fetch(&path).map_err(runtime)?, true),
        };
        let _ = emit(&report_text(&report, args));
        return Ok(());
    }
    live(&path, args).map_err(runtime)
}

fn report_text(report: &Report, args: &TopArgs) -> String {
    if args.json {
        // A report holds only numbers and strings: it always serialises.
        serde_json::to_string_pretty(report).unwrap_or_default() + "\n"
    } else {
        report.render(args.clients)
    }
}

/// Writes to standard output; false once the reader has gone away (a
/// closed pipe ends `top` quietly rather than with a panic).
fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_ok()
}

/// Refreshes every second (or --window N) until interrupted.
fn live(path: &Path, args: &TopArgs) -> Result<(), String> {
    let interval = Duration::from_secs(args.window.unwrap_or(1));
    let terminal = std::io::stdout().is_terminal() && !args.json;
    let mut before = fetch(path)?;
    loop {
        std::thread::sleep(interval);
        let now = fetch(path)?;
        let report = Report::new(&now.since(&before), false);
        let mut text = String::new();
        if terminal {
            // Home the cursor and clear the screen.
            text.push_str("\x1b[H\x1b[2J");
        }
        text.push_str(&report_text(&report, args));
        if terminal {
            text.push_str(&format!(
                "\n(refreshed every {} s; Ctrl-C to quit)\n",
                interval.as_secs()
            ));
        } else if !args.json {
            text.push('\n');
        }
        if !emit(&text) {
            return Ok(());
        }
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        top: TopArgs,
    }

    fn parse(args: &[&str]) -> Result<TopArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("top").chain(args.iter().copied())).map(|c| c.top)
    }

    #[test]
    fn the_control_socket_comes_from_the_flag_or_the_config() {
        let args = parse(&["--once", "--control", "/x/c.sock"]).unwrap();
        assert_eq!(control_path(&args).unwrap(), PathBuf::from("/x/c.sock"));

        let dir = std::env::temp_dir().join(format!("copyless-top-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(&file, "control = \"sock\"\n").unwrap();
        let args = parse(&["--config", file.to_str().unwrap()]).unwrap();
        assert_eq!(control_path(&args).unwrap(), dir.join("sock"));
        std::fs::write(&file, "control = 3\n").unwrap();
        assert!(control_path(&args).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn window_must_be_positive() {
        assert!(parse(&["--once", "--window", "0"]).is_err());
        assert_eq!(parse(&["--once", "--window", "5"]).unwrap().window, Some(5));
    }

    #[test]
    fn json_reports_parse_back() {
        let args = parse(&["--once", "--json"]).unwrap();
        let report = Report::new(&Snapshot::default(), true);
        let text = report_text(&report, &args);
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, report);
        let args = parse(&["--once"]).unwrap();
        assert!(report_text(&report, &args).contains("PHASE"));
    }
}
