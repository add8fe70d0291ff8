//! Received frames, counted while a connection holds them (queued for the
//! core, or under a write that sends their payload to disk), so that the
//! reader stops receiving when a client makes its connection hold more
//! than its share of memory.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of received frames one connection holds.
#[derive(Clone, Default)]
pub struct Held(Arc<AtomicUsize>);

impl Held {
    pub fn bytes(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// A received frame, counted in its connection's [`Held`] until dropped.
pub struct Frame {
    bytes: Vec<u8>,
    held: Held,
}

impl Frame {
    pub fn new(bytes: Vec<u8>, held: &Held) -> Frame {
        held.0.fetch_add(bytes.len(), Ordering::Relaxed);
        Frame {
            bytes,
            held: held.clone(),
        }
    }

    /// A frame that holds nothing (completions and timers have none).
    pub fn empty() -> Frame {
        Frame {
            bytes: Vec::new(),
            held: Held::default(),
        }
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.held.0.fetch_sub(self.bytes.len(), Ordering::Relaxed);
    }
}

impl Deref for Frame {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A sealed frame is decrypted where it lies.
impl DerefMut for Frame {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_count_while_they_live() {
        let held = Held::default();
        let a = Frame::new(vec![0; 10], &held);
        let b = Frame::new(vec![0; 5], &held);
        assert_eq!(held.bytes(), 15);
        drop(a);
        assert_eq!(held.bytes(), 5);
        drop(b);
        assert_eq!(held.bytes(), 0);
        assert_eq!(Frame::empty().len(), 0);
    }
}
