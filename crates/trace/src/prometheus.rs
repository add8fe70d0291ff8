//! The Prometheus (OpenMetrics) text of a snapshot, through
//! `prometheus-client`'s encoder.

use std::collections::BTreeMap;
use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::phase::Phase;
use crate::snapshot::{Buckets, ClientSnapshot, Snapshot};

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`encode_classic`]'s text.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// What the per-client series are labelled with. User names are worth
/// keeping from whoever can scrape the endpoint unless asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientLabels {
    /// The client's address alone; the figures of all its users add up.
    Address,
    /// The client's address and the user name.
    AddressAndUser,
}

impl ClientLabels {
    /// The clients as these labels tell them apart. With `Address`, the
    /// figures of all users of one address add up and the user names are
    /// left out, for every view that shows clients to whoever can reach
    /// the endpoint (these series, the dashboard).
    pub fn clients(self, clients: &[ClientSnapshot]) -> Vec<ClientSnapshot> {
        match self {
            ClientLabels::AddressAndUser => clients.to_vec(),
            ClientLabels::Address => {
                let mut by_address: BTreeMap<&str, ClientSnapshot> = BTreeMap::new();
                for c in clients {
                    let sum = by_address.entry(&c.address).or_default();
                    sum.connections = sum.connections.saturating_add(c.connections);
                    sum.requests = sum.requests.saturating_add(c.requests);
                    sum.bytes_in = sum.bytes_in.saturating_add(c.bytes_in);
                    sum.bytes_out = sum.bytes_out.saturating_add(c.bytes_out);
                    sum.busy_ns = sum.busy_ns.saturating_add(c.busy_ns);
                }
                by_address
                    .into_iter()
                    .map(|(address, sum)| ClientSnapshot {
                        address: address.to_string(),
                        ..sum
                    })
                    .collect()
            }
        }
    }
}

/// The per-client rows to export, with their labels.
fn client_series(
    clients: &[ClientSnapshot],
    labels: ClientLabels,
) -> Vec<(Labels, ClientSnapshot)> {
    labels
        .clients(clients)
        .into_iter()
        .map(|c| {
            let mut l = vec![("address", c.address.clone())];
            if labels == ClientLabels::AddressAndUser {
                l.push(("user", c.user.clone()));
            }
            (l, c)
        })
        .collect()
}

/// Bucket bounds in seconds: 1 us to about 67 s in powers of two.
fn bounds() -> impl Iterator<Item = f64> {
    (0..27).map(|k| f64::from(1u32 << k) * 1e-6)
}

/// Per-bucket (not cumulative) counts for the encoder, `+Inf` last.
fn histogram_buckets(b: &Buckets) -> Vec<(f64, u64)> {
    let mut out: Vec<(f64, u64)> = bounds().map(|le| (le, 0)).collect();
    out.push((f64::INFINITY, 0));
    for &(ns, count) in &b.0 {
        let seconds = ns as f64 / 1e9;
        let i = out
            .iter()
            .position(|&(le, _)| seconds <= le)
            .unwrap_or(out.len() - 1);
        if let Some((_, c)) = out.get_mut(i) {
            *c += count;
        }
    }
    out
}

struct Hist<'a> {
    sum_ns: u64,
    count: u64,
    buckets: &'a Buckets,
}

fn counters(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    rows: impl IntoIterator<Item = (Labels, f64)>,
) -> fmt::Result {
    let mut metric = enc.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for (labels, value) in rows {
        encode_counter(&mut metric, &labels, value)?;
    }
    Ok(())
}

fn encode_counter(metric: &mut MetricEncoder, labels: &Labels, value: f64) -> fmt::Result {
    if labels.is_empty() {
        metric.encode_counter::<NoLabelSet, _, f64>(&value, None)
    } else {
        metric
            .encode_family(labels)?
            .encode_counter::<NoLabelSet, _, f64>(&value, None)
    }
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&value)
}

fn histograms<'a>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (Labels, Hist<'a>)>,
) -> fmt::Result {
    let mut metric =
        enc.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    for (labels, h) in rows {
        metric
            .encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(
                h.sum_ns as f64 / 1e9,
                h.count,
                &histogram_buckets(h.buckets),
                None,
            )?;
    }
    Ok(())
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// What the server holds now, beside the tracer's counters: sessions,
/// open files, and each share's room.
#[derive(Debug, Clone, Default)]
pub struct NasGauges {
    pub sessions: u64,
    pub open_files: u64,
    /// Per share: its name, and its filesystem's size, free bytes and
    /// bytes free to unprivileged users.
    pub shares: Vec<ShareSpace>,
}

#[derive(Debug, Clone, Default)]
pub struct ShareSpace {
    pub name: String,
    pub size: u64,
    pub free: u64,
    pub available: u64,
}

#[derive(Debug)]
struct NasCollector(NasGauges);

impl prometheus_client::collector::Collector for NasCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let g = &self.0;
        let enc = &mut enc;
        gauge(
            enc,
            "sessions",
            "Authenticated sessions now",
            g.sessions as f64,
        )?;
        gauge(
            enc,
            "open_files",
            "Files and folders open now",
            g.open_files as f64,
        )?;
        for (name, help, value) in [
            (
                "share_size",
                "Size of the filesystem each share is on",
                (|s: &ShareSpace| s.size) as fn(&ShareSpace) -> u64,
            ),
            ("share_free", "Free space where each share is", |s| s.free),
            (
                "share_available",
                "Free space each share's users may fill",
                |s| s.available,
            ),
        ] {
            let mut metric =
                enc.encode_descriptor(name, help, Some(&Unit::Bytes), MetricType::Gauge)?;
            for s in &g.shares {
                metric
                    .encode_family(&vec![("share", s.name.clone())])?
                    .encode_gauge(&(value(s) as f64))?;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct SnapshotCollector(Snapshot, ClientLabels);

impl prometheus_client::collector::Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        let s = &self.0;
        let enc = &mut enc;
        gauge(
            enc,
            "tracing_enabled",
            "1 when per-request tracing is on",
            if s.enabled { 1.0 } else { 0.0 },
        )?;
        gauge(
            enc,
            "uptime_seconds",
            "Time since the server started",
            seconds(s.elapsed_ns),
        )?;
        gauge(
            enc,
            "open_connections",
            "Client connections open now",
            s.live_connections as f64,
        )?;
        counters(
            enc,
            "connections",
            "Client connections accepted",
            None,
            [(vec![], s.connections as f64)],
        )?;
        counters(
            enc,
            "logons",
            "SMB logons (session setups that ended) by outcome",
            None,
            s.logons
                .iter()
                .map(|(outcome, &n)| (vec![("outcome", outcome.clone())], n as f64)),
        )?;
        counters(
            enc,
            "frames",
            "Transport frames received (a compound is one)",
            None,
            [(vec![], s.frames as f64)],
        )?;
        counters(
            enc,
            "received",
            "Bytes of SMB messages received",
            Some(&Unit::Bytes),
            [(vec![], s.bytes_in as f64)],
        )?;
        counters(
            enc,
            "sent",
            "Bytes of SMB messages sent",
            Some(&Unit::Bytes),
            [(vec![], s.bytes_out as f64)],
        )?;
        counters(
            enc,
            "phase",
            "Time spent in each phase of request handling",
            Some(&Unit::Seconds),
            Phase::ALL.iter().map(|p| {
                (
                    vec![("phase", p.name().to_string())],
                    seconds(s.phase_ns[p.index()]),
                )
            }),
        )?;
        counters(
            enc,
            "requests",
            "SMB2 requests by command",
            None,
            s.commands
                .iter()
                .map(|c| (vec![("command", c.name.clone())], c.count as f64)),
        )?;
        counters(
            enc,
            "request_errors",
            "SMB2 requests answered with an error status",
            None,
            s.commands
                .iter()
                .map(|c| (vec![("command", c.name.clone())], c.errors as f64)),
        )?;
        histograms(
            enc,
            "request_duration",
            "Time from a request's first byte received to its reply's last byte sent",
            s.commands.iter().map(|c| {
                (
                    vec![("command", c.name.clone())],
                    Hist {
                        sum_ns: c.total_ns,
                        count: c.count,
                        buckets: &c.histogram,
                    },
                )
            }),
        )?;
        let disk = [("read", &s.disk_read), ("write", &s.disk_write)];
        histograms(
            enc,
            "disk_io_duration",
            "Latency of file reads and writes",
            disk.iter().map(|(op, io)| {
                (
                    vec![("op", op.to_string())],
                    Hist {
                        sum_ns: io.total_ns,
                        count: io.count,
                        buckets: &io.histogram,
                    },
                )
            }),
        )?;
        counters(
            enc,
            "disk_io",
            "Bytes read from and written to files",
            Some(&Unit::Bytes),
            disk.iter()
                .map(|(op, io)| (vec![("op", op.to_string())], io.bytes as f64)),
        )?;
        counters(
            enc,
            "syscalls",
            "Socket calls, and calls into the filesystem, by kind",
            None,
            s.syscalls
                .iter()
                .map(|(k, &v)| (vec![("kind", k.clone())], v as f64)),
        )?;
        let share = |name: &str| vec![("share", name.to_string())];
        counters(
            enc,
            "share_requests",
            "Requests by share",
            None,
            s.shares.iter().map(|x| (share(&x.name), x.requests as f64)),
        )?;
        counters(
            enc,
            "share_received",
            "Bytes received by share",
            Some(&Unit::Bytes),
            s.shares.iter().map(|x| (share(&x.name), x.bytes_in as f64)),
        )?;
        counters(
            enc,
            "share_sent",
            "Bytes sent by share",
            Some(&Unit::Bytes),
            s.shares
                .iter()
                .map(|x| (share(&x.name), x.bytes_out as f64)),
        )?;
        counters(
            enc,
            "share_busy",
            "Request time by share",
            Some(&Unit::Seconds),
            s.shares
                .iter()
                .map(|x| (share(&x.name), seconds(x.busy_ns))),
        )?;
        let clients = client_series(&s.clients, self.1);
        let by = match self.1 {
            ClientLabels::Address => "client address",
            ClientLabels::AddressAndUser => "client address and user",
        };
        counters(
            enc,
            "client_requests",
            &format!("Requests by {by}"),
            None,
            clients.iter().map(|(l, c)| (l.clone(), c.requests as f64)),
        )?;
        counters(
            enc,
            "client_received",
            &format!("Bytes received by {by}"),
            Some(&Unit::Bytes),
            clients.iter().map(|(l, c)| (l.clone(), c.bytes_in as f64)),
        )?;
        counters(
            enc,
            "client_sent",
            &format!("Bytes sent by {by}"),
            Some(&Unit::Bytes),
            clients.iter().map(|(l, c)| (l.clone(), c.bytes_out as f64)),
        )?;
        counters(
            enc,
            "client_busy",
            &format!("Request time by {by}"),
            Some(&Unit::Seconds),
            clients.iter().map(|(l, c)| (l.clone(), seconds(c.busy_ns))),
        )?;
        Ok(())
    }
}

/// The snapshot as Prometheus text (OpenMetrics), every name prefixed
/// `copyless_`.
pub fn encode(snapshot: &Snapshot, clients: ClientLabels, nas: Option<&NasGauges>) -> String {
    let mut registry = Registry::with_prefix("copyless");
    registry.register_collector(Box::new(SnapshotCollector(snapshot.clone(), clients)));
    if let Some(nas) = nas {
        registry.register_collector(Box::new(NasCollector(nas.clone())));
    }
    let mut text = String::new();
    // Writing to a String cannot fail, and our collector returns errors
    // only from the writer.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

/// The snapshot in the older Prometheus text format (0.0.4), for scrapers
/// that do not ask for OpenMetrics: there a counter's family is named with
/// its `_total` suffix, and there are no `# UNIT` or `# EOF` lines.
pub fn encode_classic(
    snapshot: &Snapshot,
    clients: ClientLabels,
    nas: Option<&NasGauges>,
) -> String {
    let open = encode(snapshot, clients, nas);
    let counters: Vec<&str> = open
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open.len());
    for line in open.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(&name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{ClientSnapshot, CommandSnapshot, ShareSnapshot};

    fn sample() -> Snapshot {
        Snapshot {
            enabled: true,
            elapsed_ns: 5_000_000_000,
            connections: 2,
            live_connections: 1,
            requests: 3,
            bytes_in: 300,
            bytes_out: 200,
            phase_ns: [1_000_000_000, 0, 0, 0, 500_000_000, 0, 0],
            commands: vec![CommandSnapshot {
                name: "WRITE".into(),
                code: Some(9),
                count: 3,
                errors: 1,
                total_ns: 3_000_000,
                min_ns: 500,
                max_ns: 2_000_000,
                histogram: Buckets(vec![(500, 1), (500_000, 1), (2_000_000, 1)]),
            }],
            shares: vec![ShareSnapshot {
                name: "data".into(),
                requests: 3,
                ..ShareSnapshot::default()
            }],
            clients: vec![ClientSnapshot {
                address: "10.1.2.3".into(),
                user: "alice".into(),
                requests: 3,
                ..ClientSnapshot::default()
            }],
            syscalls: [("recv".to_string(), 6)].into_iter().collect(),
            logons: [
                ("success".to_string(), 2),
                ("bad_credentials".to_string(), 7),
            ]
            .into_iter()
            .collect(),
            ..Snapshot::default()
        }
    }

    #[test]
    fn buckets_fall_under_their_bound() {
        let b = histogram_buckets(&Buckets(vec![
            (500, 1),
            (1_000, 2),
            (1_001, 4),
            (u64::MAX, 8),
        ]));
        assert_eq!(b[0], (1e-6, 3));
        assert_eq!(b[1], (2e-6, 4));
        assert_eq!(b.last(), Some(&(f64::INFINITY, 8)));
        assert_eq!(b.iter().map(|&(_, c)| c).sum::<u64>(), 15);
    }

    #[test]
    fn text_has_the_metrics() {
        let text = encode(&sample(), ClientLabels::AddressAndUser, None);
        for line in [
            "copyless_requests_total{command=\"WRITE\"} 3.0",
            "copyless_request_errors_total{command=\"WRITE\"} 1.0",
            "copyless_phase_seconds_total{phase=\"waiting\"} 1.0",
            "copyless_phase_seconds_total{phase=\"running\"} 0.5",
            "copyless_request_duration_seconds_count{command=\"WRITE\"} 3",
            "copyless_request_duration_seconds_bucket{le=\"+Inf\",command=\"WRITE\"} 3",
            "copyless_request_duration_seconds_bucket{le=\"0.000001\",command=\"WRITE\"} 1",
            "copyless_share_requests_total{share=\"data\"} 3.0",
            "copyless_client_requests_total{address=\"10.1.2.3\",user=\"alice\"} 3.0",
            "copyless_syscalls_total{kind=\"recv\"} 6.0",
            "copyless_open_connections 1.0",
            "copyless_logons_total{outcome=\"success\"} 2.0",
            "copyless_logons_total{outcome=\"bad_credentials\"} 7.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn label_values_from_clients_are_escaped() {
        let mut s = sample();
        s.clients[0].user = "evil\"} 1\nfake_metric 2".into();
        for text in [
            encode(&s, ClientLabels::AddressAndUser, None),
            encode_classic(&s, ClientLabels::AddressAndUser, None),
        ] {
            assert!(
                !text.lines().any(|l| l.starts_with("fake_metric")),
                "{text}"
            );
            assert!(
                text.contains(r#"user="evil\"} 1\nfake_metric 2""#),
                "{text}"
            );
        }
    }

    #[test]
    fn classic_text_names_counters_with_their_suffix() {
        let text = encode_classic(&sample(), ClientLabels::Address, None);
        for line in [
            "# TYPE copyless_requests_total counter",
            "# HELP copyless_requests_total SMB2 requests by command",
            "copyless_requests_total{command=\"WRITE\"} 3.0",
            "# TYPE copyless_phase_seconds_total counter",
            "# TYPE copyless_request_duration_seconds histogram",
            "# TYPE copyless_open_connections gauge",
            "copyless_open_connections 1.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("# UNIT"));
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn user_names_are_labels_only_when_asked_for() {
        let mut s = sample();
        let bob = |address: &str, requests| ClientSnapshot {
            address: address.into(),
            user: "bob".into(),
            requests,
            bytes_in: 10,
            busy_ns: 1_000_000_000,
            ..ClientSnapshot::default()
        };
        s.clients.push(bob("10.1.2.3", 4));
        s.clients.push(bob("10.9.9.9", 1));

        for text in [
            encode(&s, ClientLabels::Address, None),
            encode_classic(&s, ClientLabels::Address, None),
        ] {
            assert!(!text.contains("user="), "{text}");
            assert!(!text.contains("alice") && !text.contains("bob"), "{text}");
            for line in [
                "copyless_client_requests_total{address=\"10.1.2.3\"} 7.0",
                "copyless_client_requests_total{address=\"10.9.9.9\"} 1.0",
                "copyless_client_received_bytes_total{address=\"10.1.2.3\"} 10.0",
                "copyless_client_busy_seconds_total{address=\"10.9.9.9\"} 1.0",
            ] {
                assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
            }
            assert!(text.contains("Requests by client address\n"), "{text}");
        }

        let text = encode(&s, ClientLabels::AddressAndUser, None);
        for line in [
            "copyless_client_requests_total{address=\"10.1.2.3\",user=\"alice\"} 3.0",
            "copyless_client_requests_total{address=\"10.1.2.3\",user=\"bob\"} 4.0",
            "copyless_client_requests_total{address=\"10.9.9.9\",user=\"bob\"} 1.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(
            text.contains("Requests by client address and user\n"),
            "{text}"
        );
    }
}
