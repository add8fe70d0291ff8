//! The bytes of directory listings that open enumerations keep, per user
//! and in all, shared by every connection: what bounds them per user and
//! for the whole server (`max_listing_bytes_per_user`,
//! `max_listing_bytes_total`), as `max_listing_bytes_per_connection`
//! bounds one connection's.
//!
//! Each kept listing holds a [`ListingCharge`]; dropping the listing (its
//! enumeration going on past it, the open closing, the connection going)
//! gives the bytes back, so no path that drops a listing can forget to and
//! the ledger is exact whatever ends a connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Default)]
pub struct ListingLedger {
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    /// By user name folded to lower case, as names are matched.
    per_user: HashMap<String, usize>,
}

/// One listing's bytes in the ledger.
#[derive(Debug)]
pub struct ListingCharge {
    ledger: Arc<ListingLedger>,
    user: String,
    bytes: usize,
}

/// The caps a charge must stay within.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub per_user: usize,
    pub total: usize,
}

impl ListingLedger {
    pub fn new() -> Arc<ListingLedger> {
        Arc::new(ListingLedger::default())
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // Only counters live under the lock: a panic elsewhere leaves them
        // consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `user` may still take under `caps`: the smaller of the user's
    /// room and the server's.
    pub fn room(&self, user: &str, caps: Caps) -> usize {
        let held = self.held();
        let mine = held.per_user.get(&fold(user)).copied().unwrap_or(0);
        caps.per_user
            .saturating_sub(mine)
            .min(caps.total.saturating_sub(held.total))
    }

    /// What `user` could take under `caps` were `mine` of its bytes, and
    /// `all` of the server's, given back.
    pub fn room_beside(&self, user: &str, caps: Caps, mine: usize, all: usize) -> usize {
        let held = self.held();
        let user_held = held.per_user.get(&fold(user)).copied().unwrap_or(0);
        caps.per_user
            .saturating_sub(user_held.saturating_sub(mine))
            .min(caps.total.saturating_sub(held.total.saturating_sub(all)))
    }

    /// Charges `bytes` to `user` when they fit within `caps`, as one step:
    /// two connections of a user charging at once cannot both take the
    /// last room.
    pub fn try_charge(
        self: &Arc<Self>,
        user: &str,
        bytes: usize,
        caps: Caps,
    ) -> Option<ListingCharge> {
        let user = fold(user);
        let mut held = self.held();
        let mine = held.per_user.get(&user).copied().unwrap_or(0);
        if mine.saturating_add(bytes) > caps.per_user
            || held.total.saturating_add(bytes) > caps.total
        {
            return None;
        }
        Some(self.add(&mut held, user, bytes))
    }

    /// Charges `bytes` to `user` whatever the caps: for a small listing
    /// held only while one request runs, so that the ledger still says
    /// what is held.
    pub fn charge(self: &Arc<Self>, user: &str, bytes: usize) -> ListingCharge {
        let user = fold(user);
        let mut held = self.held();
        self.add(&mut held, user, bytes)
    }

    fn add(self: &Arc<Self>, held: &mut Held, user: String, bytes: usize) -> ListingCharge {
        held.total += bytes;
        *held.per_user.entry(user.clone()).or_default() += bytes;
        ListingCharge {
            ledger: self.clone(),
            user,
            bytes,
        }
    }

    /// Bytes held now, in all.
    pub fn total(&self) -> usize {
        self.held().total
    }

    /// Bytes `user` holds now.
    pub fn of_user(&self, user: &str) -> usize {
        self.held().per_user.get(&fold(user)).copied().unwrap_or(0)
    }

    /// Users holding any listing now.
    pub fn users(&self) -> usize {
        self.held().per_user.len()
    }
}

impl ListingCharge {
    /// The user it is charged to, folded to lower case.
    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives back all but `bytes` of the charge: what was reserved for a
    /// listing before it was read, once its size is known. A charge never
    /// grows.
    pub fn shrink_to(&mut self, bytes: usize) {
        let back = self.bytes.saturating_sub(bytes);
        if back == 0 {
            return;
        }
        self.bytes -= back;
        let mut held = self.ledger.held();
        held.total = held.total.saturating_sub(back);
        if let Some(n) = held.per_user.get_mut(&self.user) {
            *n = n.saturating_sub(back);
        }
    }
}

impl Drop for ListingCharge {
    fn drop(&mut self) {
        let mut held = self.ledger.held();
        held.total = held.total.saturating_sub(self.bytes);
        if let Some(n) = held.per_user.get_mut(&self.user) {
            *n = n.saturating_sub(self.bytes);
            if *n == 0 {
                held.per_user.remove(&self.user);
            }
        }
    }
}

fn fold(user: &str) -> String {
    user.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Caps = Caps {
        per_user: 100,
        total: 150,
    };

    #[test]
    fn charges_stay_within_the_user_and_the_server_caps() {
        let ledger = ListingLedger::new();
        let a = ledger.try_charge("alice", 60, CAPS).unwrap();
        assert!(
            ledger.try_charge("ALICE", 50, CAPS).is_none(),
            "alice's cap"
        );
        assert_eq!(ledger.room("alice", CAPS), 40);
        let b = ledger.try_charge("bob", 80, CAPS).unwrap();
        assert_eq!(ledger.room("bob", CAPS), 10, "the server's cap binds bob");
        assert!(ledger.try_charge("carol", 11, CAPS).is_none());
        assert_eq!((ledger.total(), ledger.of_user("Alice")), (140, 60));
        drop(a);
        assert_eq!((ledger.total(), ledger.of_user("alice")), (80, 0));
        drop(b);
        assert_eq!((ledger.total(), ledger.users()), (0, 0));
    }

    #[test]
    fn a_forced_charge_is_counted_and_given_back() {
        let ledger = ListingLedger::new();
        let held = ledger.try_charge("alice", 100, CAPS).unwrap();
        let over = ledger.charge("alice", 30);
        assert_eq!(
            (ledger.of_user("alice"), ledger.room("alice", CAPS)),
            (130, 0)
        );
        drop(over);
        drop(held);
        assert_eq!((ledger.total(), ledger.users()), (0, 0));
    }
}
