//! Users' disk quotas on the filesystem beneath a share, as the kernel
//! keeps them (XFS, ext4 with its quota feature): what a user has used,
//! and the limits set for them.
//!
//! The VFS never makes the `quotactl_fd` call itself: it takes a raw
//! system call, and only an engine's kernel interfaces may make those.
//! An engine hands a backend its [`KernelQuotas`]; without one, a share
//! has no quotas.

use std::io;
use std::os::fd::BorrowedFd;

/// A user's entry: bytes in use, and the soft limit (over which the
/// kernel allows a grace period) and hard limit, in bytes; 0 for none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    pub used: u64,
    pub soft: u64,
    pub hard: u64,
}

impl Quota {
    /// The most the user may hold, where a limit is set: the hard limit,
    /// else the soft one (which becomes hard once its grace runs out).
    pub fn cap(&self) -> Option<u64> {
        [self.hard, self.soft].into_iter().find(|&l| l != 0)
    }
}

/// How a filesystem keeps its users' quotas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaState {
    /// Use is counted per user.
    pub tracked: bool,
    /// Limits are enforced.
    pub enforced: bool,
}

/// The kernel's user quotas of the filesystem holding an open
/// descriptor. Calls are made with the calling thread's credentials:
/// reading another user's entry, the next entry or setting limits needs
/// CAP_SYS_ADMIN, reading one's own does not.
pub trait KernelQuotas: Send + Sync {
    /// Whether the filesystem counts and enforces user quotas; both
    /// false where it has none.
    fn state(&self, fd: BorrowedFd<'_>) -> io::Result<QuotaState>;
    /// The entry of `uid` (all zeros where it has none).
    fn get(&self, fd: BorrowedFd<'_>, uid: u32) -> io::Result<Quota>;
    /// The first entry of a uid from `from` on, with its uid; None past
    /// the last.
    fn next(&self, fd: BorrowedFd<'_>, from: u32) -> io::Result<Option<(u32, Quota)>>;
    /// Sets the limits of `uid` (bytes, 0 for none), leaving its inode
    /// limits as they are.
    fn set(&self, fd: BorrowedFd<'_>, uid: u32, soft: u64, hard: u64) -> io::Result<()>;
}
