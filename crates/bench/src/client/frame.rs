//! Direct-TCP framing (MS-SMB2 2.1): a 4-byte header, zero then a 24-bit
//! big-endian length, before each SMB2 message or compound. Reading and
//! writing are non-blocking so that one thread can keep many requests in
//! flight in both directions without either side stalling the other.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::TcpStream;

/// The largest frame the 24-bit length can carry.
pub const MAX_FRAME: usize = 0x00ff_ffff;

/// Bytes read from the socket at a time when no large frame is pending.
const STAGING: usize = 256 * 1024;

/// Large frames' buffers kept for the next ones (see
/// [`FrameReader::recycle`]).
const SPARES: usize = 64;

/// Reassembles frames from a non-blocking stream.
pub struct FrameReader {
    staging: Vec<u8>,
    /// Valid bytes in `staging` are `start..end`.
    start: usize,
    end: usize,
    /// A large frame being filled directly from the socket, and how much
    /// of it has arrived.
    big: Option<(Vec<u8>, usize)>,
    /// Buffers of large frames handed back, whose pages are the next large
    /// frame's: a fresh 1 MiB buffer per reply faults in 256 zeroed pages,
    /// which at depth 32 cost this client more than the server it measured.
    spares: Vec<Vec<u8>>,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader {
            staging: vec![0; STAGING],
            start: 0,
            end: 0,
            big: None,
            spares: Vec::new(),
        }
    }
}

/// What one call to [`FrameReader::read`] did.
pub enum ReadOutcome {
    /// Some bytes arrived (frames may now be complete).
    Progress,
    /// Nothing to read now.
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

impl FrameReader {
    /// A frame that was taken is done with: its buffer may hold the next
    /// large one.
    pub fn recycle(&mut self, frame: Vec<u8>) {
        if frame.capacity() > STAGING / 2 && self.spares.len() < SPARES {
            self.spares.push(frame);
        }
    }

    /// Reads what the socket has, once.
    pub fn read(&mut self, stream: &mut TcpStream) -> io::Result<ReadOutcome> {
        let result = if let Some((frame, filled)) = self.big.as_mut() {
            if *filled == frame.len() {
                // Complete; `next_frame` hands it out.
                return Ok(ReadOutcome::Progress);
            }
            stream.read(&mut frame[*filled..])
        } else {
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.end == self.staging.len() {
                if self.start == 0 {
                    // Cannot happen while frames are taken after each read
                    // (larger frames go to their own buffer).
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "receive buffer full of unread frames",
                    ));
                }
                self.staging.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            stream.read(&mut self.staging[self.end..])
        };
        match result {
            Ok(0) => Ok(ReadOutcome::Eof),
            Ok(n) => {
                match self.big.as_mut() {
                    Some((_, filled)) => *filled += n,
                    None => self.end += n,
                }
                Ok(ReadOutcome::Progress)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(ReadOutcome::WouldBlock),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(ReadOutcome::Progress),
            Err(e) => Err(e),
        }
    }

    /// Takes the next complete frame (without its 4-byte prefix), if any.
    pub fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        if let Some((frame, filled)) = self.big.take() {
            if filled == frame.len() {
                return Ok(Some(frame));
            }
            self.big = Some((frame, filled));
            return Ok(None);
        }
        let avail = &self.staging[self.start..self.end];
        let Some(prefix) = avail.get(..4) else {
            return Ok(None);
        };
        if prefix[0] != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "frame does not start with a zero byte",
            ));
        }
        let len =
            usize::from(prefix[1]) << 16 | usize::from(prefix[2]) << 8 | usize::from(prefix[3]);
        let have = avail.len() - 4;
        if have >= len {
            let frame = avail[4..4 + len].to_vec();
            self.start += 4 + len;
            return Ok(Some(frame));
        }
        if len > self.staging.len() / 2 {
            // Large: move what arrived into the frame's own buffer and let
            // the socket fill the rest in place.
            let mut frame = buffer(&mut self.spares, len);
            frame[..have].copy_from_slice(&avail[4..]);
            self.start = self.end;
            self.big = Some((frame, have));
        }
        Ok(None)
    }
}

/// A buffer of `len` bytes for a large frame, a spare one if it fits; what
/// it holds is overwritten by the socket.
fn buffer(spares: &mut Vec<Vec<u8>>, len: usize) -> Vec<u8> {
    match spares.iter().position(|b| b.capacity() >= len) {
        Some(i) => {
            let mut b = spares.swap_remove(i);
            if b.len() >= len {
                b.truncate(len);
            } else {
                b.resize(len, 0);
            }
            b
        }
        None => vec![0u8; len],
    }
}

/// Queued outgoing frames.
#[derive(Default)]
pub struct FrameWriter {
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the front buffer already sent.
    sent: usize,
}

impl FrameWriter {
    /// Queues a frame: `data` must start with 4 reserved bytes, which are
    /// overwritten with the length prefix.
    pub fn push(&mut self, mut data: Vec<u8>) -> io::Result<()> {
        let len = data.len().saturating_sub(4);
        if data.len() < 4 || len > MAX_FRAME {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "message too large for one frame",
            ));
        }
        let be = (len as u32).to_be_bytes();
        data[..4].copy_from_slice(&be);
        self.queue.push_back(data);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Writes until the socket would block or the queue is empty. True if
    /// anything was written.
    pub fn flush(&mut self, stream: &mut TcpStream) -> io::Result<bool> {
        let mut progress = false;
        while let Some(front) = self.queue.front() {
            match stream.write(&front[self.sent..]) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "the connection accepts no more data",
                    ))
                }
                Ok(n) => {
                    progress = true;
                    self.sent += n;
                    if self.sent == front.len() {
                        self.queue.pop_front();
                        self.sent = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (b, _) = listener.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn read_all_frames(
        reader: &mut FrameReader,
        stream: &mut TcpStream,
        want: usize,
    ) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while frames.len() < want {
            assert!(std::time::Instant::now() < deadline, "timed out");
            reader.read(stream).unwrap();
            while let Some(f) = reader.next_frame().unwrap() {
                frames.push(f);
            }
        }
        frames
    }

    #[test]
    fn small_and_large_frames_round_trip() {
        let (mut client, mut server) = pair();
        let big: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
        let writer = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            for payload in [&b"abc"[..], &big[..], &b""[..], &b"xyz"[..]] {
                let len = payload.len() as u32;
                bytes.extend_from_slice(&len.to_be_bytes());
                bytes.extend_from_slice(payload);
            }
            // Dribble the first bytes to split the prefix across reads.
            server.write_all(&bytes[..2]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
            server.write_all(&bytes[2..]).unwrap();
            big
        });
        let mut reader = FrameReader::default();
        let frames = read_all_frames(&mut reader, &mut client, 4);
        let big = writer.join().unwrap();
        assert_eq!(frames[0], b"abc");
        assert_eq!(frames[1], big);
        assert!(frames[2].is_empty());
        assert_eq!(frames[3], b"xyz");
    }

    #[test]
    fn a_recycled_buffer_takes_the_next_large_frame_whole() {
        let (mut client, mut server) = pair();
        let first = vec![1u8; 300_000];
        let second: Vec<u8> = (0..280_000u32).map(|i| i as u8).collect();
        let mut bytes = Vec::new();
        for payload in [&first, &second] {
            bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            bytes.extend_from_slice(payload);
        }
        let mut reader = FrameReader::default();
        server.write_all(&bytes[..first.len() + 4]).unwrap();
        let got = read_all_frames(&mut reader, &mut client, 1).remove(0);
        assert_eq!(got, first);
        let at = got.as_ptr();
        reader.recycle(got);
        server.write_all(&bytes[first.len() + 4..]).unwrap();
        let got = read_all_frames(&mut reader, &mut client, 1).remove(0);
        // The same buffer, cut to the new frame: nothing of the old one.
        assert_eq!(got.as_ptr(), at);
        assert_eq!(got, second);
    }

    #[test]
    fn nonzero_first_byte_is_an_error() {
        let (mut client, mut server) = pair();
        server.write_all(&[0xfe, 0, 0, 1, 0]).unwrap();
        let mut reader = FrameReader::default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(std::time::Instant::now() < deadline);
            reader.read(&mut client).unwrap();
            match reader.next_frame() {
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                    break;
                }
                Ok(Some(_)) => panic!("accepted a bad frame"),
                Ok(None) => {}
            }
        }
    }

    #[test]
    fn writer_prefixes_lengths() {
        let (client, mut server) = pair();
        let mut client = client;
        let mut w = FrameWriter::default();
        let mut msg = vec![0u8; 4];
        msg.extend_from_slice(b"hello");
        w.push(msg).unwrap();
        assert!(w.push(vec![0; 3]).is_err());
        while !w.is_empty() {
            w.flush(&mut client).unwrap();
        }
        let mut got = [0u8; 9];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"\0\0\0\x05hello");
    }
}
