//! What a reader gets: every counter and histogram merged over all
//! threads, in a form that serialises to JSON and that two of can be
//! subtracted to see a window of time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::phase::PHASES;

/// A histogram as (value, count) pairs in ascending value order, one per
/// non-empty bucket; the value is the bucket's highest value (nanoseconds
/// or bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Buckets(pub Vec<(u64, u64)>);

impl Buckets {
    pub fn count(&self) -> u64 {
        self.0.iter().map(|&(_, c)| c).sum()
    }

    /// The value below or at which a fraction `q` (0 to 1) of the samples
    /// lie; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        // The rank of the sample asked for, 1-based, as hdrhistogram does.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(value, count) in &self.0 {
            seen += count;
            if seen >= rank {
                return value;
            }
        }
        self.0.last().map_or(0, |&(v, _)| v)
    }

    pub fn min(&self) -> u64 {
        self.0.iter().find(|&&(_, c)| c > 0).map_or(0, |&(v, _)| v)
    }

    pub fn max(&self) -> u64 {
        self.0
            .iter()
            .rev()
            .find(|&&(_, c)| c > 0)
            .map_or(0, |&(v, _)| v)
    }

    /// Bucket-wise `self - earlier`; buckets that end up empty are dropped.
    pub fn since(&self, earlier: &Buckets) -> Buckets {
        let mut map: BTreeMap<u64, u64> = self.0.iter().copied().collect();
        for &(value, count) in &earlier.0 {
            if let Some(c) = map.get_mut(&value) {
                *c = c.saturating_sub(count);
            }
        }
        Buckets(map.into_iter().filter(|&(_, c)| c > 0).collect())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandSnapshot {
    pub name: String,
    /// None for the catch-all of unknown codes.
    pub code: Option<u16>,
    pub count: u64,
    /// Requests answered with an error status (severity bits 11).
    pub errors: u64,
    /// Sum of the requests' times from first byte received to last byte
    /// sent (a compound's time split evenly among its requests).
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub histogram: Buckets,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoSnapshot {
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    /// Latency of each call, in nanoseconds.
    pub histogram: Buckets,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareSnapshot {
    pub name: String,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Requests' time from first byte to last byte sent.
    pub busy_ns: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSnapshot {
    pub address: String,
    /// Empty before a session is authenticated.
    pub user: String,
    pub connections: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub busy_ns: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// False when the server runs with `[trace] enabled = false`.
    pub enabled: bool,
    /// Time since the server started, or the window's length after
    /// [`Snapshot::since`].
    pub elapsed_ns: u64,
    pub connections: u64,
    pub live_connections: u64,
    /// Transport frames received (a compound is one frame).
    pub frames: u64,
    pub requests: u64,
    /// Bytes of SMB messages received and sent, transport headers included.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Nanoseconds per phase, in the order of `Phase::ALL`.
    pub phase_ns: [u64; PHASES],
    /// Every command seen, by code.
    pub commands: Vec<CommandSnapshot>,
    pub disk_read: IoSnapshot,
    pub disk_write: IoSnapshot,
    /// Calls by kind (`Syscall::name`), only kinds that were made.
    pub syscalls: BTreeMap<String, u64>,
    pub shares: Vec<ShareSnapshot>,
    pub clients: Vec<ClientSnapshot>,
    /// Logons (SESSION_SETUPs that ended) by outcome: `success`,
    /// `bad_credentials`... (the core's `logon::Outcome`).
    #[serde(default)]
    pub logons: BTreeMap<String, u64>,
}

impl Snapshot {
    /// What happened between `earlier` and `self`, two snapshots of the
    /// same server. Minimum and maximum are taken from the histograms, so
    /// they are exact only to the histogram's precision.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let commands = self
            .commands
            .iter()
            .filter_map(|c| {
                let before = earlier.commands.iter().find(|e| e.name == c.name);
                let d = match before {
                    None => c.clone(),
                    Some(e) => {
                        let histogram = c.histogram.since(&e.histogram);
                        CommandSnapshot {
                            name: c.name.clone(),
                            code: c.code,
                            count: c.count.saturating_sub(e.count),
                            errors: c.errors.saturating_sub(e.errors),
                            total_ns: c.total_ns.saturating_sub(e.total_ns),
                            min_ns: histogram.min(),
                            max_ns: histogram.max(),
                            histogram,
                        }
                    }
                };
                (d.count > 0).then_some(d)
            })
            .collect();
        let shares = self
            .shares
            .iter()
            .map(|s| match earlier.shares.iter().find(|e| e.name == s.name) {
                None => s.clone(),
                Some(e) => ShareSnapshot {
                    name: s.name.clone(),
                    requests: s.requests.saturating_sub(e.requests),
                    bytes_in: s.bytes_in.saturating_sub(e.bytes_in),
                    bytes_out: s.bytes_out.saturating_sub(e.bytes_out),
                    busy_ns: s.busy_ns.saturating_sub(e.busy_ns),
                    disk_read_bytes: s.disk_read_bytes.saturating_sub(e.disk_read_bytes),
                    disk_write_bytes: s.disk_write_bytes.saturating_sub(e.disk_write_bytes),
                },
            })
            .collect();
        let clients = self
            .clients
            .iter()
            .filter_map(|c| {
                let d = match earlier
                    .clients
                    .iter()
                    .find(|e| e.address == c.address && e.user == c.user)
                {
                    None => c.clone(),
                    Some(e) => ClientSnapshot {
                        address: c.address.clone(),
                        user: c.user.clone(),
                        connections: c.connections.saturating_sub(e.connections),
                        requests: c.requests.saturating_sub(e.requests),
                        bytes_in: c.bytes_in.saturating_sub(e.bytes_in),
                        bytes_out: c.bytes_out.saturating_sub(e.bytes_out),
                        busy_ns: c.busy_ns.saturating_sub(e.busy_ns),
                    },
                };
                (d.requests > 0 || d.connections > 0).then_some(d)
            })
            .collect();
        let mut phase_ns = [0; PHASES];
        for (i, slot) in phase_ns.iter_mut().enumerate() {
            *slot = self.phase_ns[i].saturating_sub(earlier.phase_ns[i]);
        }
        let syscalls = self
            .syscalls
            .iter()
            .map(|(k, &v)| {
                let before = earlier.syscalls.get(k).copied().unwrap_or(0);
                (k.clone(), v.saturating_sub(before))
            })
            .filter(|&(_, v)| v > 0)
            .collect();
        let logons = self
            .logons
            .iter()
            .map(|(k, &v)| {
                let before = earlier.logons.get(k).copied().unwrap_or(0);
                (k.clone(), v.saturating_sub(before))
            })
            .collect();
        Snapshot {
            enabled: self.enabled,
            elapsed_ns: self.elapsed_ns.saturating_sub(earlier.elapsed_ns),
            connections: self.connections.saturating_sub(earlier.connections),
            live_connections: self.live_connections,
            frames: self.frames.saturating_sub(earlier.frames),
            requests: self.requests.saturating_sub(earlier.requests),
            bytes_in: self.bytes_in.saturating_sub(earlier.bytes_in),
            bytes_out: self.bytes_out.saturating_sub(earlier.bytes_out),
            phase_ns,
            commands,
            disk_read: self.disk_read.since(&earlier.disk_read),
            disk_write: self.disk_write.since(&earlier.disk_write),
            syscalls,
            shares,
            clients,
            logons,
        }
    }

    pub fn command(&self, code: u16) -> Option<&CommandSnapshot> {
        self.commands.iter().find(|c| c.code == Some(code))
    }
}

impl IoSnapshot {
    fn since(&self, earlier: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            count: self.count.saturating_sub(earlier.count),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            total_ns: self.total_ns.saturating_sub(earlier.total_ns),
            histogram: self.histogram.since(&earlier.histogram),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buckets(pairs: &[(u64, u64)]) -> Buckets {
        Buckets(pairs.to_vec())
    }

    #[test]
    fn quantiles_walk_the_cumulative_counts() {
        let b = buckets(&[(10, 50), (20, 40), (1000, 10)]);
        assert_eq!(b.count(), 100);
        assert_eq!(b.quantile(0.5), 10);
        assert_eq!(b.quantile(0.51), 20);
        assert_eq!(b.quantile(0.9), 20);
        assert_eq!(b.quantile(0.99), 1000);
        assert_eq!(b.quantile(0.0), 10);
        assert_eq!(b.min(), 10);
        assert_eq!(b.max(), 1000);
        assert_eq!(Buckets::default().quantile(0.5), 0);
    }

    #[test]
    fn buckets_subtract() {
        let now = buckets(&[(10, 5), (20, 3), (30, 1)]);
        let then = buckets(&[(10, 5), (20, 1)]);
        assert_eq!(now.since(&then), buckets(&[(20, 2), (30, 1)]));
    }

    #[test]
    fn snapshots_subtract() {
        let cmd = |count, total, h: &[(u64, u64)]| CommandSnapshot {
            name: "WRITE".into(),
            code: Some(9),
            count,
            errors: 0,
            total_ns: total,
            min_ns: 1,
            max_ns: 100,
            histogram: buckets(h),
        };
        let earlier = Snapshot {
            elapsed_ns: 1_000,
            requests: 3,
            phase_ns: [1, 2, 3, 4, 5, 6, 7],
            commands: vec![cmd(3, 30, &[(10, 3)])],
            syscalls: [("recv".to_string(), 6)].into_iter().collect(),
            ..Snapshot::default()
        };
        let later = Snapshot {
            elapsed_ns: 3_000,
            requests: 5,
            phase_ns: [2, 4, 6, 8, 10, 12, 14],
            commands: vec![cmd(5, 230, &[(10, 3), (100, 2)])],
            syscalls: [("recv".to_string(), 10), ("send".to_string(), 5)]
                .into_iter()
                .collect(),
            ..Snapshot::default()
        };
        let d = later.since(&earlier);
        assert_eq!(d.elapsed_ns, 2_000);
        assert_eq!(d.requests, 2);
        assert_eq!(d.phase_ns, [1, 2, 3, 4, 5, 6, 7]);
        let w = d.command(9).unwrap();
        assert_eq!(
            (w.count, w.total_ns, w.min_ns, w.max_ns),
            (2, 200, 100, 100)
        );
        assert_eq!(d.syscalls["recv"], 4);
        assert_eq!(d.syscalls["send"], 5);
        let logons = |n| [("success".to_string(), n)].into_iter().collect();
        let then = Snapshot {
            logons: logons(2),
            ..Snapshot::default()
        };
        let now = Snapshot {
            logons: logons(5),
            ..Snapshot::default()
        };
        assert_eq!(now.since(&then).logons["success"], 3);
        // Nothing happened to a command in the window: it is left out.
        assert!(later.since(&later).commands.is_empty());
    }

    #[test]
    fn json_round_trip() {
        let s = Snapshot {
            enabled: true,
            requests: 7,
            commands: vec![CommandSnapshot {
                name: "READ".into(),
                code: Some(8),
                count: 7,
                histogram: buckets(&[(1023, 7)]),
                ..CommandSnapshot::default()
            }],
            ..Snapshot::default()
        };
        let text = serde_json::to_string(&s).unwrap();
        assert!(text.contains("\"histogram\":[[1023,7]]"), "{text}");
        let back: Snapshot = serde_json::from_str(&text).unwrap();
        assert_eq!(back, s);
    }
}
