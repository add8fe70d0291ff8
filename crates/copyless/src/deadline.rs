//! Socket I/O under one deadline for a whole exchange, for the small HTTP
//! listeners (metrics and dashboard, discovery's metadata): a per-call
//! timeout would let a client that trickles a byte at a time keep a
//! thread for ever.

use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The time left before `deadline`; TimedOut once it has passed.
pub fn time_left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::ErrorKind::TimedOut.into())
    } else {
        Ok(left)
    }
}

/// `write_all` that gives up at `deadline`, however slowly the client
/// reads.
pub fn write_by(stream: &mut TcpStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.set_write_timeout(Some(time_left(deadline)?))?;
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = bytes.get(n..).unwrap_or(&[]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
