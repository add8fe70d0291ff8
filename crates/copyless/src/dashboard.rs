//! The live web dashboard on the metrics port: the page at `/`, its
//! scripts and styles under `/static/`, `/report.json`, which the page
//! polls every second, and `/history.json`, the day of minute points.
//!
//! `/report.json` is what the NAS holds now (sessions, open files, room
//! per share, from the same status board as `copyless status`), what
//! `copyless top --json` shows in its live view (the same [`Report`] of
//! the last second, or since start when the last second was idle), the
//! totals since start, the latest failed logons, and five minutes of
//! one-second points for the charts. One sampler thread makes it once a
//! second and keeps it serialised, so a page asking for it costs a copy,
//! however many pages ask. The minute points change once a minute, so
//! they are kept apart and fetched only when they did.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{DefaultHasher, Hasher};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use copyless_core::status::ServerStatus;
use copyless_proto::command;
use copyless_trace::prometheus::ClientLabels;
use copyless_trace::{FailedLogon, Report, Snapshot, Tracer};
use serde::Serialize;
use serde_json::Value;

use crate::metrics::{NasSource, NasView};

/// How often the sampler looks, and so the window of each report.
const INTERVAL: Duration = Duration::from_secs(1);
/// One-second points kept: five minutes.
const HISTORY: usize = 300;
/// Seconds summed into each coarse point.
const MINUTE: f64 = 60.0;
/// Minute points kept: a day. With the one-second points, at most
/// 1740 points of 64 bytes (about 110 KiB), and the day serialised once
/// (under 400 KiB): bounded whatever clients do.
const MINUTES: usize = 24 * 60;
/// Busiest clients shown; as many as `copyless top` shows by default.
const MAX_CLIENTS: usize = 10;
/// Sessions and open files listed; the counts say how many more there are.
const MAX_SESSIONS: usize = 100;
const MAX_OPENS: usize = 50;

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

/// What happened over some seconds: the figures behind a [`Point`].
#[derive(Debug, Clone, Default, PartialEq)]
struct Counts {
    seconds: f64,
    bytes_in: u64,
    bytes_out: u64,
    requests: u64,
    reads: u64,
    writes: u64,
    /// Requests answered with an error status.
    errors: u64,
    /// Logons refused (bad credentials or any other failure).
    failed_logons: u64,
}

/// The logons among `logons` (by outcome) that failed.
fn failed_logons(logons: &BTreeMap<String, u64>) -> u64 {
    ["bad_credentials", "failed"]
        .iter()
        .filter_map(|outcome| logons.get(*outcome))
        .sum()
}

fn errors(snapshot: &Snapshot) -> u64 {
    snapshot.commands.iter().map(|c| c.errors).sum()
}

impl Counts {
    /// The figures of `window` (a difference of two snapshots).
    fn of(window: &Snapshot) -> Counts {
        let count = |code: u16| window.command(code).map_or(0, |c| c.count);
        Counts {
            seconds: window.elapsed_ns as f64 / 1e9,
            bytes_in: window.bytes_in,
            bytes_out: window.bytes_out,
            requests: window.requests,
            reads: count(command::READ),
            writes: count(command::WRITE),
            errors: errors(window),
            failed_logons: failed_logons(&window.logons),
        }
    }

    fn add(&mut self, other: &Counts) {
        self.seconds += other.seconds;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.requests += other.requests;
        self.reads += other.reads;
        self.writes += other.writes;
        self.errors += other.errors;
        self.failed_logons += other.failed_logons;
    }
}

/// One point of the charts: rates averaged over its interval (a second or
/// a minute), and the errors and failed logons counted in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Point {
    /// When the interval ended, in seconds since the Unix epoch.
    t: f64,
    bytes_in_per_s: f64,
    bytes_out_per_s: f64,
    requests_per_s: f64,
    reads_per_s: f64,
    writes_per_s: f64,
    errors: u64,
    failed_logons: u64,
}

impl Point {
    fn new(t: f64, counts: &Counts) -> Point {
        let per_s = |n: u64| {
            if counts.seconds > 0.0 {
                n as f64 / counts.seconds
            } else {
                0.0
            }
        };
        Point {
            t,
            bytes_in_per_s: per_s(counts.bytes_in),
            bytes_out_per_s: per_s(counts.bytes_out),
            requests_per_s: per_s(counts.requests),
            reads_per_s: per_s(counts.reads),
            writes_per_s: per_s(counts.writes),
            errors: counts.errors,
            failed_logons: counts.failed_logons,
        }
    }
}

fn push_bounded<T>(points: &mut VecDeque<T>, cap: usize, point: T) {
    if points.len() == cap {
        points.pop_front();
    }
    points.push_back(point);
}

/// The charts' history: the last [`HISTORY`] seconds one by one, and the
/// last [`MINUTES`] minutes, each the sum of the seconds that ended in it.
#[derive(Debug, Default)]
struct History {
    seconds: VecDeque<Point>,
    minutes: VecDeque<Point>,
    /// The minute being summed (seconds since the epoch / 60) and its sum
    /// so far; it becomes a point when a second of a later minute comes.
    current: Option<(u64, Counts)>,
}

impl History {
    /// Adds the window that ended at `t`; true when that closed a minute.
    fn add(&mut self, t: f64, counts: &Counts) -> bool {
        push_bounded(&mut self.seconds, HISTORY, Point::new(t, counts));
        let minute = (t.max(0.0) / MINUTE) as u64;
        match &mut self.current {
            // A clock set back stays in the minute it left, so that the
            // minute points stay in order.
            Some((m, sum)) if minute <= *m => {
                sum.add(counts);
                false
            }
            current => {
                let closed = current.take().map(|(m, sum)| {
                    let end = (m + 1) as f64 * MINUTE;
                    push_bounded(&mut self.minutes, MINUTES, Point::new(end, &sum));
                });
                *current = Some((minute, counts.clone()));
                closed.is_some()
            }
        }
    }
}

/// Counters since the server started.
#[derive(Debug, Serialize)]
struct Totals {
    uptime_s: f64,
    connections: u64,
    requests: u64,
    bytes_in: u64,
    bytes_out: u64,
    errors: u64,
    failed_logons: u64,
}

/// A share's filesystem, in bytes: `used` is `size - free`, as `df`
/// counts it; `available` is what its users may still fill.
#[derive(Debug, Serialize)]
struct ShareRoom {
    name: String,
    size: u64,
    used: u64,
    free: u64,
    available: u64,
}

/// What the NAS holds now.
#[derive(Debug, Serialize)]
struct Nas {
    /// Each session once (however many channels it has).
    session_count: u64,
    /// One per session on a connection, as `copyless status --json` lists
    /// them, each with `since`; at most [`MAX_SESSIONS`].
    sessions: Vec<Value>,
    more_sessions: usize,
    open_files: u64,
    /// As `copyless status --json` lists them, by share and path; at most
    /// [`MAX_OPENS`].
    opens: Vec<Value>,
    more_opens: usize,
    shares: Vec<ShareRoom>,
}

/// A failed logon as the page lists it; the user only where names are
/// shown.
#[derive(Debug, Serialize)]
struct FailedLogonRow {
    t: f64,
    client: String,
    user: Option<String>,
    outcome: &'static str,
}

/// What `/report.json` holds.
#[derive(Debug, Serialize)]
struct Document<'a> {
    version: &'static str,
    /// Whether user names and paths are shown (see `names_shown` in
    /// `metrics`); when false they are null.
    names_shown: bool,
    totals: Totals,
    /// No request in the last window.
    idle: bool,
    /// The last second (since start in the first second of the endpoint).
    report: &'a Report,
    /// Clients left out of `report.clients`, the busiest shown.
    more_clients: usize,
    /// When the last window was idle, everything since start, so that the
    /// page can show what happened rather than a second of zeros.
    since_start: Option<Report>,
    /// The one-second points, oldest first.
    history: &'a VecDeque<Point>,
    /// The end of the last minute point (`/history.json`), if any: the
    /// page fetches those again when it changes.
    minutes_until: Option<f64>,
    nas: Option<Nas>,
    /// The latest failed logons, newest first.
    failed_logons: Vec<FailedLogonRow>,
}

/// What `/history.json` holds.
#[derive(Debug, Serialize)]
struct MinutesDocument<'a> {
    minutes: &'a VecDeque<Point>,
}

/// What the sampler reads each second.
struct Reading {
    snapshot: Snapshot,
    /// Seconds since the Unix epoch.
    t: f64,
    nas: Option<NasView>,
    failed_logons: Vec<FailedLogon>,
}

/// Turns successive readings into documents; owned by the sampler thread.
struct Sampler {
    names: bool,
    last: Snapshot,
    history: History,
    /// When each live session was first seen (the status board does not
    /// say when it began); only the sessions of the last reading are kept.
    first_seen: HashMap<u64, f64>,
}

impl Sampler {
    fn new(names: bool, first: Snapshot) -> Sampler {
        Sampler {
            names,
            last: first,
            history: History::default(),
            first_seen: HashMap::new(),
        }
    }

    fn labels(&self) -> ClientLabels {
        if self.names {
            ClientLabels::AddressAndUser
        } else {
            ClientLabels::Address
        }
    }

    /// The document for everything since start, before there is a window.
    fn first_document(&mut self, reading: &Reading) -> Vec<u8> {
        self.document(self.last.clone(), true, reading)
    }

    /// The document for the window from the last reading to this one, and
    /// the minute points when a minute closed.
    fn sample(&mut self, reading: Reading) -> (Vec<u8>, Option<Vec<u8>>) {
        let window = reading.snapshot.since(&self.last);
        let minutes = self
            .history
            .add(reading.t, &Counts::of(&window))
            .then(|| self.minutes_document());
        let document = self.document(window, false, &reading);
        self.last = reading.snapshot;
        (document, minutes)
    }

    fn minutes_document(&self) -> Vec<u8> {
        let document = MinutesDocument {
            minutes: &self.history.minutes,
        };
        serde_json::to_vec(&document).unwrap_or_default()
    }

    /// A report of `snapshot` with the busiest clients, and how many more.
    fn report(&self, snapshot: &Snapshot, since_start: bool) -> (Report, usize) {
        let mut snapshot = snapshot.clone();
        snapshot.clients = self.labels().clients(&snapshot.clients);
        let mut report = Report::new(&snapshot, since_start);
        let more = report.clients.len().saturating_sub(MAX_CLIENTS);
        report.clients.truncate(MAX_CLIENTS);
        (report, more)
    }

    fn document(&mut self, window: Snapshot, since_start: bool, reading: &Reading) -> Vec<u8> {
        let now = &reading.snapshot;
        let (report, more_clients) = self.report(&window, since_start);
        let idle = window.requests == 0;
        let since_start = (idle && !since_start).then(|| self.report(now, true).0);
        let nas = reading.nas.as_ref().map(|view| self.nas(view, reading.t));
        let names = self.names;
        let failed = reading
            .failed_logons
            .iter()
            .rev()
            .map(|f| FailedLogonRow {
                t: f.t,
                client: f.client.to_string(),
                user: names.then(|| f.user.clone()),
                outcome: f.outcome,
            })
            .collect();
        let document = Document {
            version: env!("CARGO_PKG_VERSION"),
            names_shown: names,
            totals: Totals {
                uptime_s: now.elapsed_ns as f64 / 1e9,
                connections: now.connections,
                requests: now.requests,
                bytes_in: now.bytes_in,
                bytes_out: now.bytes_out,
                errors: errors(now),
                failed_logons: failed_logons(&now.logons),
            },
            idle,
            report: &report,
            more_clients,
            since_start,
            history: &self.history.seconds,
            minutes_until: self.history.minutes.back().map(|p| p.t),
            nas,
            failed_logons: failed,
        };
        // Numbers, strings and nulls only (a non-finite number becomes
        // null): it always serialises.
        serde_json::to_vec(&document).unwrap_or_default()
    }

    /// The page's view of `view`, at `t`: the lists cut to their caps
    /// before they are formatted, and names left out unless shown.
    fn nas(&mut self, view: &NasView, t: f64) -> Nas {
        let live: HashSet<u64> = view
            .status
            .connections
            .iter()
            .flat_map(|c| c.sessions.iter().map(|s| s.id))
            .collect();
        self.first_seen.retain(|id, _| live.contains(id));
        for id in &live {
            self.first_seen.entry(*id).or_insert(t);
        }
        let shown = ServerStatus {
            connections: view.status.connections.clone(),
            opens: view.status.opens.iter().take(MAX_OPENS).cloned().collect(),
        };
        let mut listed = crate::status::to_json(&shown);
        let mut list = |key: &str| match listed.get_mut(key).map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let mut sessions = list("sessions");
        let more_sessions = sessions.len().saturating_sub(MAX_SESSIONS);
        sessions.truncate(MAX_SESSIONS);
        for session in &mut sessions {
            let since = session["session_id"]
                .as_u64()
                .and_then(|id| self.first_seen.get(&id).copied());
            session["since"] = since.map_or(Value::Null, Value::from);
            if !self.names {
                session["user"] = Value::Null;
            }
        }
        let mut opens = list("open_files");
        if !self.names {
            for open in &mut opens {
                open["user"] = Value::Null;
                open["path"] = Value::Null;
            }
        }
        Nas {
            session_count: view.session_count(),
            sessions,
            more_sessions,
            open_files: view.status.opens.len() as u64,
            more_opens: view.status.opens.len().saturating_sub(MAX_OPENS),
            opens,
            shares: view
                .shares
                .iter()
                .map(|s| ShareRoom {
                    name: s.name.clone(),
                    size: s.size,
                    used: s.size.saturating_sub(s.free),
                    free: s.free,
                    available: s.available,
                })
                .collect(),
        }
    }
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// The latest `/report.json` and `/history.json`, kept up to date by the
/// sampler thread.
pub struct Dashboard {
    document: Mutex<Vec<u8>>,
    minutes: Mutex<Vec<u8>>,
}

impl Dashboard {
    /// Takes the first reading now and starts the thread that reads the
    /// tracer and `nas` every second from then on. With `names`, user
    /// names and paths are shown; else they are null.
    pub fn start(
        tracer: Arc<Tracer>,
        names: bool,
        nas: Option<NasSource>,
    ) -> io::Result<Arc<Dashboard>> {
        let read = move || Reading {
            snapshot: tracer.snapshot(),
            t: now_s(),
            nas: nas.as_ref().map(|read| read()),
            failed_logons: tracer.failed_logons(),
        };
        let first = read();
        let mut sampler = Sampler::new(names, first.snapshot.clone());
        let dashboard = Arc::new(Dashboard {
            document: Mutex::new(sampler.first_document(&first)),
            minutes: Mutex::new(sampler.minutes_document()),
        });
        let shared = Arc::clone(&dashboard);
        std::thread::Builder::new()
            .name("dashboard".into())
            .spawn(move || loop {
                std::thread::sleep(INTERVAL);
                let (document, minutes) = sampler.sample(read());
                *lock(&shared.document) = document;
                if let Some(minutes) = minutes {
                    *lock(&shared.minutes) = minutes;
                }
            })?;
        Ok(dashboard)
    }

    /// The latest `/report.json`.
    pub fn document(&self) -> Vec<u8> {
        lock(&self.document).clone()
    }

    /// The latest `/history.json`.
    pub fn minutes(&self) -> Vec<u8> {
        lock(&self.minutes).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_trace::prometheus::ShareSpace;
    use copyless_trace::snapshot::{ClientSnapshot, CommandSnapshot};

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
                errors: writes / 10,
                total_ns: writes * 20,
                min_ns: 20,
                max_ns: 20,
                histogram: copyless_trace::snapshot::Buckets(vec![(20, writes)]),
            }],
            clients: vec![
                client("10.0.0.7", "alice", writes),
                client("10.0.0.7", "bob", 1),
            ],
            ..Snapshot::default()
        }
    }

    fn reading(snapshot: Snapshot, t: f64) -> Reading {
        Reading {
            snapshot,
            t,
            nas: None,
            failed_logons: Vec::new(),
        }
    }

    fn parse(document: &[u8]) -> Value {
        serde_json::from_slice(document).unwrap()
    }

    fn first(sampler: &mut Sampler, snapshot: Snapshot) -> Value {
        parse(&sampler.first_document(&reading(snapshot, 0.0)))
    }

    #[test]
    fn a_sample_is_the_last_window_with_totals_and_history() {
        let mut sampler = Sampler::new(false, snapshot(10, 100));
        let doc = first(&mut sampler, snapshot(10, 100));
        assert_eq!(doc["report"]["since_start"], true);
        assert_eq!(doc["report"]["requests"], 100);
        assert_eq!(doc["history"], Value::Array(vec![]));
        assert_eq!(doc["idle"], false);
        assert_eq!(doc["nas"], Value::Null);

        let (doc, _) = sampler.sample(reading(snapshot(12, 300), 1000.0));
        let doc = parse(&doc);
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
        assert_eq!(doc["totals"]["errors"], 30);
        assert_eq!(doc["totals"]["uptime_s"], 12.0);
        assert_eq!(doc["idle"], false);
        assert_eq!(doc["since_start"], Value::Null);
        let point = &doc["history"][0];
        assert_eq!(point["t"], 1000.0);
        assert_eq!(point["writes_per_s"], 100.0);
        assert_eq!(point["reads_per_s"], 0.0);
        assert_eq!(point["bytes_in_per_s"], 100_000.0);
        assert_eq!(point["bytes_out_per_s"], 10_000.0);
        assert_eq!(point["errors"], 20);

        // An idle second: the window is all zeros, so the document also
        // carries everything since start, for the page to show instead.
        let (doc, _) = sampler.sample(reading(snapshot(13, 300), 1001.0));
        let doc = parse(&doc);
        assert_eq!(doc["report"]["requests"], 0);
        assert_eq!(doc["idle"], true);
        let since_start: Report = serde_json::from_value(doc["since_start"].clone()).unwrap();
        assert!(since_start.since_start);
        assert_eq!(since_start.requests, 300);
        assert_eq!(since_start.commands[0].count, 300);
        assert_eq!(doc["history"].as_array().unwrap().len(), 2);
        assert_eq!(doc["history"][1]["writes_per_s"], 0.0);
    }

    fn counts(seconds: f64, bytes_in: u64, errors: u64, failed_logons: u64) -> Counts {
        Counts {
            seconds,
            bytes_in,
            bytes_out: bytes_in / 2,
            requests: bytes_in / 1000,
            reads: 1,
            writes: 2,
            errors,
            failed_logons,
        }
    }

    #[test]
    fn minutes_sum_their_seconds() {
        let mut history = History::default();
        // Minute 100 (6000..6060 s): 59 seconds of 1000 bytes and one
        // of 61_000, an error in one, two failed logons in another.
        let start = 6000.0;
        for i in 1..60 {
            let errors = u64::from(i == 5);
            let failed = if i == 7 { 2 } else { 0 };
            assert!(!history.add(start + i as f64, &counts(1.0, 1000, errors, failed)));
        }
        assert!(history.minutes.is_empty());
        // A window ending on the minute's last instant belongs to it...
        assert!(!history.add(6059.999, &counts(1.0, 61_000, 0, 0)));
        // ...and the first second of the next minute closes it.
        assert!(history.add(6060.5, &counts(1.0, 5000, 0, 0)));
        assert_eq!(history.minutes.len(), 1);
        let minute = &history.minutes[0];
        assert_eq!(minute.t, 6060.0);
        // 59 * 1000 + 61_000 bytes over 60 s: 2000/s.
        assert_eq!(minute.bytes_in_per_s, 2000.0);
        assert_eq!(minute.bytes_out_per_s, 1000.0);
        assert_eq!(minute.requests_per_s, 2.0);
        assert_eq!(minute.reads_per_s, 1.0);
        assert_eq!(minute.writes_per_s, 2.0);
        assert_eq!((minute.errors, minute.failed_logons), (1, 2));
        assert_eq!(history.seconds.len(), 61);

        // Seconds missed (the sampler was late) make the average over the
        // seconds that were seen, not over a full minute.
        assert!(history.add(6200.0, &counts(2.0, 4000, 0, 0)));
        let minute = &history.minutes[1];
        assert_eq!(minute.t, 6120.0);
        assert_eq!(minute.bytes_in_per_s, 5000.0);

        // A clock set back stays in the current minute: points stay in
        // order.
        assert!(!history.add(100.0, &counts(2.0, 6000, 0, 0)));
        assert!(history.add(6300.0, &counts(1.0, 1000, 0, 0)));
        assert_eq!(history.minutes[2].t, 6240.0);
        assert_eq!(history.minutes[2].bytes_in_per_s, 2500.0);
        let times: Vec<f64> = history.minutes.iter().map(|p| p.t).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    }

    #[test]
    fn history_is_bounded() {
        let mut history = History::default();
        // Two days and a bit, a second at a time.
        let seconds = 2 * 24 * 3600 + 30;
        let mut closed = 0;
        for i in 0..seconds {
            closed += usize::from(history.add(i as f64 + 0.5, &counts(1.0, 1000, 0, 0)));
        }
        assert_eq!(closed, 2 * 24 * 60);
        assert_eq!(history.seconds.len(), HISTORY);
        assert_eq!(history.minutes.len(), MINUTES);
        assert_eq!(
            history.seconds.front().unwrap().t,
            (seconds - 300) as f64 + 0.5
        );
        // The newest day, each minute a full one.
        assert_eq!(history.minutes.back().unwrap().t, (2 * 24 * 3600) as f64);
        assert_eq!(history.minutes.front().unwrap().t, (24 * 3600 + 60) as f64);
        assert!(history.minutes.iter().all(|p| p.bytes_in_per_s == 1000.0));
        assert!(history.seconds.capacity() < 2 * HISTORY);
        assert!(history.minutes.capacity() < 2 * MINUTES);
        assert_eq!(std::mem::size_of::<Point>(), 64);

        // The day serialised, with figures as long as they get (thirds of
        // big numbers), stays within what the docs say.
        let mut day = History::default();
        let awkward = Counts {
            seconds: 3.0,
            bytes_in: u64::MAX / 7,
            bytes_out: u64::MAX / 11,
            requests: 1 << 40,
            reads: 1 << 39,
            writes: (1 << 38) + 1,
            errors: u64::MAX,
            failed_logons: u64::MAX,
        };
        for i in 0..=MINUTES as u64 {
            day.add(1.7e9 + (i * 60) as f64 + 0.123_456_789, &awkward);
        }
        let sampler = Sampler {
            history: day,
            ..Sampler::new(false, Snapshot::default())
        };
        let size = sampler.minutes_document().len();
        assert!(size < 400 * 1024, "{size}");

        // The sampler hands the minute points over when one closes.
        let mut sampler = Sampler::new(false, snapshot(0, 0));
        let (_, minutes) = sampler.sample(reading(snapshot(1, 1), 59.0));
        assert!(minutes.is_none());
        let (doc, minutes) = sampler.sample(reading(snapshot(2, 2), 61.0));
        let minutes = parse(&minutes.expect("a minute closed"));
        assert_eq!(minutes["minutes"][0]["t"], 60.0);
        assert_eq!(minutes["minutes"][0]["writes_per_s"], 1.0);
        assert_eq!(parse(&doc)["minutes_until"], 60.0);
    }

    #[test]
    fn user_names_only_when_shown_and_busiest_clients_only() {
        let mut sampler = Sampler::new(false, snapshot(1, 5));
        let doc = sampler.first_document(&reading(snapshot(1, 5), 0.0));
        let text = String::from_utf8(doc).unwrap();
        assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
        let doc = parse(text.as_bytes());
        assert_eq!(doc["report"]["clients"][0]["requests"], 6);
        assert_eq!(doc["names_shown"], false);

        let mut sampler = Sampler::new(true, snapshot(1, 5));
        let doc = first(&mut sampler, snapshot(1, 5));
        assert_eq!(doc["report"]["clients"][0]["user"], "alice");
        assert_eq!(doc["report"]["clients"][1]["user"], "bob");
        assert_eq!(doc["names_shown"], true);

        let mut many = snapshot(1, 5);
        many.clients = (0..MAX_CLIENTS as u64 + 3)
            .map(|i| client(&format!("10.0.1.{i}"), "", i))
            .collect();
        let doc = first(&mut Sampler::new(false, many.clone()), many);
        let clients = doc["report"]["clients"].as_array().unwrap();
        assert_eq!(clients.len(), MAX_CLIENTS);
        assert_eq!(clients[0]["address"], format!("10.0.1.{}", MAX_CLIENTS + 2));
        assert_eq!(doc["more_clients"], 3);
    }

    fn nas_reading(t: f64, connections: &[(u64, &[u64])], opens: usize) -> Reading {
        Reading {
            snapshot: snapshot(1, 0),
            t,
            nas: Some(NasView {
                status: crate::metrics::tests::status_of(connections, opens),
                shares: vec![ShareSpace {
                    name: "data".into(),
                    size: 10_000,
                    free: 4000,
                    available: 3000,
                }],
            }),
            failed_logons: vec![
                FailedLogon {
                    t: 5.0,
                    client: [10, 0, 0, 9].into(),
                    user: "mallory".into(),
                    outcome: "bad_credentials",
                },
                FailedLogon {
                    t: 6.0,
                    client: [10, 0, 0, 9].into(),
                    user: "eve".into(),
                    outcome: "failed",
                },
            ],
        }
    }

    #[test]
    fn the_nas_view_lists_sessions_opens_and_room() {
        let mut sampler = Sampler::new(true, snapshot(1, 0));
        // Session 8 has a channel on each of two connections.
        let doc =
            parse(&sampler.first_document(&nas_reading(100.0, &[(1, &[7, 8]), (2, &[8])], 3)));
        let nas = &doc["nas"];
        assert_eq!(nas["session_count"], 2);
        let sessions = nas["sessions"].as_array().unwrap();
        assert_eq!(sessions.len(), 3);
        assert_eq!(sessions[0]["user"], "user7");
        assert_eq!(sessions[0]["client"], "10.0.0.1:50000");
        assert_eq!(sessions[0]["dialect"], "3.1.1");
        assert_eq!(sessions[0]["signing"], "required");
        assert_eq!(sessions[0]["shares"][0], "data");
        assert_eq!(sessions[0]["since"], 100.0);
        assert_eq!(nas["open_files"], 3);
        assert_eq!(nas["more_opens"], 0);
        assert_eq!(nas["opens"][2]["path"], "dir/file002.txt");
        assert_eq!(nas["opens"][2]["user"], "user7");
        assert_eq!(nas["opens"][2]["share"], "data");
        let share = &nas["shares"][0];
        assert_eq!(
            (
                &share["name"],
                &share["size"],
                &share["used"],
                &share["free"],
                &share["available"]
            ),
            (
                &"data".into(),
                &10_000.into(),
                &6000.into(),
                &4000.into(),
                &3000.into()
            )
        );
        assert_eq!(doc["failed_logons"][0]["user"], "eve");
        assert_eq!(doc["failed_logons"][1]["user"], "mallory");
        assert_eq!(doc["failed_logons"][1]["client"], "10.0.0.9");
        assert_eq!(doc["failed_logons"][1]["outcome"], "bad_credentials");

        // Later: session 7 went and came back as 9; 8 keeps when it was
        // first seen; the opens are cut to the cap, the count is not.
        let (doc, _) = sampler.sample(nas_reading(200.0, &[(1, &[8]), (3, &[9])], MAX_OPENS + 5));
        let nas = &parse(&doc)["nas"];
        let since: Vec<(u64, f64)> = nas["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["session_id"].as_u64().unwrap(),
                    s["since"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(since, [(8, 100.0), (9, 200.0)]);
        assert_eq!(sampler.first_seen.len(), 2);
        assert_eq!(nas["open_files"], MAX_OPENS + 5);
        assert_eq!(nas["opens"].as_array().unwrap().len(), MAX_OPENS);
        assert_eq!(nas["more_opens"], 5);

        let many: Vec<(u64, Vec<u64>)> = (0..MAX_SESSIONS as u64 + 2)
            .map(|i| (i, vec![1000 + i]))
            .collect();
        let many: Vec<(u64, &[u64])> = many.iter().map(|(c, s)| (*c, s.as_slice())).collect();
        let (doc, _) = sampler.sample(nas_reading(300.0, &many, 0));
        let nas = &parse(&doc)["nas"];
        assert_eq!(nas["session_count"], MAX_SESSIONS + 2);
        assert_eq!(nas["sessions"].as_array().unwrap().len(), MAX_SESSIONS);
        assert_eq!(nas["more_sessions"], 2);
    }

    #[test]
    fn names_and_paths_are_left_out_unless_shown() {
        let mut sampler = Sampler::new(false, snapshot(1, 0));
        let text = String::from_utf8(sampler.first_document(&nas_reading(100.0, &[(1, &[7])], 2)))
            .unwrap();
        for secret in ["user7", "file00", "mallory", "eve", "alice", "bob"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let doc = parse(text.as_bytes());
        let nas = &doc["nas"];
        // Who is there, without the names: counts, addresses, shares.
        assert_eq!(nas["session_count"], 1);
        assert_eq!(nas["sessions"][0]["user"], Value::Null);
        assert_eq!(nas["sessions"][0]["client"], "10.0.0.1:50000");
        assert_eq!(nas["opens"][0]["path"], Value::Null);
        assert_eq!(nas["opens"][0]["share"], "data");
        assert_eq!(nas["open_files"], 2);
        assert_eq!(doc["failed_logons"][0]["user"], Value::Null);
        assert_eq!(doc["failed_logons"][0]["client"], "10.0.0.9");
    }

    #[test]
    fn the_dashboard_serves_documents_at_once() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let dashboard = Dashboard::start(tracer, false, None).unwrap();
        let doc = parse(&dashboard.document());
        assert_eq!(doc["report"]["enabled"], true);
        assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
        let minutes = parse(&dashboard.minutes());
        assert_eq!(minutes["minutes"], Value::Array(vec![]));
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
