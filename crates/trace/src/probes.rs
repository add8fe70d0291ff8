//! Static probes (SystemTap SDT notes in `.note.stapsdt`), usable from
//! bpftrace, perf and SystemTap. When nobody is attached each is a single
//! no-op instruction.
//!
//! ```text
//! bpftrace -e 'usdt:/usr/sbin/copyless:copyless:request_done
//!     { @us[arg1] = hist(arg3 / 1000); }'
//! ```

/// A request of the frame just received is about to run.
#[inline]
pub fn request_start(message_id: u64, opcode: u16) {
    probe::probe!(copyless, request_start, message_id, opcode);
}

/// A request's reply went out; `ns` is its share of the frame's time from
/// first byte received to last byte sent.
#[inline]
pub fn request_done(message_id: u64, opcode: u16, status: u32, ns: u64) {
    probe::probe!(copyless, request_done, message_id, opcode, status, ns);
}
