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
            used: BTreeSet::new(),
            max: u64::from(max.max(1)),
        }
    }

    /// Credits the client holds now.
    pub fn outstanding(&self) -> u64 {
        self.size - self.used.len() as u64
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
    /// otherwise hold none) without exceeding the configured maximum.
    pub fn grant(&mut self, requested: u16) -> u16 {
        let room = self.max.saturating_sub(self.outstanding());
        let mut g = u64::from(requested).min(room);
        if g == 0 && self.outstanding() == 0 {
            g = 1;
        }
        self.size += g;
        g as u16
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
        assert!(w.consume(11, 1));
    }

    #[test]
    fn grant_is_capped() {
        let mut w = CreditWindow::new(8);
        assert_eq!(w.grant(100), 7);
        assert_eq!(w.outstanding(), 8);
        assert!(!w.consume(0, 9));
        assert!(w.consume(0, 8));
    }
}
