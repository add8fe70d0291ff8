//! The sequence window of message ids a client may use (MS-SMB2 3.3.1.1).
//!
//! Every credit granted lets the client use one more message id; each id is
//! usable once. The window is [low, low + size); ids used out of order are
//! remembered until the low end catches up.

use std::collections::BTreeSet;

#[derive(Debug)]
pub struct CreditWindow {
    low: u64,
    /// Ids granted and not yet used: the window size.
    size: u64,
    /// Granted by replies not yet sent (the rest of a compound is still
    /// being handled): counted against the maximum, usable only once
    /// [`CreditWindow::release`] runs, since the client cannot have seen
    /// them (MS-SMB2 3.3.1.2).
    pending: u64,
    /// Ids inside the window already used.
    used: BTreeSet<u64>,
    max: u64,
}

impl CreditWindow {
    /// A new connection may use message id 0 only.
    pub fn new(max: u16) -> Self {
        CreditWindow {
            low: 0,
            size: 1,
            pending: 0,
            used: BTreeSet::new(),
            max: u64::from(max.max(1)),
        }
    }

    /// Credits the client holds now, or will once the replies it waits
    /// for arrive.
    pub fn outstanding(&self) -> u64 {
        self.size + self.pending - self.used.len() as u64
    }

    /// Consumes ids `mid .. mid + charge`. False if any is outside the
    /// window or already used: the caller must drop the connection.
    pub fn consume(&mut self, mid: u64, charge: u64) -> bool {
        let charge = charge.max(1);
        let Some(end) = mid.checked_add(charge) else {
            return false;
        };
        if mid < self.low || end > self.low + self.size {
            return false;
        }
        if self.used.range(mid..end).next().is_some() {
            return false;
        }
        self.used.extend(mid..end);
        while self.used.first() == Some(&self.low) {
            self.used.pop_first();
            self.low += 1;
            self.size -= 1;
        }
        true
    }

    /// Grants up to `requested` credits (at least one when the client would
    /// otherwise hold none) without exceeding the configured maximum. They
    /// become usable at the next [`CreditWindow::release`].
    pub fn grant(&mut self, requested: u16) -> u16 {
        let room = self.max.saturating_sub(self.outstanding());
        let mut g = u64::from(requested).min(room);
        if g == 0 && self.outstanding() == 0 {
            g = 1;
        }
        self.pending += g;
        g as u16
    }

    /// Replies carrying `granted` of the pending grants are on their way:
    /// the client may use those ids from now on.
    pub fn release(&mut self, granted: u64) {
        let granted = granted.min(self.pending);
        self.size += granted;
        self.pending -= granted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_moves_and_rejects_reuse() {
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1));
        assert!(!w.consume(0, 1));
        assert_eq!(w.grant(10), 10);
        w.release(u64::MAX);
        assert!(w.consume(3, 2));
        assert!(w.consume(1, 2));
        assert!(!w.consume(2, 1));
        assert_eq!(w.outstanding(), 6);
        assert!(w.consume(5, 5));
        assert_eq!(w.outstanding(), 1);
        assert!(!w.consume(11, 1));
        assert_eq!(w.grant(0), 0);
        assert!(w.consume(10, 1));
        assert_eq!(w.outstanding(), 0);
        assert_eq!(w.grant(0), 1);
        w.release(u64::MAX);
        assert!(w.consume(11, 1));
    }

    #[test]
    fn grants_wait_for_release() {
        // A compound: the grant made for its first request does not let
        // the second one use the new ids.
        let mut w = CreditWindow::new(100);
        assert!(w.consume(0, 1));
        assert_eq!(w.grant(50), 50);
        assert!(!w.consume(1, 1));
        assert_eq!(w.outstanding(), 50);
        // Pending grants count against the maximum.
        assert_eq!(w.grant(100), 50);
        w.release(u64::MAX);
        assert!(w.consume(1, 100));
        assert!(!w.consume(101, 1));
    }

    #[test]
    fn grant_is_capped() {
        let mut w = CreditWindow::new(8);
        assert_eq!(w.grant(100), 7);
        w.release(u64::MAX);
        assert_eq!(w.outstanding(), 8);
        assert!(!w.consume(0, 9));
        assert!(w.consume(0, 8));
    }
}
