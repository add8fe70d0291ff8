//! The derived view `copyless top` shows and prints as JSON: shares of
//! each phase, what-if throughputs, per-command statistics and the busiest
//! clients.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::phase::Phase;
use crate::snapshot::{Buckets, ClientSnapshot, IoSnapshot, ShareSnapshot, Snapshot};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    pub phase: String,
    pub ns: u64,
    /// Percent of the time of all phases.
    pub share_percent: f64,
    /// Bytes per second if this phase took no time: bandwidth / (1 - share).
    /// None when the phase is all of the time.
    pub what_if_bytes_per_s: Option<f64>,
    pub what_if_requests_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRow {
    pub command: String,
    pub code: Option<u16>,
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub avg_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoRow {
    pub op: String,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub avg_ns: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub enabled: bool,
    /// The time the figures cover, in seconds.
    pub window_s: f64,
    pub since_start: bool,
    pub connections: u64,
    pub live_connections: u64,
    pub frames: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub requests_per_s: f64,
    /// Bytes in and out per second.
    pub bytes_per_s: f64,
    pub phases: Vec<PhaseRow>,
    /// Busiest (most total time) first.
    pub commands: Vec<CommandRow>,
    pub disk: Vec<IoRow>,
    pub syscalls: BTreeMap<String, u64>,
    pub syscalls_per_request: f64,
    pub shares: Vec<ShareSnapshot>,
    /// Busiest first.
    pub clients: Vec<ClientSnapshot>,
}

fn avg(total: u64, count: u64) -> u64 {
    total.checked_div(count).unwrap_or(0)
}

fn per_s(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

fn io_row(op: &str, io: &IoSnapshot) -> IoRow {
    IoRow {
        op: op.to_string(),
        count: io.count,
        bytes: io.bytes,
        total_ns: io.total_ns,
        avg_ns: avg(io.total_ns, io.count),
        p50_ns: io.histogram.quantile(0.50),
        p99_ns: io.histogram.quantile(0.99),
        max_ns: io.histogram.max(),
    }
}

impl Report {
    /// `since_start` says whether `s` is a server's whole life or a window
    /// (the difference of two snapshots).
    pub fn new(s: &Snapshot, since_start: bool) -> Report {
        let window_s = s.elapsed_ns as f64 / 1e9;
        let bytes_per_s = per_s(s.bytes_in + s.bytes_out, window_s);
        let requests_per_s = per_s(s.requests, window_s);
        let all: u64 = s.phase_ns.iter().sum();
        let phases = Phase::ALL
            .iter()
            .map(|&p| {
                let ns = s.phase_ns[p.index()];
                let share = if all == 0 {
                    0.0
                } else {
                    ns as f64 / all as f64
                };
                let gain = (share < 1.0).then(|| 1.0 / (1.0 - share));
                PhaseRow {
                    phase: p.name().to_string(),
                    ns,
                    share_percent: share * 100.0,
                    what_if_bytes_per_s: gain.map(|g| bytes_per_s * g),
                    what_if_requests_per_s: gain.map(|g| requests_per_s * g),
                }
            })
            .collect();
        let mut commands: Vec<CommandRow> = s
            .commands
            .iter()
            .map(|c| CommandRow {
                command: c.name.clone(),
                code: c.code,
                count: c.count,
                errors: c.errors,
                total_ns: c.total_ns,
                avg_ns: avg(c.total_ns, c.count),
                min_ns: c.min_ns,
                max_ns: c.max_ns,
                p50_ns: c.histogram.quantile(0.50),
                p99_ns: c.histogram.quantile(0.99),
            })
            .collect();
        commands.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.code.cmp(&b.code)));
        let mut clients = s.clients.clone();
        clients.sort_by(|a, b| {
            b.busy_ns
                .cmp(&a.busy_ns)
                .then_with(|| b.requests.cmp(&a.requests))
        });
        let calls: u64 = s.syscalls.values().sum();
        Report {
            enabled: s.enabled,
            window_s,
            since_start,
            connections: s.connections,
            live_connections: s.live_connections,
            frames: s.frames,
            requests: s.requests,
            bytes_in: s.bytes_in,
            bytes_out: s.bytes_out,
            requests_per_s,
            bytes_per_s,
            phases,
            commands,
            disk: vec![io_row("read", &s.disk_read), io_row("write", &s.disk_write)],
            syscalls: s.syscalls.clone(),
            syscalls_per_request: if s.requests == 0 {
                0.0
            } else {
                calls as f64 / s.requests as f64
            },
            shares: s.shares.clone(),
            clients,
        }
    }

    /// The text `copyless top` shows; `max_clients` limits the client
    /// table.
    pub fn render(&self, max_clients: usize) -> String {
        let mut o = String::new();
        let span = if self.since_start {
            format!("since start ({})", duration(self.window_s))
        } else {
            format!("last {}", duration(self.window_s))
        };
        let _ = writeln!(
            o,
            "copyless top: {span}, {} connections ({} open){}",
            self.connections,
            self.live_connections,
            if self.enabled { "" } else { ", TRACING OFF" }
        );
        let _ = writeln!(
            o,
            "requests {} ({:.1}/s)  in {} out {} ({}/s)  system calls per request {:.2}",
            self.requests,
            self.requests_per_s,
            bytes(self.bytes_in as f64),
            bytes(self.bytes_out as f64),
            bytes(self.bytes_per_s),
            self.syscalls_per_request
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<10} {:>10} {:>7}  {:>14} {:>12}",
            "PHASE", "TIME", "SHARE", "IF ZERO", "REQUESTS/S"
        );
        for p in &self.phases {
            let _ = writeln!(
                o,
                "{:<10} {:>10} {:>6.1}%  {:>14} {:>12}",
                p.phase,
                nanos(p.ns),
                p.share_percent,
                p.what_if_bytes_per_s
                    .map_or("-".to_string(), |b| format!("{}/s", bytes(b))),
                p.what_if_requests_per_s
                    .map_or("-".to_string(), |r| format!("{r:.1}")),
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<16} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "COMMAND", "COUNT", "ERRORS", "TOTAL", "AVG", "MIN", "MAX", "P50", "P99"
        );
        for c in &self.commands {
            let _ = writeln!(
                o,
                "{:<16} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
                c.command,
                c.count,
                c.errors,
                nanos(c.total_ns),
                nanos(c.avg_ns),
                nanos(c.min_ns),
                nanos(c.max_ns),
                nanos(c.p50_ns),
                nanos(c.p99_ns)
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<16} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9}",
            "DISK", "CALLS", "BYTES", "TOTAL", "AVG", "P50", "P99"
        );
        for d in &self.disk {
            let _ = writeln!(
                o,
                "{:<16} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9}",
                d.op,
                d.count,
                bytes(d.bytes as f64),
                nanos(d.total_ns),
                nanos(d.avg_ns),
                nanos(d.p50_ns),
                nanos(d.p99_ns)
            );
        }
        if !self.syscalls.is_empty() {
            let list: Vec<String> = self
                .syscalls
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(o, "calls: {}", list.join(", "));
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<16} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "SHARE", "REQUESTS", "IN", "OUT", "DISK READ", "DISK WRITE", "BUSY"
        );
        for s in &self.shares {
            let _ = writeln!(
                o,
                "{:<16} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
                s.name,
                s.requests,
                bytes(s.bytes_in as f64),
                bytes(s.bytes_out as f64),
                bytes(s.disk_read_bytes as f64),
                bytes(s.disk_write_bytes as f64),
                nanos(s.busy_ns)
            );
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{:<39} {:<16} {:>5} {:>8} {:>10} {:>10} {:>10}",
            "CLIENT", "USER", "CONNS", "REQUESTS", "IN", "OUT", "BUSY"
        );
        for c in self.clients.iter().take(max_clients) {
            let _ = writeln!(
                o,
                "{:<39} {:<16} {:>5} {:>8} {:>10} {:>10} {:>10}",
                c.address,
                if c.user.is_empty() { "-" } else { &c.user },
                c.connections,
                c.requests,
                bytes(c.bytes_in as f64),
                bytes(c.bytes_out as f64),
                nanos(c.busy_ns)
            );
        }
        o
    }
}

/// A histogram's buckets for `--histogram`.
pub fn command_buckets(s: &Snapshot, code: u16) -> Buckets {
    s.command(code)
        .map(|c| c.histogram.clone())
        .unwrap_or_default()
}

/// Nanoseconds in the unit that keeps three digits.
pub fn nanos(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0);
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        let whole = s as u64;
        format!(
            "{}:{:02}:{:02}",
            whole / 3600,
            (whole / 60) % 60,
            whole % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::CommandSnapshot;

    fn sample() -> Snapshot {
        Snapshot {
            enabled: true,
            elapsed_ns: 2_000_000_000,
            requests: 100,
            bytes_in: 1_000_000,
            bytes_out: 1_000_000,
            // waiting 50 %, receiving 25 %, running 25 %.
            phase_ns: [500, 250, 0, 0, 250, 0, 0],
            commands: vec![
                CommandSnapshot {
                    name: "READ".into(),
                    code: Some(8),
                    count: 40,
                    total_ns: 400,
                    min_ns: 5,
                    max_ns: 20,
                    histogram: Buckets(vec![(5, 20), (20, 20)]),
                    ..CommandSnapshot::default()
                },
                CommandSnapshot {
                    name: "WRITE".into(),
                    code: Some(9),
                    count: 60,
                    total_ns: 1200,
                    min_ns: 20,
                    max_ns: 20,
                    histogram: Buckets(vec![(20, 60)]),
                    ..CommandSnapshot::default()
                },
            ],
            syscalls: [("recv".to_string(), 200), ("send".to_string(), 100)]
                .into_iter()
                .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn phase_shares_and_what_if() {
        let r = Report::new(&sample(), true);
        assert_eq!(r.bytes_per_s, 1_000_000.0);
        assert_eq!(r.requests_per_s, 50.0);
        let total: f64 = r.phases.iter().map(|p| p.share_percent).sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
        let waiting = &r.phases[Phase::Waiting.index()];
        assert_eq!(waiting.share_percent, 50.0);
        // Half the time gone: twice the throughput.
        assert_eq!(waiting.what_if_bytes_per_s, Some(2_000_000.0));
        assert_eq!(waiting.what_if_requests_per_s, Some(100.0));
        let receiving = &r.phases[Phase::Receiving.index()];
        let expected = 1_000_000.0 / 0.75;
        assert!((receiving.what_if_bytes_per_s.unwrap() - expected).abs() < 1e-6);
        // A phase that took nothing gains nothing.
        let queued = &r.phases[Phase::Queued.index()];
        assert_eq!(queued.what_if_bytes_per_s, Some(1_000_000.0));
        assert_eq!(r.syscalls_per_request, 3.0);
    }

    #[test]
    fn a_phase_that_is_all_the_time_has_no_finite_what_if() {
        let mut s = sample();
        s.phase_ns = [0, 0, 0, 0, 7, 0, 0];
        let r = Report::new(&s, false);
        assert_eq!(r.phases[Phase::Running.index()].what_if_bytes_per_s, None);
        assert_eq!(r.phases[Phase::Running.index()].share_percent, 100.0);
    }

    #[test]
    fn commands_are_sorted_by_total_time() {
        let r = Report::new(&sample(), true);
        assert_eq!(r.commands[0].command, "WRITE");
        assert_eq!(r.commands[0].avg_ns, 20);
        let read = &r.commands[1];
        assert_eq!(
            (read.count, read.avg_ns, read.p50_ns, read.p99_ns),
            (40, 10, 5, 20)
        );
    }

    #[test]
    fn render_shows_the_tables() {
        let text = Report::new(&sample(), true).render(10);
        assert!(text.contains("since start (2.0 s)"), "{text}");
        assert!(text.contains("waiting"), "{text}");
        assert!(text.contains("50.0%"), "{text}");
        assert!(text.contains("1.9 MiB/s"), "{text}");
        let write_line = text.lines().find(|l| l.starts_with("WRITE")).unwrap();
        assert!(write_line.contains(" 60 "), "{write_line}");
        assert!(text.contains("calls: recv 200, send 100"), "{text}");
    }

    #[test]
    fn units() {
        assert_eq!(nanos(999), "999ns");
        assert_eq!(nanos(1_500), "1.5us");
        assert_eq!(nanos(2_500_000), "2.5ms");
        assert_eq!(nanos(3_000_000_000), "3.00s");
        assert_eq!(bytes(10.0), "10 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
        assert_eq!(duration(3725.0), "1:02:05");
    }
}
