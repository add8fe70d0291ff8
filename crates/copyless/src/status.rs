//! `copyless status`: who is connected and which files are open, from the
//! running server over its control socket, as `smbstatus` shows Samba's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use copyless_core::status::ServerStatus;
use serde_json::{json, Value};

use crate::control;

#[derive(clap::Args, Debug, Clone)]
pub struct StatusArgs {
    /// Print JSON, for scripts.
    #[arg(long)]
    pub json: bool,
    /// Show the latest events of the shares' audit trails (`audit` in a
    /// share's configuration) instead, oldest first.
    #[arg(long)]
    pub audit: bool,
    /// How many audit events `--audit` shows (the server keeps the last
    /// 1000).
    #[arg(long, value_name = "N", default_value_t = 50, requires = "audit")]
    pub lines: usize,
    /// The server's control socket (default: the `control` of the
    /// configuration, else /run/copyless/control.sock for root and
    /// control.sock in the state directory for others).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Take the control socket's path from this configuration file
    /// (default: the one `copyless serve` reads).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The document the control socket answers `status` with: one entry per
/// session (with its connection's client and dialect), one per open file
/// (with the user and client of the session holding it).
pub fn to_json(status: &ServerStatus) -> Value {
    let mut owners: HashMap<u64, (&str, String)> = HashMap::new();
    let mut sessions = Vec::new();
    for c in &status.connections {
        for s in &c.sessions {
            owners.insert(s.id, (&s.user, c.client.to_string()));
            sessions.push(json!({
                "session_id": s.id,
                "user": s.user,
                "kind": if s.anonymous { "anonymous" } else if s.guest { "guest" } else { "user" },
                "auth": if s.kerberos { "kerberos" } else if s.anonymous { "none" } else { "ntlm" },
                "client": c.client.to_string(),
                "connection": c.id,
                "dialect": dialect_name(c.dialect),
                "signing": if s.signing_required { "required" } else { "optional" },
                "encryption": if s.encrypted { "required" } else { "optional" },
                "shares": s.trees,
            }));
        }
    }
    let opens: Vec<Value> = status
        .opens
        .iter()
        .map(|o| {
            let (user, client) = owners
                .get(&o.session)
                .map_or((None, None), |(u, c)| (Some(*u), Some(c.clone())));
            json!({
                "share": o.share,
                "path": o.path,
                "directory": o.is_dir,
                "session_id": o.session,
                "user": user,
                "client": client,
                "access": format!("{:#010x}", o.access),
                "share_modes": share_modes(o.share_access),
                "delete_pending": o.delete_pending,
                "disconnected": o.disconnected,
                "oplock": oplock_name(o.oplock),
                "lease": o.lease.map(lease_name),
                "locks": o.locks.iter().map(|l| json!({
                    "offset": l.offset,
                    "length": l.length,
                    "type": if l.exclusive { "exclusive" } else { "shared" },
                })).collect::<Vec<Value>>(),
            })
        })
        .collect();
    json!({ "sessions": sessions, "open_files": opens })
}

fn dialect_name(dialect: u16) -> String {
    match dialect {
        0 => "none".into(),
        0x0202 => "2.0.2".into(),
        0x0210 => "2.1".into(),
        0x0300 => "3.0".into(),
        0x0302 => "3.0.2".into(),
        0x0311 => "3.1.1".into(),
        other => format!("{other:#06x}"),
    }
}

fn oplock_name(level: u8) -> &'static str {
    match level {
        0x01 => "level2",
        0x08 => "exclusive",
        0x09 => "batch",
        _ => "none",
    }
}

/// A lease's caching as smbstatus shows it: R, W and H.
fn lease_name(state: u32) -> String {
    [(1, 'R'), (4, 'W'), (2, 'H')]
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// FILE_SHARE_READ, WRITE and DELETE as smbstatus shows them.
fn share_modes(share_access: u32) -> String {
    let mut modes: Vec<&str> = [(1, "READ"), (2, "WRITE"), (4, "DELETE")]
        .iter()
        .filter(|(bit, _)| share_access & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    if modes.is_empty() {
        modes.push("NONE");
    }
    modes.join("|")
}

pub fn run(args: StatusArgs) -> ExitCode {
    let path = match control::socket_path(args.control.as_deref(), args.config.as_deref()) {
        Ok(path) => path,
        Err(e) => {
            eprintln!("copyless: {e}");
            return ExitCode::from(2);
        }
    };
    if args.audit {
        return show_audit(&path, args.lines, args.json);
    }
    let status: Value = match control::ask(&path, "status") {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "copyless: cannot read the status from {}: {e} (is `copyless serve` running? \
                 --control PATH names its socket)",
                path.display()
            );
            return ExitCode::from(1);
        }
    };
    if args.json {
        println!("{status}");
    } else {
        print!("{}", render(&status));
    }
    ExitCode::SUCCESS
}

/// `--audit`: the last `n` lines the server's audit log wrote.
fn show_audit(path: &std::path::Path, n: usize, json: bool) -> ExitCode {
    let answer: Value = match control::ask(path, "audit") {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "copyless: cannot read the audit events from {}: {e} (is `copyless serve` \
                 running? --control PATH names its socket)",
                path.display()
            );
            return ExitCode::from(1);
        }
    };
    let all = answer["lines"].as_array().cloned().unwrap_or_default();
    let latest = &all[all.len().saturating_sub(n)..];
    if json {
        println!("{}", json!({ "lines": latest }));
    } else if latest.is_empty() {
        println!("no audit events (a share keeps them with `audit = [...]`)");
    } else {
        for line in latest {
            println!("{}", line.as_str().unwrap_or_default());
        }
    }
    ExitCode::SUCCESS
}

/// The human view: two tables.
fn render(status: &Value) -> String {
    let text = |v: &Value, key: &str| match &v[key] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    let empty = Vec::new();
    let sessions = status["sessions"].as_array().unwrap_or(&empty);
    let mut rows = vec![[
        "USER",
        "CLIENT",
        "DIALECT",
        "AUTH",
        "SIGNING",
        "ENCRYPTION",
        "SHARES",
    ]
    .map(String::from)
    .to_vec()];
    for s in sessions {
        let shares: Vec<String> = s["shares"]
            .as_array()
            .unwrap_or(&empty)
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        rows.push(vec![
            text(s, "user"),
            text(s, "client"),
            text(s, "dialect"),
            text(s, "auth"),
            text(s, "signing"),
            text(s, "encryption"),
            shares.join(","),
        ]);
    }
    let mut out = format!("Sessions: {}\n{}", sessions.len(), table(&rows));
    let opens = status["open_files"].as_array().unwrap_or(&empty);
    let mut rows = vec![[
        "USER",
        "CLIENT",
        "SHARE",
        "PATH",
        "SHARE MODES",
        "OPLOCK",
        "STATE",
    ]
    .map(String::from)
    .to_vec()];
    let mut locks = vec![["USER", "SHARE", "PATH", "TYPE", "OFFSET", "LENGTH"]
        .map(String::from)
        .to_vec()];
    for o in opens {
        let state = if o["disconnected"] == true {
            "durable, disconnected"
        } else if o["delete_pending"] == true {
            "delete pending"
        } else {
            "open"
        };
        let path = match text(o, "path") {
            p if p.is_empty() => "\\".to_string(),
            p => p,
        };
        let oplock = match o["lease"].as_str() {
            Some(lease) => format!("lease({lease})"),
            None => text(o, "oplock"),
        };
        for l in o["locks"].as_array().unwrap_or(&empty) {
            locks.push(vec![
                text(o, "user"),
                text(o, "share"),
                path.clone(),
                text(l, "type"),
                text(l, "offset"),
                text(l, "length"),
            ]);
        }
        rows.push(vec![
            text(o, "user"),
            text(o, "client"),
            text(o, "share"),
            path,
            text(o, "share_modes"),
            oplock,
            state.to_string(),
        ]);
    }
    out.push_str(&format!("\nOpen files: {}\n{}", opens.len(), table(&rows)));
    out.push_str(&format!(
        "\nByte-range locks: {}\n{}",
        locks.len() - 1,
        table(&locks)
    ));
    out
}

/// Left-aligned columns two spaces apart.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| format!("{cell:<w$}", w = widths[i]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_core::status::{ConnectionStatus, LockStatus, OpenStatus, SessionStatus};

    #[test]
    fn sessions_and_open_files_with_their_holders() {
        let status = ServerStatus {
            connections: vec![ConnectionStatus {
                id: 7,
                client: "192.0.2.1:50000".parse().unwrap(),
                dialect: 0x0311,
                sessions: vec![SessionStatus {
                    id: 42,
                    user: "alice".into(),
                    anonymous: false,
                    guest: false,
                    kerberos: false,
                    signing_required: true,
                    encrypted: false,
                    trees: vec!["IPC$".into(), "share".into()],
                }],
            }],
            opens: vec![OpenStatus {
                share: "share".into(),
                path: "a/b.txt".into(),
                is_dir: false,
                session: 42,
                access: 0x0012_019f,
                share_access: 3,
                delete_pending: false,
                disconnected: false,
                oplock: 0,
                lease: Some(3),
                locks: vec![LockStatus {
                    offset: 4096,
                    length: 512,
                    exclusive: true,
                }],
            }],
        };
        let v = to_json(&status);
        assert_eq!(v["sessions"][0]["user"], "alice");
        assert_eq!(v["sessions"][0]["dialect"], "3.1.1");
        assert_eq!(v["sessions"][0]["client"], "192.0.2.1:50000");
        assert_eq!(v["sessions"][0]["shares"], json!(["IPC$", "share"]));
        assert_eq!(v["open_files"][0]["user"], "alice");
        assert_eq!(v["open_files"][0]["share_modes"], "READ|WRITE");
        assert_eq!(v["open_files"][0]["lease"], "RH");
        assert_eq!(
            v["open_files"][0]["locks"],
            json!([{"offset": 4096, "length": 512, "type": "exclusive"}])
        );
        let shown = render(&v);
        assert!(shown.contains("Sessions: 1"), "{shown}");
        assert!(
            shown.lines().any(|l| l.starts_with("alice")
                && l.contains("a/b.txt")
                && l.contains("lease(RH)")),
            "{shown}"
        );
        assert!(shown.contains("Byte-range locks: 1"), "{shown}");
        assert!(
            shown.lines().any(|l| l.split_whitespace().eq([
                "alice",
                "share",
                "a/b.txt",
                "exclusive",
                "4096",
                "512"
            ])),
            "{shown}"
        );
    }
}
