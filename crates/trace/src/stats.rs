//! The accumulators one thread records into and a reader merges.

use std::net::IpAddr;

use hdrhistogram::Histogram;

use crate::command;
use crate::phase::PHASES;
use crate::snapshot::{
    Buckets, ClientSnapshot, CommandSnapshot, IoSnapshot, ShareSnapshot, Snapshot,
};
use crate::syscall::{Syscall, SYSCALLS};

/// Longer times are recorded as this (an hour, in nanoseconds), which keeps
/// an auto-resizing histogram small whatever a clock glitch reports.
const MAX_VALUE: u64 = 3_600_000_000_000;

/// A log-linear histogram with two significant digits (1 % precision).
#[derive(Clone)]
pub(crate) struct Hist(Histogram<u64>);

impl Default for Hist {
    fn default() -> Hist {
        // Two significant digits are within hdrhistogram's range (0 to 5).
        Hist(Histogram::new(2).expect("valid precision"))
    }
}

impl Hist {
    pub fn record(&mut self, value: u64) {
        // Auto-resizing: recording fails only on allocation failure, and a
        // lost sample is better than a failed request.
        let _ = self.0.record(value.min(MAX_VALUE));
    }

    pub fn merge(&mut self, other: &Hist) {
        let _ = self.0.add(&other.0);
    }

    pub fn buckets(&self) -> Buckets {
        Buckets(
            self.0
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_since_last_iteration()))
                .collect(),
        )
    }
}

#[derive(Clone, Default)]
pub(crate) struct CommandStats {
    pub count: u64,
    pub errors: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub hist: Hist,
}

impl CommandStats {
    pub fn record(&mut self, ns: u64, error: bool) {
        self.min_ns = if self.count == 0 {
            ns
        } else {
            self.min_ns.min(ns)
        };
        self.max_ns = self.max_ns.max(ns);
        self.count += 1;
        self.errors += u64::from(error);
        self.total_ns += ns;
        self.hist.record(ns);
    }

    fn merge(&mut self, o: &CommandStats) {
        if o.count == 0 {
            return;
        }
        self.min_ns = if self.count == 0 {
            o.min_ns
        } else {
            self.min_ns.min(o.min_ns)
        };
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count += o.count;
        self.errors += o.errors;
        self.total_ns += o.total_ns;
        self.hist.merge(&o.hist);
    }
}

#[derive(Clone, Default)]
pub(crate) struct IoStats {
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub hist: Hist,
}

impl IoStats {
    pub fn record(&mut self, ns: u64, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
        self.total_ns += ns;
        self.hist.record(ns);
    }

    fn merge(&mut self, o: &IoStats) {
        self.count += o.count;
        self.bytes += o.bytes;
        self.total_ns += o.total_ns;
        self.hist.merge(&o.hist);
    }

    fn snapshot(&self) -> IoSnapshot {
        IoSnapshot {
            count: self.count,
            bytes: self.bytes,
            total_ns: self.total_ns,
            histogram: self.hist.buckets(),
        }
    }
}

#[derive(Clone, Default)]
pub(crate) struct ShareStats {
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub busy_ns: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
}

impl ShareStats {
    fn merge(&mut self, o: &ShareStats) {
        self.requests += o.requests;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.busy_ns += o.busy_ns;
        self.disk_read_bytes += o.disk_read_bytes;
        self.disk_write_bytes += o.disk_write_bytes;
    }
}

#[derive(Clone, Default)]
pub(crate) struct ClientStats {
    pub connections: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub busy_ns: u64,
}

impl ClientStats {
    pub fn merge(&mut self, o: &ClientStats) {
        self.connections += o.connections;
        self.requests += o.requests;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.busy_ns += o.busy_ns;
    }
}

#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ClientKey {
    /// None for the entry that takes the figures of every client past
    /// [`MAX_CLIENTS`].
    pub address: Option<IpAddr>,
    pub user: String,
}

/// Clients (address and user) a table keeps apart. Every connection adds
/// its address when it closes, so without a bound a client with many
/// addresses (an IPv6 /64) could grow the table without end; past the
/// bound, figures go to one entry shown as "other".
pub(crate) const MAX_CLIENTS: usize = 1024;

/// How [`ClientKey::address`] None is shown.
pub(crate) const OTHER_CLIENTS: &str = "other";

#[derive(Clone)]
pub(crate) struct Stats {
    pub connections: u64,
    pub frames: u64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub phase_ns: [u64; PHASES],
    /// By `command::slot`; boxed and made on first use, as a connection
    /// sees only a few kinds of command.
    pub commands: Vec<Option<Box<CommandStats>>>,
    pub disk_read: IoStats,
    pub disk_write: IoStats,
    pub syscalls: [u64; SYSCALLS],
    /// By share index.
    pub shares: Vec<ShareStats>,
    pub clients: Vec<(ClientKey, ClientStats)>,
}

impl Stats {
    pub fn new(shares: usize) -> Stats {
        Stats {
            connections: 0,
            frames: 0,
            requests: 0,
            bytes_in: 0,
            bytes_out: 0,
            phase_ns: [0; PHASES],
            commands: vec![None; command::SLOTS],
            disk_read: IoStats::default(),
            disk_write: IoStats::default(),
            syscalls: [0; SYSCALLS],
            shares: vec![ShareStats::default(); shares],
            clients: Vec::new(),
        }
    }

    pub fn command(&mut self, code: u16) -> &mut CommandStats {
        let slot = command::slot(code);
        // `slot` is below SLOTS by construction, and `commands` has SLOTS
        // entries.
        self.commands[slot].get_or_insert_with(Box::default)
    }

    /// The figures of the share at `index`, made when a reload added it
    /// after these stats were.
    pub fn share(&mut self, index: usize) -> Option<&mut ShareStats> {
        if self.shares.len() <= index {
            self.shares.resize(index + 1, ShareStats::default());
        }
        self.shares.get_mut(index)
    }

    /// The index of a client's entry, made if missing; once the table
    /// holds [`MAX_CLIENTS`], that of the "other" entry.
    pub fn client_index(&mut self, key: &ClientKey) -> usize {
        if let Some(i) = self.clients.iter().position(|(k, _)| k == key) {
            return i;
        }
        let key = if self.clients.len() < MAX_CLIENTS {
            key.clone()
        } else {
            let other = ClientKey {
                address: None,
                user: String::new(),
            };
            if let Some(i) = self.clients.iter().position(|(k, _)| *k == other) {
                return i;
            }
            other
        };
        self.clients.push((key, ClientStats::default()));
        self.clients.len() - 1
    }

    pub fn merge(&mut self, o: &Stats) {
        self.connections += o.connections;
        self.frames += o.frames;
        self.requests += o.requests;
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        for (a, b) in self.phase_ns.iter_mut().zip(&o.phase_ns) {
            *a += b;
        }
        for (a, b) in self.commands.iter_mut().zip(&o.commands) {
            if let Some(b) = b {
                a.get_or_insert_with(Box::default).merge(b);
            }
        }
        self.disk_read.merge(&o.disk_read);
        self.disk_write.merge(&o.disk_write);
        for (a, b) in self.syscalls.iter_mut().zip(&o.syscalls) {
            *a += b;
        }
        if self.shares.len() < o.shares.len() {
            self.shares.resize(o.shares.len(), ShareStats::default());
        }
        for (a, b) in self.shares.iter_mut().zip(&o.shares) {
            a.merge(b);
        }
        for (key, c) in &o.clients {
            let i = self.client_index(key);
            if let Some((_, mine)) = self.clients.get_mut(i) {
                mine.merge(c);
            }
        }
    }

    pub fn snapshot(&self, share_names: &[String]) -> Snapshot {
        let commands = self
            .commands
            .iter()
            .enumerate()
            .filter_map(|(slot, c)| {
                let c = c.as_ref().filter(|c| c.count > 0)?;
                Some(CommandSnapshot {
                    name: command::slot_name(slot).to_string(),
                    code: command::slot_code(slot),
                    count: c.count,
                    errors: c.errors,
                    total_ns: c.total_ns,
                    min_ns: c.min_ns,
                    max_ns: c.max_ns,
                    histogram: c.hist.buckets(),
                })
            })
            .collect();
        let shares = self
            .shares
            .iter()
            .enumerate()
            .map(|(i, s)| ShareSnapshot {
                name: share_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("#{i}")),
                requests: s.requests,
                bytes_in: s.bytes_in,
                bytes_out: s.bytes_out,
                busy_ns: s.busy_ns,
                disk_read_bytes: s.disk_read_bytes,
                disk_write_bytes: s.disk_write_bytes,
            })
            .collect();
        let clients = self
            .clients
            .iter()
            .map(|(k, c)| ClientSnapshot {
                address: k
                    .address
                    .map_or_else(|| OTHER_CLIENTS.to_string(), |a| a.to_string()),
                user: k.user.clone(),
                connections: c.connections,
                requests: c.requests,
                bytes_in: c.bytes_in,
                bytes_out: c.bytes_out,
                busy_ns: c.busy_ns,
            })
            .collect();
        let syscalls = Syscall::ALL
            .iter()
            .zip(&self.syscalls)
            .filter(|&(_, &n)| n > 0)
            .map(|(s, &n)| (s.name().to_string(), n))
            .collect();
        Snapshot {
            enabled: true,
            elapsed_ns: 0,
            connections: self.connections,
            live_connections: 0,
            frames: self.frames,
            requests: self.requests,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            phase_ns: self.phase_ns,
            commands,
            disk_read: self.disk_read.snapshot(),
            disk_write: self.disk_write.snapshot(),
            syscalls,
            shares,
            clients,
            // The tracer's own, added by Tracer::snapshot.
            logons: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_keeps_two_digits() {
        let mut h = Hist::default();
        for v in [100, 100, 1_000, 123_456] {
            h.record(v);
        }
        let b = h.buckets();
        assert_eq!(b.count(), 4);
        assert_eq!(b.quantile(0.5), 100);
        let top = b.max();
        assert!((123_456..=124_700).contains(&top), "{top}");
        h.record(u64::MAX);
        assert!(h.buckets().max() <= MAX_VALUE + MAX_VALUE / 100);
    }

    #[test]
    fn clients_past_the_bound_share_one_entry() {
        let mut retired = Stats::new(0);
        for n in 0..MAX_CLIENTS as u32 + 500 {
            let mut one = Stats::new(0);
            let key = ClientKey {
                address: Some(IpAddr::from(n.to_be_bytes())),
                user: String::new(),
            };
            let i = one.client_index(&key);
            one.clients[i].1.connections = 1;
            retired.merge(&one);
        }
        assert_eq!(retired.clients.len(), MAX_CLIENTS + 1);
        let s = retired.snapshot(&[]);
        let other = s.clients.iter().find(|c| c.address == OTHER_CLIENTS);
        assert_eq!(other.map(|c| c.connections), Some(500));
        let total: u64 = s.clients.iter().map(|c| c.connections).sum();
        assert_eq!(total, MAX_CLIENTS as u64 + 500);
    }

    #[test]
    fn merging_adds_everything() {
        let key = ClientKey {
            address: Some(IpAddr::from([10, 0, 0, 1])),
            user: "alice".into(),
        };
        let mut a = Stats::new(1);
        a.command(9).record(500, false);
        a.command(9).record(100, true);
        a.disk_write.record(50, 4096);
        a.syscalls[Syscall::Recv.index()] = 2;
        let i = a.client_index(&key);
        a.clients[i].1.requests = 2;
        let mut b = Stats::new(2);
        b.command(9).record(300, false);
        b.command(8).record(1_000, false);
        b.shares[1].requests = 1;
        let i = b.client_index(&key);
        b.clients[i].1.requests = 1;

        let mut total = Stats::new(0);
        total.merge(&a);
        total.merge(&b);
        let s = total.snapshot(&["one".into(), "two".into()]);
        let w = s.command(9).unwrap();
        assert_eq!(
            (w.count, w.errors, w.total_ns, w.min_ns, w.max_ns),
            (3, 1, 900, 100, 500)
        );
        assert_eq!(w.histogram.count(), 3);
        assert_eq!(s.command(8).unwrap().count, 1);
        assert_eq!(s.disk_write.bytes, 4096);
        assert_eq!(s.syscalls["recv"], 2);
        assert_eq!(s.shares.len(), 2);
        assert_eq!(s.shares[1].name, "two");
        assert_eq!(s.shares[1].requests, 1);
        assert_eq!(s.clients.len(), 1);
        assert_eq!(s.clients[0].requests, 3);
        assert_eq!(s.clients[0].address, "10.0.0.1");
    }

    #[test]
    fn unknown_commands_share_one_slot() {
        let mut s = Stats::new(0);
        s.command(0x99).record(1, false);
        s.command(0x1234).record(1, false);
        let snap = s.snapshot(&[]);
        assert_eq!(snap.commands.len(), 1);
        assert_eq!(snap.commands[0].name, "OTHER");
        assert_eq!(snap.commands[0].count, 2);
    }
}
