//! NT security descriptors set by clients, kept whole in the xattr
//! `user.copyless.ntacl` of the object they protect, so they move with
//! renames and go with the file.
//!
//! Most shares never hold one. The share root carries a marker xattr from
//! the first descriptor stored beneath it on, and until then no lookup is
//! made: a share without descriptors pays nothing on its opens.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{fgetxattr, fsetxattr, XattrFlags};
use rustix::io::Errno;

use super::errno::io_err;
use super::sys::xattr_value;
use crate::{VfsError, VfsResult};

pub const NTACL_XATTR: &str = "user.copyless.ntacl";
/// On the share root: descriptors have been stored beneath it.
pub const IN_USE_XATTR: &str = "user.copyless.ntacl-in-use";
/// Linux refuses xattr values above 64 KiB; so does this store.
const MAX_LEN: usize = 65536;

pub struct AclStore {
    in_use: AtomicBool,
}

impl AclStore {
    pub fn new(root: BorrowedFd<'_>) -> AclStore {
        let mut b = [0u8; 1];
        let in_use = matches!(
            fgetxattr(root, IN_USE_XATTR, &mut b),
            Ok(_) | Err(Errno::RANGE)
        );
        AclStore {
            in_use: AtomicBool::new(in_use),
        }
    }

    pub fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Relaxed)
    }

    /// The stored descriptor; None when there is none (or none was ever
    /// stored on this share).
    pub fn get(&self, fd: BorrowedFd<'_>) -> VfsResult<Option<Vec<u8>>> {
        if !self.in_use.load(Ordering::Relaxed) {
            return Ok(None);
        }
        xattr_value(fd, NTACL_XATTR, MAX_LEN)
    }

    /// Marks the share as holding descriptors, before the first is stored.
    pub fn mark_in_use(&self, root: BorrowedFd<'_>) -> VfsResult<()> {
        fsetxattr(root, IN_USE_XATTR, b"1", XattrFlags::empty()).map_err(unsupported)?;
        self.in_use.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Stores `sd` on the object; the share must be marked in use first.
    pub fn set(&self, fd: BorrowedFd<'_>, sd: &[u8]) -> VfsResult<()> {
        if sd.len() > MAX_LEN {
            return Err(VfsError::DiskFull);
        }
        let r = match fsetxattr(fd, NTACL_XATTR, sd, XattrFlags::empty()) {
            Err(Errno::BADF) => {
                let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
                rustix::fs::setxattr(path, NTACL_XATTR, sd, XattrFlags::empty())
            }
            r => r,
        };
        r.map_err(unsupported)
    }
}

fn unsupported(e: Errno) -> VfsError {
    match e {
        Errno::OPNOTSUPP => VfsError::NotSupported,
        Errno::NOSPC | Errno::DQUOT | Errno::TOOBIG => VfsError::DiskFull,
        e => io_err(e),
    }
}
