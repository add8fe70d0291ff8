//! The phases a request's time is split into.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// From the end of the previous reply (or the connection's start) to
    /// the first byte of the request: the client thinking or the network.
    Waiting,
    /// From the first byte to the last byte of the request.
    Receiving,
    /// The engine reading the SMB2 headers of the frame.
    Parsing,
    /// Parsed but not yet running (0 in the threaded engine, which has no
    /// queue).
    Queued,
    /// In the protocol core, outside filesystem calls.
    Running,
    /// In filesystem calls made through the share's VFS.
    DiskIo,
    /// Writing the reply to the socket.
    Sending,
}

pub const PHASES: usize = 7;

impl Phase {
    pub const ALL: [Phase; PHASES] = [
        Phase::Waiting,
        Phase::Receiving,
        Phase::Parsing,
        Phase::Queued,
        Phase::Running,
        Phase::DiskIo,
        Phase::Sending,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Receiving => "receiving",
            Phase::Parsing => "parsing",
            Phase::Queued => "queued",
            Phase::Running => "running",
            Phase::DiskIo => "disk_io",
            Phase::Sending => "sending",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_the_order() {
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(p.index(), i);
        }
        assert_eq!(Phase::DiskIo.name(), "disk_io");
    }
}
