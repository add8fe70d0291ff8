//! Buffers the kernel picks from when bytes arrive (a provided-buffer
//! ring, kernel 5.19 and later): a connection between frames holds no
//! receive buffer of its own, so an idle one costs no memory for it. The
//! loop copies the frames out of a buffer as soon as its receive
//! completes, and gives the buffer back at once.

use std::alloc::{self, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::IoUring;

const PAGE: usize = 4096;

/// The group receives name to draw from this pool.
pub(crate) const GROUP: u16 = 0;

pub(crate) struct RecvPool {
    /// The ring of entries the kernel reads (page-aligned, shared with
    /// the kernel while registered).
    entries: *mut BufRingEntry,
    layout: Layout,
    count: u16,
    /// The buffers, one after another: memory the kernel writes into, so
    /// only ever reached through raw pointers.
    bufs: *mut u8,
    bufs_layout: Layout,
    len: usize,
    /// The next tail to publish.
    tail: u16,
}

impl RecvPool {
    /// Registers `count` (a power of two) buffers of `len` bytes each on
    /// `ring`. The pool must be dropped after the ring (the ring's
    /// destruction ends the registration): see `Ops`.
    pub fn register(ring: &IoUring, count: u16, len: usize) -> io::Result<RecvPool> {
        if !count.is_power_of_two() || len > u32::MAX as usize {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let size = usize::from(count) * std::mem::size_of::<BufRingEntry>();
        let layout = Layout::from_size_align(size.max(PAGE), PAGE)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let bufs_layout = Layout::from_size_align((usize::from(count) * len).max(1), PAGE)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout has a non-zero size.
        let bufs = unsafe { alloc::alloc(bufs_layout) };
        if bufs.is_null() {
            // SAFETY: allocated just above with this layout.
            unsafe { alloc::dealloc(entries.cast(), layout) };
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        let mut pool = RecvPool {
            entries,
            layout,
            count,
            bufs,
            bufs_layout,
            len,
            tail: 0,
        };
        // SAFETY: `entries` points to `count` zeroed entries in page-aligned
        // memory that lives until the pool is dropped, after the ring.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, count, GROUP, 0)?;
        }
        for bid in 0..count {
            pool.give_back(bid);
        }
        Ok(pool)
    }

    pub fn buffer_len(&self) -> usize {
        self.len
    }

    /// The first `n` bytes of buffer `bid`, which a receive filled: the
    /// kernel does not touch it again until it is given back.
    pub fn bytes(&self, bid: u16, n: usize) -> &[u8] {
        if bid >= self.count {
            return &[];
        }
        // SAFETY: buffer `bid` lies within the allocation; its first `n`
        // bytes (at most its length) were written by the receive that
        // completed with it, and nothing writes them until `give_back`,
        // which takes `&mut self` and so ends this borrow first.
        unsafe {
            std::slice::from_raw_parts(self.bufs.add(usize::from(bid) * self.len), n.min(self.len))
        }
    }

    /// Hands buffer `bid` back to the kernel to fill again.
    pub fn give_back(&mut self, bid: u16) {
        if bid >= self.count {
            return;
        }
        let slot = usize::from(self.tail & (self.count - 1));
        // SAFETY: buffer `bid` lies within the allocation.
        let addr = unsafe { self.bufs.add(usize::from(bid) * self.len) };
        // SAFETY: `slot` is below `count`, within the entries allocated in
        // `register`; the kernel reads an entry only once the tail
        // published below covers it, and this one is past the tail.
        unsafe {
            let e = &mut *self.entries.add(slot);
            e.set_addr(addr as u64);
            e.set_len(self.len as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail lies in the first entry's reserved field
        // (`BufRingEntry::tail`), in memory the pool owns; the kernel reads
        // it, so it is published with a release store.
        unsafe {
            let tail = BufRingEntry::tail(self.entries).cast_mut();
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for RecvPool {
    fn drop(&mut self) {
        // SAFETY: both allocated in `register` with these layouts; the
        // ring that used them is gone (the pool is dropped after it).
        unsafe {
            alloc::dealloc(self.entries.cast(), self.layout);
            alloc::dealloc(self.bufs, self.bufs_layout);
        }
    }
}
