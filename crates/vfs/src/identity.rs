//! Who a filesystem operation is performed as.

use std::fmt;
use std::sync::Arc;

/// The identity the kernel checks a filesystem operation against, so that
/// its own rules (mode bits, POSIX ACLs, sticky directories, ownership of
/// new files, quotas) apply to each user as they would locally.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub enum Identity {
    /// The server process itself, as it was started: for the server's own
    /// work, and for every session when the server cannot change identity
    /// (it does not run as root).
    #[default]
    Server,
    /// A Unix account.
    Unix(Arc<UnixIds>),
}

/// A Unix account's ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnixIds {
    pub uid: u32,
    pub gid: u32,
    /// Every group the account is in, the primary one included.
    pub groups: Vec<u32>,
}

impl Identity {
    pub fn unix(uid: u32, gid: u32, groups: Vec<u32>) -> Identity {
        Identity::Unix(Arc::new(UnixIds { uid, gid, groups }))
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Server => f.write_str("server"),
            Identity::Unix(ids) => write!(f, "uid {} gid {}", ids.uid, ids.gid),
        }
    }
}
