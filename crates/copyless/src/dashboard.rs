//! The live web dashboard on the metrics port: the page at `/`, its
//! scripts and styles under `/static/`, and `/report.json`, which the page
//! polls every second.
//!
//! `/report.json` is what `copyless top --json` shows in its live view
//! (the same [`Report`] of the last second) with the totals since start and
//! a few minutes of history for the charts. One sampler thread makes it
//! once a second and keeps it serialised, so a page asking for it costs a
//! copy of a few kilobytes, however many pages ask.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hasher};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use copyless_proto::command;
use copyless_trace::prometheus::ClientLabels;
use copyless_trace::{Report, Snapshot, Tracer};
use serde::Serialize;

/// How often the sampler looks, and so the window of each report.
const INTERVAL: Duration = Duration::from_secs(1);
/// Points of history kept for the charts: five minutes.
const HISTORY: usize = 300;
/// Busiest clients shown; as many as `copyless top` shows by default.
const MAX_CLIENTS: usize = 10;

/// The files of the page, by path: content type and bytes. Embedded so the
/// binary is all a server needs, and nothing is loaded from elsewhere.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("../dashboard/index.html"),
    ),
    (
        "/static/dashboard.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../dashboard/dashboard.js"),
    ),
    (
        "/static/dashboard.css",
        "text/css; charset=utf-8",
        include_bytes!("../dashboard/dashboard.css"),
    ),
    (
        "/static/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../dashboard/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "/static/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../dashboard/vendor/uplot/uPlot.min.css"),
    ),
    (
        "/static/favicon.svg",
        "image/svg+xml",
        include_bytes!("../dashboard/favicon.svg"),
    ),
];

/// The page's file at `path`, if there is one: content type and bytes.
pub fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    ASSETS
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|&(_, content_type, body)| (content_type, body))
}

/// An entity tag for `body`: the same for the same bytes (so for one
/// build of the server), another after an upgrade changed the file.
pub fn etag(body: &[u8]) -> String {
    let mut hasher = DefaultHasher::new();
    hasher.write(body);
    format!("\"{:016x}\"", hasher.finish())
}

/// One second of the throughput and IOPS charts.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Point {
    /// When the second ended, in seconds since the Unix epoch.
    t: f64,
    bytes_in_per_s: f64,
    bytes_out_per_s: f64,
    requests_per_s: f64,
    reads_per_s: f64,
    writes_per_s: f64,
}

/// Counters since the server started.
#[derive(Debug, Serialize)]
struct Totals {
    uptime_s: f64,
    connections: u64,
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
}

/// What `/report.json` holds.
#[derive(Debug, Serialize)]
struct Document<'a> {
    version: &'static str,
    totals: Totals,
    /// The last second (since start in the first second of the endpoint).
    report: &'a Report,
    /// Clients left out of `report.clients`, the busiest shown.
    more_clients: usize,
    /// Oldest first.
    history: &'a VecDeque<Point>,
}

/// Turns successive snapshots into documents; owned by the sampler thread.
struct Sampler {
    labels: ClientLabels,
    last: Snapshot,
    history: VecDeque<Point>,
}

impl Sampler {
    fn new(labels: ClientLabels, first: Snapshot) -> Sampler {
        Sampler {
            labels,
            last: first,
            history: VecDeque::with_capacity(HISTORY),
        }
    }

    /// The document for everything since start, before there is a window.
    fn first_document(&self) -> Vec<u8> {
        self.document(self.last.clone(), true, &self.last)
    }

    /// The document for the window from the last snapshot to `now`,
    /// taken at `t` (seconds since the epoch).
    fn sample(&mut self, now: Snapshot, t: f64) -> Vec<u8> {
        let window = now.since(&self.last);
        let seconds = window.elapsed_ns as f64 / 1e9;
        let per_s = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let count = |code: u16| window.command(code).map_or(0, |c| c.count);
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Point {
            t,
            bytes_in_per_s: per_s(window.bytes_in),
            bytes_out_per_s: per_s(window.bytes_out),
            requests_per_s: per_s(window.requests),
            reads_per_s: per_s(count(command::READ)),
            writes_per_s: per_s(count(command::WRITE)),
        });
        let document = self.document(window, false, &now);
        self.last = now;
        document
    }

    fn document(&self, mut window: Snapshot, since_start: bool, now: &Snapshot) -> Vec<u8> {
        window.clients = self.labels.clients(&window.clients);
        let mut report = Report::new(&window, since_start);
        let more_clients = report.clients.len().saturating_sub(MAX_CLIENTS);
        report.clients.truncate(MAX_CLIENTS);
        let document = Document {
            version: env!("CARGO_PKG_VERSION"),
            totals: Totals {
                uptime_s: now.elapsed_ns as f64 / 1e9,
                connections: now.connections,
                requests: now.requests,
                bytes_in: now.bytes_in,
                bytes_out: now.bytes_out,
            },
            report: &report,
            more_clients,
            history: &self.history,
        };
        // Numbers and strings only (a non-finite number becomes null): it
        // always serialises.
        serde_json::to_vec(&document).unwrap_or_default()
    }
}

/// The latest `/report.json`, kept up to date by the sampler thread.
pub struct Dashboard {
    document: Mutex<Vec<u8>>,
}

impl Dashboard {
    /// Takes the first snapshot now and starts the thread that samples
    /// the tracer every second from then on.
    pub fn start(tracer: Arc<Tracer>, labels: ClientLabels) -> io::Result<Arc<Dashboard>> {
        let mut sampler = Sampler::new(labels, tracer.snapshot());
        let dashboard = Arc::new(Dashboard {
            document: Mutex::new(sampler.first_document()),
        });
        let shared = Arc::clone(&dashboard);
        std::thread::Builder::new()
            .name("dashboard".into())
            .spawn(move || loop {
                std::thread::sleep(INTERVAL);
                let t = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                let document = sampler.sample(tracer.snapshot(), t);
                *shared.document.lock().unwrap_or_else(|e| e.into_inner()) = document;
            })?;
        Ok(dashboard)
    }

    /// The latest `/report.json`.
    pub fn document(&self) -> Vec<u8> {
        self.document
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_trace::snapshot::{ClientSnapshot, CommandSnapshot};
    use serde_json::Value;

    fn client(address: &str, user: &str, requests: u64) -> ClientSnapshot {
        ClientSnapshot {
            address: address.into(),
            user: user.into(),
            connections: 1,
            requests,
            ..ClientSnapshot::default()
        }
    }

    /// A server `seconds` old that has done `writes` WRITEs of 1000 bytes.
    fn snapshot(seconds: u64, writes: u64) -> Snapshot {
        Snapshot {
            enabled: true,
            elapsed_ns: seconds * 1_000_000_000,
            connections: 1,
            requests: writes,
            bytes_in: writes * 1000,
            bytes_out: writes * 100,
            phase_ns: [writes * 10, 0, 0, 0, writes * 10, 0, 0],
            commands: vec![CommandSnapshot {
                name: "WRITE".into(),
                code: Some(command::WRITE),
                count: writes,
                total_ns: writes * 20,
                min_ns: 20,
                max_ns: 20,
                histogram: copyless_trace::snapshot::Buckets(vec![(20, writes)]),
                ..CommandSnapshot::default()
            }],
            clients: vec![
                client("10.0.0.7", "alice", writes),
                client("10.0.0.7", "bob", 1),
            ],
            ..Snapshot::default()
        }
    }

    fn parse(document: &[u8]) -> Value {
        serde_json::from_slice(document).unwrap()
    }

    #[test]
    fn a_sample_is_the_last_window_with_totals_and_history() {
        let mut sampler = Sampler::new(ClientLabels::Address, snapshot(10, 100));
        let first = parse(&sampler.first_document());
        assert_eq!(first["report"]["since_start"], true);
        assert_eq!(first["report"]["requests"], 100);
        assert_eq!(first["history"], Value::Array(vec![]));

        let doc = parse(&sampler.sample(snapshot(12, 300), 1000.0));
        let report = &doc["report"];
        // The same fields as `copyless top --json`, for the window.
        let back: Report = serde_json::from_value(report.clone()).unwrap();
        assert!(!back.since_start);
        assert_eq!(back.window_s, 2.0);
        assert_eq!(back.requests, 200);
        assert_eq!(back.requests_per_s, 100.0);
        assert_eq!(back.commands[0].command, "WRITE");
        assert_eq!(back.commands[0].count, 200);
        assert_eq!(back.commands[0].p99_ns, 20);
        assert_eq!(back.phases[0].share_percent, 50.0);
        assert_eq!(doc["totals"]["requests"], 300);
        assert_eq!(doc["totals"]["uptime_s"], 12.0);
        let point = &doc["history"][0];
        assert_eq!(point["t"], 1000.0);
        assert_eq!(point["writes_per_s"], 100.0);
        assert_eq!(point["reads_per_s"], 0.0);
        assert_eq!(point["bytes_in_per_s"], 100_000.0);
        assert_eq!(point["bytes_out_per_s"], 10_000.0);

        let doc = parse(&sampler.sample(snapshot(13, 300), 1001.0));
        assert_eq!(doc["report"]["requests"], 0);
        assert_eq!(doc["history"].as_array().unwrap().len(), 2);
        assert_eq!(doc["history"][1]["writes_per_s"], 0.0);
    }

    #[test]
    fn history_is_bounded() {
        let mut sampler = Sampler::new(ClientLabels::Address, snapshot(0, 0));
        for i in 0..HISTORY as u64 + 5 {
            sampler.sample(snapshot(i + 1, i), i as f64);
        }
        assert_eq!(sampler.history.len(), HISTORY);
        assert_eq!(sampler.history.front().unwrap().t, 5.0);
    }

    #[test]
    fn user_names_only_when_configured_and_busiest_clients_only() {
        let sampler = Sampler::new(ClientLabels::Address, snapshot(1, 5));
        let text = String::from_utf8(sampler.first_document()).unwrap();
        assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
        let doc = parse(text.as_bytes());
        assert_eq!(doc["report"]["clients"][0]["requests"], 6);

        let sampler = Sampler::new(ClientLabels::AddressAndUser, snapshot(1, 5));
        let doc = parse(&sampler.first_document());
        assert_eq!(doc["report"]["clients"][0]["user"], "alice");
        assert_eq!(doc["report"]["clients"][1]["user"], "bob");

        let mut many = snapshot(1, 5);
        many.clients = (0..MAX_CLIENTS as u64 + 3)
            .map(|i| client(&format!("10.0.1.{i}"), "", i))
            .collect();
        let doc = parse(&Sampler::new(ClientLabels::Address, many).first_document());
        let clients = doc["report"]["clients"].as_array().unwrap();
        assert_eq!(clients.len(), MAX_CLIENTS);
        assert_eq!(clients[0]["address"], format!("10.0.1.{}", MAX_CLIENTS + 2));
        assert_eq!(doc["more_clients"], 3);
    }

    #[test]
    fn the_dashboard_serves_a_document_at_once() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let dashboard = Dashboard::start(tracer, ClientLabels::Address).unwrap();
        let doc = parse(&dashboard.document());
        assert_eq!(doc["report"]["enabled"], true);
        assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn every_file_the_page_names_is_served() {
        let (content_type, page) = asset("/").unwrap();
        assert_eq!(content_type, "text/html; charset=utf-8");
        let page = std::str::from_utf8(page).unwrap();
        let named: Vec<&str> = page
            .split(['"', '\''])
            .filter(|s| s.starts_with("/static/"))
            .collect();
        assert_eq!(named.len(), 5, "{named:?}");
        for path in named {
            assert!(asset(path).is_some(), "{path} is not served");
        }
        // Nothing from elsewhere, and no inline script or style, which the
        // Content-Security-Policy would refuse.
        assert!(!page.contains("http:") && !page.contains("https:"));
        assert!(!page.contains("<script>") && !page.contains("style="));
        assert!(asset("/static/").is_none() && asset("/index.html").is_none());
        assert_eq!(etag(b"a"), etag(b"a"));
        assert_ne!(etag(b"a"), etag(b"b"));
    }
}
