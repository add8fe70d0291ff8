//! Which connections the server takes, and which it lets go to make room.
//!
//! A connection that has not authenticated yet costs nothing to open, so
//! such connections are capped per client address and in all. When a new
//! one would pass a cap, the oldest unauthenticated connection in its group
//! is closed instead of refusing the newcomer: an attacker holding slots
//! open cannot keep a real client out, it only pushes out its own older
//! connections (and each of those also has the pre-authentication deadline).
//! Authenticated connections are never closed to make room.
//!
//! Pure bookkeeping, independent of how sockets are driven: `H` is what
//! the engine needs to close a connection.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimits {
    pub max_connections: usize,
    pub max_unauthenticated: usize,
    pub max_unauthenticated_per_address: usize,
}

/// Why a connection could not be taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every slot is held by an authenticated connection.
    Full,
}

pub struct Table<H> {
    limits: AdmissionLimits,
    entries: HashMap<u64, Entry<H>>,
    /// Unauthenticated connections, by id; ids grow, so the first is the
    /// oldest.
    unauthenticated: BTreeSet<u64>,
    unauthenticated_by_address: HashMap<IpAddr, BTreeSet<u64>>,
    next_id: u64,
}

struct Entry<H> {
    address: IpAddr,
    handle: H,
}

/// A connection let in, and the ones closed to make room for it.
pub struct Admitted<H> {
    pub id: u64,
    pub evicted: Vec<(IpAddr, H)>,
}

impl<H> Table<H> {
    pub fn new(limits: AdmissionLimits) -> Table<H> {
        Table {
            limits,
            entries: HashMap::new(),
            unauthenticated: BTreeSet::new(),
            unauthenticated_by_address: HashMap::new(),
            next_id: 1,
        }
    }

    /// A reload changed the limits: connections beyond them stay, and
    /// newcomers are taken (or evict) as the new ones say.
    pub fn set_limits(&mut self, limits: AdmissionLimits) {
        self.limits = limits;
    }

    /// Takes a new, unauthenticated connection from `address`, evicting
    /// older unauthenticated ones where a cap requires it.
    pub fn admit(&mut self, address: IpAddr, handle: H) -> Result<Admitted<H>, Refusal> {
        let mut evicted = Vec::new();
        if self.entries.len() >= self.limits.max_connections {
            match self.unauthenticated.first().copied() {
                Some(oldest) => evicted.extend(self.remove(oldest)),
                None => return Err(Refusal::Full),
            }
        }
        let from_here = self
            .unauthenticated_by_address
            .get(&address)
            .map_or(0, BTreeSet::len);
        if from_here >= self.limits.max_unauthenticated_per_address {
            let oldest = self.unauthenticated_by_address[&address].first().copied();
            evicted.extend(oldest.and_then(|id| self.remove(id)));
        }
        if self.unauthenticated.len() >= self.limits.max_unauthenticated {
            let oldest = self.unauthenticated.first().copied();
            evicted.extend(oldest.and_then(|id| self.remove(id)));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.entries.insert(id, Entry { address, handle });
        self.unauthenticated.insert(id);
        self.unauthenticated_by_address
            .entry(address)
            .or_default()
            .insert(id);
        Ok(Admitted { id, evicted })
    }

    /// The connection finished authenticating: it no longer counts
    /// against the unauthenticated caps and is never evicted.
    pub fn authenticated(&mut self, id: u64) {
        if self.unauthenticated.remove(&id) {
            if let Some(entry) = self.entries.get(&id) {
                self.forget_address(entry.address, id);
            }
        }
    }

    /// Forgets a connection; returns its handle if it was still here.
    pub fn remove(&mut self, id: u64) -> Option<(IpAddr, H)> {
        let entry = self.entries.remove(&id)?;
        if self.unauthenticated.remove(&id) {
            self.forget_address(entry.address, id);
        }
        Some((entry.address, entry.handle))
    }

    fn forget_address(&mut self, address: IpAddr, id: u64) {
        if let Some(ids) = self.unauthenticated_by_address.get_mut(&address) {
            ids.remove(&id);
            if ids.is_empty() {
                self.unauthenticated_by_address.remove(&address);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn handles(&self) -> impl Iterator<Item = &H> {
        self.entries.values().map(|e| &e.handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    fn table(total: usize, unauth: usize, per_address: usize) -> Table<&'static str> {
        Table::new(AdmissionLimits {
            max_connections: total,
            max_unauthenticated: unauth,
            max_unauthenticated_per_address: per_address,
        })
    }

    fn evicted(a: &Admitted<&'static str>) -> Vec<&'static str> {
        a.evicted.iter().map(|(_, h)| *h).collect()
    }

    #[test]
    fn an_address_over_its_cap_loses_its_oldest_unauthenticated() {
        let mut t = table(100, 100, 2);
        let a1 = t.admit(ip(1), "a1").unwrap();
        t.admit(ip(1), "a2").unwrap();
        t.admit(ip(2), "b1").unwrap();
        let a3 = t.admit(ip(1), "a3").unwrap();
        assert_eq!(evicted(&a3), ["a1"]);
        assert!(t.remove(a1.id).is_none());
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn lowered_limits_keep_who_is_in_and_refuse_newcomers() {
        let mut t = table(3, 100, 100);
        for h in ["a1", "a2", "a3"] {
            let a = t.admit(ip(1), h).unwrap();
            t.authenticated(a.id);
        }
        t.set_limits(AdmissionLimits {
            max_connections: 1,
            max_unauthenticated: 100,
            max_unauthenticated_per_address: 100,
        });
        assert_eq!(t.admit(ip(2), "b1").err(), Some(Refusal::Full));
        assert_eq!(t.len(), 3, "nobody authenticated is closed");
        t.set_limits(AdmissionLimits {
            max_connections: 4,
            max_unauthenticated: 100,
            max_unauthenticated_per_address: 100,
        });
        assert!(t.admit(ip(2), "b1").is_ok());
    }

    #[test]
    fn authenticated_connections_are_never_evicted() {
        let mut t = table(3, 100, 1);
        let a1 = t.admit(ip(1), "a1").unwrap();
        t.authenticated(a1.id);
        let a2 = t.admit(ip(1), "a2").unwrap();
        assert!(
            evicted(&a2).is_empty(),
            "a1 no longer counts as unauthenticated"
        );
        let a3 = t.admit(ip(1), "a3").unwrap();
        assert_eq!(evicted(&a3), ["a2"]);
        t.authenticated(a3.id);
        t.admit(ip(2), "b1").unwrap();
        let b2 = t.admit(ip(3), "c1").unwrap();
        assert_eq!(
            evicted(&b2),
            ["b1"],
            "full: the oldest unauthenticated goes"
        );
        t.authenticated(b2.id);
        assert_eq!(t.admit(ip(4), "d1").err(), Some(Refusal::Full));
    }

    #[test]
    fn the_overall_cap_spans_addresses() {
        let mut t = table(100, 3, 10);
        for (i, h) in ["a", "b", "c"].into_iter().enumerate() {
            assert!(evicted(&t.admit(ip(i as u8), h).unwrap()).is_empty());
        }
        assert_eq!(evicted(&t.admit(ip(9), "d").unwrap()), ["a"]);
        assert_eq!(evicted(&t.admit(ip(9), "e").unwrap()), ["b"]);
        let mut left: Vec<_> = t.handles().copied().collect();
        left.sort();
        assert_eq!(left, ["c", "d", "e"]);
    }
}
