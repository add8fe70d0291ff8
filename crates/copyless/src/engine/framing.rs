//! Direct TCP transport framing (MS-SMB2 2.1): a zero byte, then a 24-bit
//! big-endian length, then the SMB message.

use std::io::{self, IoSlice, Read, Write};

pub enum Frame {
    Message,
    /// The peer closed the connection cleanly between messages.
    Closed,
}

/// Reads one message into `buf` (replacing its contents).
pub fn read_frame(r: &mut impl Read, buf: &mut Vec<u8>, max: usize) -> io::Result<Frame> {
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(Frame::Closed),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if head[0] != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a session message",
        ));
    }
    let len = u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "message too large",
        ));
    }
    if len == 0 {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "empty message"));
    }
    buf.clear();
    buf.resize(len, 0);
    r.read_exact(buf)?;
    Ok(Frame::Message)
}

/// Writes one message with its length prefix in as few system calls as
/// the socket allows.
pub fn write_frame(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let len = msg.len() as u32;
    let head = [0, (len >> 16) as u8, (len >> 8) as u8, len as u8];
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

    #[test]
    fn round_trip_and_limits() {
        let mut out = Vec::new();
        write_frame(&mut out, b"hello").unwrap();
        assert_eq!(&out[..4], &[0, 0, 0, 5]);
        let mut buf = Vec::new();
        let mut r = &out[..];
        assert!(matches!(
            read_frame(&mut r, &mut buf, 100),
            Ok(Frame::Message)
        ));
        assert_eq!(buf, b"hello");
        assert!(matches!(
            read_frame(&mut r, &mut buf, 100),
            Ok(Frame::Closed)
        ));
        let mut r = &out[..];
        assert!(read_frame(&mut r, &mut buf, 4).is_err());
        let mut r = &out[..6];
        assert!(read_frame(&mut r, &mut buf, 100).is_err());
    }
}
