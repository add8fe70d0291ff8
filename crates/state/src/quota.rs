//! Caps on opens shared by every connection: in all, and per user. Each
//! open holds an [`OpenSlot`]; dropping the open gives the slot back, so no
//! path that closes an open can forget to.
//!
//! Every file open holds a descriptor, so the overall cap keeps the server
//! clear of the process's descriptor limit (and room for new connections),
//! and the per-user cap keeps one user from taking what others need.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct OpenQuota {
    used: Mutex<Usage>,
}

#[derive(Debug)]
struct Usage {
    max_total: u32,
    max_per_user: u32,
    total: u32,
    /// By user name folded to lower case, as names are matched.
    per_user: HashMap<String, u32>,
}

/// One open's share of the quota.
#[derive(Debug)]
pub struct OpenSlot {
    quota: Arc<OpenQuota>,
    user: String,
}

impl OpenQuota {
    pub fn new(max_total: u32, max_per_user: u32) -> Arc<OpenQuota> {
        Arc::new(OpenQuota {
            used: Mutex::new(Usage {
                max_total,
                max_per_user,
                total: 0,
                per_user: HashMap::new(),
            }),
        })
    }

    /// New caps: opens held beyond them stay, and no more are given
    /// until they are back below.
    pub fn set_caps(&self, max_total: u32, max_per_user: u32) {
        let mut used = self.used();
        used.max_total = max_total;
        used.max_per_user = max_per_user;
    }

    fn used(&self) -> std::sync::MutexGuard<'_, Usage> {
        // Only counters live under the lock: a panic elsewhere leaves them
        // consistent.
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for one more open of `user`, or None when the user or the
    /// server is at its cap.
    pub fn acquire(self: &Arc<Self>, user: &str) -> Option<OpenSlot> {
        let user = user.to_lowercase();
        let mut used = self.used();
        let mine = used.per_user.get(&user).copied().unwrap_or(0);
        if used.total >= used.max_total || mine >= used.max_per_user {
            return None;
        }
        used.total += 1;
        used.per_user.insert(user.clone(), mine + 1);
        Some(OpenSlot {
            quota: self.clone(),
            user,
        })
    }

    /// Opens held now, in all.
    pub fn total(&self) -> u32 {
        self.used().total
    }
}

impl Drop for OpenSlot {
    fn drop(&mut self) {
        let mut used = self.quota.used();
        used.total = used.total.saturating_sub(1);
        if let Some(n) = used.per_user.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                used.per_user.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_user_and_in_all() {
        let q = OpenQuota::new(5, 3);
        let alice: Vec<_> = (0..3).map(|_| q.acquire("alice").unwrap()).collect();
        assert!(q.acquire("ALICE").is_none(), "alice is at her cap");
        let bob: Vec<_> = (0..2).map(|_| q.acquire("bob").unwrap()).collect();
        assert!(q.acquire("carol").is_none(), "the server is full");
        assert_eq!(q.total(), 5);
        drop(alice);
        assert_eq!(q.total(), 2);
        let _carol = q.acquire("carol").unwrap();
        drop(bob);
        assert_eq!(q.total(), 1);
        assert!(q.used().per_user.keys().eq(["carol"].iter()));
    }

    #[test]
    fn lowered_caps_keep_what_is_held() {
        let q = OpenQuota::new(4, 4);
        let held: Vec<_> = (0..3).map(|_| q.acquire("alice").unwrap()).collect();
        q.set_caps(2, 2);
        assert!(q.acquire("alice").is_none(), "alice is above her new cap");
        assert!(
            q.acquire("bob").is_none(),
            "the server is above its new cap"
        );
        assert_eq!(q.total(), 3);
        drop(held);
        let _bob = q.acquire("bob").unwrap();
        q.set_caps(8, 8);
        let more: Vec<_> = (0..7).map(|_| q.acquire("carol")).collect();
        assert!(
            more.iter().all(Option::is_some),
            "raised caps give more at once"
        );
    }
}
