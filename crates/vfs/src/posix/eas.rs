//! Extended attributes set by clients, the whole set of an object kept
//! in its xattr `user.copyless.eas` (see [`crate::eas::encode`]), so it
//! moves with renames and goes with the file.
//!
//! Most shares never hold one. As with descriptors (ntacl.rs), the share
//! root carries a marker from the first EA stored beneath it on, and
//! until then nobody looks for EAs.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rustix::fs::{fgetxattr, fremovexattr, fsetxattr, removexattr, setxattr, XattrFlags};
use rustix::io::Errno;

use super::errno::io_err;
use super::sys::xattr_value;
use crate::eas::{self, Ea};
use crate::{VfsError, VfsResult};

pub const EAS_XATTR: &str = "user.copyless.eas";
/// On the share root: EAs have been stored beneath it.
pub const IN_USE_XATTR: &str = "user.copyless.eas-in-use";
/// Linux refuses xattr values above 64 KiB; Windows bounds an object's
/// EAs near there too (MS-FSA 2.1.5.15.5).
const MAX_LEN: usize = 65536;

pub struct EaStore {
    in_use: AtomicBool,
    /// Serializes the read-modify-write of a set.
    writing: Mutex<()>,
}

impl EaStore {
    pub fn new(root: BorrowedFd<'_>) -> EaStore {
        let in_use = matches!(
            fgetxattr(root, IN_USE_XATTR, &mut [0u8; 1]),
            Ok(_) | Err(Errno::RANGE)
        );
        EaStore {
            in_use: AtomicBool::new(in_use),
            writing: Mutex::new(()),
        }
    }

    pub fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Relaxed)
    }

    /// The object's EAs; none when the share never stored any.
    pub fn get(&self, fd: BorrowedFd<'_>) -> VfsResult<Vec<Ea>> {
        if !self.in_use() {
            return Ok(Vec::new());
        }
        let value = xattr_value(fd, EAS_XATTR, MAX_LEN)?;
        Ok(value.map(|v| eas::decode(&v)).unwrap_or_default())
    }

    /// Marks the share as holding EAs, before the first is stored.
    pub fn mark_in_use(&self, root: BorrowedFd<'_>) -> VfsResult<()> {
        fsetxattr(root, IN_USE_XATTR, b"1", XattrFlags::empty()).map_err(unsupported)?;
        self.in_use.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Applies `changes` to the object's EAs ([`eas::merge`]); the share
    /// must be marked in use first.
    pub fn set(&self, fd: BorrowedFd<'_>, changes: &[Ea]) -> VfsResult<()> {
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let mut set = self.get(fd)?;
        eas::merge(&mut set, changes);
        let value = eas::encode(&set);
        if value.len() > MAX_LEN {
            return Err(VfsError::DiskFull);
        }
        // An O_PATH descriptor is written through its /proc link.
        let proc_path = || format!("/proc/self/fd/{}", fd.as_raw_fd());
        let r = if set.is_empty() {
            match fremovexattr(fd, EAS_XATTR) {
                Err(Errno::BADF) => removexattr(proc_path(), EAS_XATTR),
                r => r,
            }
        } else {
            match fsetxattr(fd, EAS_XATTR, &value, XattrFlags::empty()) {
                Err(Errno::BADF) => setxattr(proc_path(), EAS_XATTR, &value, XattrFlags::empty()),
                r => r,
            }
        };
        match r {
            Ok(()) | Err(Errno::NODATA) => Ok(()),
            Err(e) => Err(unsupported(e)),
        }
    }
}

fn unsupported(e: Errno) -> VfsError {
    match e {
        Errno::OPNOTSUPP => VfsError::NotSupported,
        Errno::NOSPC | Errno::DQUOT | Errno::TOOBIG | Errno::RANGE => VfsError::DiskFull,
        e => io_err(e),
    }
}
