//! Direct TCP transport framing (MS-SMB2 2.1): a zero byte, then a 24-bit
//! big-endian length, then the SMB message.
//!
//! A frame is read as its bytes arrive, and may take several reads that
//! stop when the socket has nothing more (a timeout or a would-block): the
//! reader keeps its place. Memory follows the bytes received, not the
//! length a client announces, so a client that announces 8 MiB and sends
//! one byte costs a few KiB.

use std::io::{self, IoSlice, Read, Write};

/// The longest message the 24-bit length can announce.
pub const MAX_FRAME: usize = 0x00FF_FFFF;

/// The first buffer for a frame's body; it doubles as bytes arrive.
const FIRST_CHUNK: usize = 64 * 1024;

/// A buffer above this is given back when the connection goes idle.
const KEEP_WHEN_IDLE: usize = 256 * 1024;

pub enum Progress {
    /// A whole frame is in [`FrameReader::frame`].
    Frame,
    /// The socket has nothing more for now; call again later.
    Waiting,
    /// The peer closed the connection cleanly between messages.
    Closed,
}

#[derive(Default)]
pub struct FrameReader {
    head: [u8; 4],
    head_len: usize,
    /// The announced body length, once the head is complete.
    want: Option<usize>,
    /// Initialised bytes, reused from frame to frame; only `filled` of
    /// them belong to the current frame.
    body: Vec<u8>,
    filled: usize,
}

fn invalid(message: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

/// The body length a frame's 4-byte head announces, checked: a session
/// message, not empty, not above `max`.
pub fn announced(head: [u8; 4], max: usize) -> io::Result<usize> {
    if head[0] != 0 {
        return Err(invalid("not a session message"));
    }
    let len = u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize;
    if len == 0 {
        return Err(invalid("empty message"));
    }
    if len > max {
        return Err(invalid("message too large"));
    }
    Ok(len)
}

/// The head of a frame of `len` bytes; an error when 24 bits cannot say
/// it, never a wrapped length.
pub fn head(len: usize) -> io::Result<[u8; 4]> {
    if len > MAX_FRAME {
        return Err(invalid("reply larger than a frame can carry"));
    }
    let len = len as u32;
    Ok([0, (len >> 16) as u8, (len >> 8) as u8, len as u8])
}

impl FrameReader {
    /// Reads until a frame is complete or `r` has nothing more. `max` is
    /// the largest body accepted; a larger announcement is an error before
    /// anything is allocated for it.
    pub fn fill(&mut self, r: &mut impl Read, max: usize) -> io::Result<Progress> {
        loop {
            let want = match self.want {
                Some(want) => want,
                None => {
                    match r.read(&mut self.head[self.head_len..]) {
                        Ok(0) if self.head_len == 0 => return Ok(Progress::Closed),
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => self.head_len += n,
                        Err(e) if waiting(&e) => return Ok(Progress::Waiting),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                    if self.head_len < 4 {
                        continue;
                    }
                    let len = announced(self.head, max)?;
                    self.want = Some(len);
                    self.filled = 0;
                    len
                }
            };
            if self.filled == want {
                return Ok(Progress::Frame);
            }
            if self.filled == self.body.len() {
                // Never past what was announced, never from nothing to all
                // of it at once.
                let grown = (self.body.len() * 2).max(FIRST_CHUNK).min(want);
                self.body.resize(grown, 0);
            }
            let end = self.body.len().min(want);
            match r.read(&mut self.body[self.filled..end]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.filled += n,
                Err(e) if waiting(&e) => return Ok(Progress::Waiting),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The frame [`FrameReader::fill`] completed. It may be changed: a
    /// sealed frame is decrypted where it lies.
    pub fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.body[..self.filled]
    }

    /// Forgets the completed frame; the next `fill` starts a new one.
    pub fn next(&mut self) {
        self.head_len = 0;
        self.want = None;
        self.filled = 0;
    }

    /// True while part of a frame has arrived and the rest has not.
    pub fn in_frame(&self) -> bool {
        self.head_len > 0
    }

    /// Bytes of the frame under way read so far, head included.
    pub fn partial(&self) -> usize {
        self.head_len + self.filled
    }

    /// Gives back a large buffer while the connection is idle between
    /// frames, so idle connections hold little memory.
    pub fn shrink_when_idle(&mut self) {
        if !self.in_frame() && self.body.len() > KEEP_WHEN_IDLE {
            self.body = Vec::new();
        }
    }
}

/// A read that ended for lack of data: a would-block, or the receive
/// timeout the engine sets to wake up for its timers.
fn waiting(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Writes one message with its length prefix in as few system calls as
/// the socket allows. A message the length field cannot express is an
/// error, never a wrapped length.
pub fn write_frame(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let head = head(msg.len())?;
    let mut parts = [IoSlice::new(&head), IoSlice::new(msg)];
    let mut slices: &mut [IoSlice<'_>] = &mut parts;
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes a few at a time, and says "would block" once
    /// before each piece, as a slow socket does; at the end it closes, or
    /// stays open with nothing more to say.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        blocked: bool,
        stays_open: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.blocked = !self.blocked;
            if (self.blocked && !self.data.is_empty()) || (self.data.is_empty() && self.stays_open)
            {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn framed(msgs: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for m in msgs {
            write_frame(&mut out, m).unwrap();
        }
        out
    }

    #[test]
    fn frames_arrive_in_pieces() {
        let big = vec![7u8; 200_000];
        let wire = framed(&[b"hello", &big, b"x"]);
        let mut r = Trickle {
            data: &wire,
            step: 3000,
            blocked: false,
            stays_open: false,
        };
        let mut reader = FrameReader::default();
        let mut got = Vec::new();
        let mut waits = 0;
        loop {
            match reader.fill(&mut r, 1 << 20).unwrap() {
                Progress::Frame => {
                    got.push(reader.frame_mut().to_vec());
                    reader.next();
                }
                Progress::Waiting => waits += 1,
                Progress::Closed => break,
            }
        }
        assert_eq!(got, vec![b"hello".to_vec(), big, b"x".to_vec()]);
        assert!(waits > 60, "{waits}");
    }

    #[test]
    fn memory_follows_the_bytes_not_the_announcement() {
        // 8 MiB announced, one byte sent.
        let wire = [0u8, 0x80, 0, 0, 42];
        let mut r = Trickle {
            data: &wire,
            step: 5,
            blocked: false,
            stays_open: true,
        };
        let mut reader = FrameReader::default();
        for _ in 0..4 {
            assert!(matches!(
                reader.fill(&mut r, 16 << 20).unwrap(),
                Progress::Waiting
            ));
        }
        assert!(r.data.is_empty(), "everything sent was read");
        assert!(reader.in_frame());
        assert!(reader.body.capacity() <= FIRST_CHUNK);
        reader.shrink_when_idle();
        assert_eq!(reader.filled, 1, "a frame under way keeps its bytes");
    }

    #[test]
    fn limits_and_bad_heads() {
        let wire = framed(&[b"hello"]);
        let mut reader = FrameReader::default();
        assert!(reader.fill(&mut &wire[..], 4).is_err(), "over the limit");
        let mut reader = FrameReader::default();
        assert!(reader.fill(&mut &wire[..6], 100).is_err(), "cut short");
        let mut reader = FrameReader::default();
        assert!(reader.fill(&mut &[1u8, 0, 0, 1, 0][..], 100).is_err());
        let mut reader = FrameReader::default();
        assert!(reader.fill(&mut &[0u8, 0, 0, 0][..], 100).is_err());
        let mut reader = FrameReader::default();
        assert!(matches!(
            reader.fill(&mut &[][..], 100).unwrap(),
            Progress::Closed
        ));
    }

    #[test]
    fn an_oversized_reply_is_refused() {
        let mut out = Vec::new();
        assert!(write_frame(&mut out, &vec![0; MAX_FRAME + 1]).is_err());
        assert!(out.is_empty());
        write_frame(&mut out, &vec![1; MAX_FRAME]).unwrap();
        assert_eq!(&out[..4], &[0, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn idle_connections_give_back_big_buffers() {
        let big = vec![1u8; 1 << 20];
        let wire = framed(&[&big]);
        let mut reader = FrameReader::default();
        assert!(matches!(
            reader.fill(&mut &wire[..], 2 << 20).unwrap(),
            Progress::Frame
        ));
        reader.next();
        assert!(reader.body.len() >= 1 << 20);
        reader.shrink_when_idle();
        assert_eq!(reader.body.capacity(), 0);
    }
}
