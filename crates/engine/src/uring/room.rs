//! Room for large reads, kept for the next once its reply has gone.
//!
//! A large read's data lands in its reply's buffer, allocated for it. Past
//! a few hundred KiB glibc's malloc hands such buffers out of fresh pages
//! and gives them back to the kernel when freed at the top of its heap, so
//! each 1 MiB read faulted in and zeroed a good share of its pages before
//! the kernel could copy into them: 237,762 page faults in 3.5 s of 1 MiB
//! reads at depth 32 (`perf stat -e page-faults` on the server), 16,267
//! with buffers kept here. A loop keeps as many as a client at depth 32
//! has in flight (sends complete in batches and hand many back at once: 8
//! kept left 98,608 faults), and lets them go when it has nothing to do.

use std::cell::RefCell;

/// Buffers smaller than this are malloc's to reuse.
const MIN: usize = 256 * 1024;
/// At most this many buffers are kept by a loop...
const MAX_COUNT: usize = 32;
/// ...holding at most this many bytes.
const MAX_BYTES: usize = 48 * 1024 * 1024;

thread_local! {
    static KEPT: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Gives `buf` at least `len` bytes of spare capacity: from a kept buffer
/// where it has too little and the whole is large (what `buf` holds is
/// moved there), else from malloc.
pub fn make_room(buf: &mut Vec<u8>, len: usize) {
    let need = buf.len() + len;
    if buf.capacity() < need && need >= MIN {
        let found = KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            let i = kept.iter().position(|b| b.capacity() >= need)?;
            Some(kept.swap_remove(i))
        });
        if let Some(mut room) = found {
            room.extend_from_slice(buf);
            *buf = room;
        }
    }
    buf.reserve_exact(len);
}

/// Keeps `buf`, whose bytes have gone, for a later read, if it is large
/// and there is place for it.
pub fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() < MIN {
        return;
    }
    buf.clear();
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        let bytes: usize = kept.iter().map(Vec::capacity).sum();
        if kept.len() < MAX_COUNT && bytes + buf.capacity() <= MAX_BYTES {
            kept.push(buf);
        }
    });
}

/// Frees every kept buffer: the loop has nothing to do for now.
pub fn let_go() {
    KEPT.with(|kept| kept.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_given_back_makes_room_for_the_next_large_read() {
        let_go();
        let big = Vec::<u8>::with_capacity(2 * MIN);
        let at = big.as_ptr();
        give_back(big);
        let mut reply = b"head".to_vec();
        make_room(&mut reply, MIN);
        assert_eq!(reply.as_ptr(), at, "the kept buffer");
        assert_eq!(reply, b"head", "what it held moved along");
        assert!(reply.capacity() - reply.len() >= MIN);

        // Nothing kept now: malloc's room.
        let mut other = b"head".to_vec();
        make_room(&mut other, MIN);
        assert_eq!(other, b"head");
        assert!(other.capacity() - other.len() >= MIN);

        // Small buffers and small reads are left to malloc.
        give_back(Vec::with_capacity(MIN / 2));
        let mut small = Vec::new();
        make_room(&mut small, 100);
        assert!(KEPT.with(|k| k.borrow().is_empty()));
    }

    #[test]
    fn what_is_kept_is_bounded_and_let_go() {
        let_go();
        for _ in 0..2 * MAX_COUNT {
            give_back(Vec::with_capacity(MIN));
        }
        assert_eq!(KEPT.with(|k| k.borrow().len()), MAX_COUNT);
        give_back(Vec::with_capacity(MAX_BYTES));
        let bytes: usize = KEPT.with(|k| k.borrow().iter().map(Vec::capacity).sum());
        assert!(bytes <= MAX_BYTES);
        let_go();
        assert!(KEPT.with(|k| k.borrow().is_empty()));
    }
}
