//! What the engine notes for tracing: socket calls, the moment a frame's
//! first bytes arrive, and the requests a frame holds.

use std::io::{self, IoSlice, Read, Write};

use copyless_proto::Header;
use copyless_trace::{clock, probes};

/// A reader that counts its read calls and notes when the first bytes of
/// the current frame came in.
pub struct TimedReader<R> {
    inner: R,
    /// Clock readings are skipped when tracing is off.
    enabled: bool,
    pub calls: u64,
    pub first_byte: Option<u64>,
}

impl<R> TimedReader<R> {
    pub fn new(inner: R, enabled: bool) -> Self {
        TimedReader {
            inner,
            enabled,
            calls: 0,
            first_byte: None,
        }
    }

    pub fn inner(&self) -> &R {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Starts a new frame.
    pub fn reset(&mut self) {
        self.calls = 0;
        self.first_byte = None;
    }
}

impl<R: Read> Read for TimedReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.inner.read(buf);
        self.calls += 1;
        if self.enabled && self.first_byte.is_none() && matches!(r, Ok(n) if n > 0) {
            self.first_byte = Some(clock::now());
        }
        r
    }
}

/// A writer that counts its write calls.
pub struct CountingWriter<W> {
    pub inner: W,
    pub calls: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        self.inner.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.calls += 1;
        self.inner.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Fires `request_start` for each SMB2 request of a frame, read from the
/// headers as chained by NextCommand; returns how many there were. An
/// encrypted or SMB1 frame, or a malformed chain, stops the walk: the core
/// decides what to do with those.
pub fn start_requests(frame: &[u8]) -> usize {
    let mut rest = frame;
    let mut n = 0;
    while let Ok(h) = Header::parse(rest) {
        probes::request_start(h.message_id, h.command);
        n += 1;
        let next = h.next_command as usize;
        if next == 0 || !next.is_multiple_of(8) {
            break;
        }
        match rest.get(next..) {
            Some(r) => rest = r,
            None => break,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(command: u16, mid: u64, next: u32) -> Vec<u8> {
        let mut out = Vec::new();
        Header {
            command,
            message_id: mid,
            next_command: next,
            ..Header::default()
        }
        .write(&mut out);
        out
    }

    #[test]
    fn walks_a_compound() {
        let mut frame = header(5, 1, 72);
        frame.resize(72, 0);
        frame.extend(header(16, 2, 72));
        frame.resize(144, 0);
        frame.extend(header(6, 3, 0));
        assert_eq!(start_requests(&frame), 3);
        // A NextCommand past the end stops the walk.
        let mut bad = header(5, 1, 4096);
        bad.resize(80, 0);
        assert_eq!(start_requests(&bad), 1);
        // So does one that is not 8-byte aligned.
        let mut odd = header(5, 1, 65);
        odd.extend(header(6, 2, 0));
        assert_eq!(start_requests(&odd), 1);
        assert_eq!(start_requests(b"\xfdSMB and the rest"), 0);
        assert_eq!(start_requests(&[]), 0);
    }

    #[test]
    fn counts_calls_and_first_bytes() {
        let data = [1u8, 2, 3, 4, 5];
        let mut r = TimedReader::new(&data[..], true);
        let mut buf = [0u8; 2];
        r.read_exact(&mut buf).unwrap();
        let first = r.first_byte.unwrap();
        r.read_exact(&mut buf).unwrap();
        assert_eq!(r.calls, 2);
        assert_eq!(r.first_byte, Some(first));
        r.reset();
        assert_eq!((r.calls, r.first_byte), (0, None));
        let mut off = TimedReader::new(&data[..], false);
        off.read_exact(&mut buf).unwrap();
        assert_eq!((off.calls, off.first_byte), (1, None));

        let mut w = CountingWriter {
            inner: Vec::new(),
            calls: 0,
        };
        let n = w
            .write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])
            .unwrap();
        assert_eq!(n, 4);
        assert_eq!(w.inner, b"abcd");
        assert_eq!(w.calls, 1);
    }
}
