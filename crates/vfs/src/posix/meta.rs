//! What Windows keeps and POSIX does not: DOS attribute bits and a settable
//! creation time, stored in user xattrs so they survive a restart, or in
//! memory on filesystems without xattrs.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use rustix::fs::{fgetxattr, fsetxattr, getxattr, lgetxattr, XattrFlags};
use rustix::io::Errno;

use super::errno::io_err;
use super::sys::{file_key, statx_fd};
use crate::VfsResult;

pub const ATTR_XATTR: &str = "user.copyless.dosattrib";
pub const BTIME_XATTR: &str = "user.copyless.btime";

type FileKey = (u64, u64);

/// The stored values; None when never set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    pub attrs: Option<u32>,
    pub btime: Option<u64>,
}

/// How to reach an object's xattrs.
pub enum Target<'a> {
    Fd(BorrowedFd<'a>),
    /// `name` inside the directory `dir`, the link itself if a symlink.
    Entry {
        dir: BorrowedFd<'a>,
        name: &'a str,
    },
    /// What an O_PATH descriptor refers to.
    PathFd(BorrowedFd<'a>),
}

pub struct MetaStore {
    /// Used only for objects on filesystems that refuse user xattrs.
    mem: Mutex<HashMap<FileKey, Stored>>,
    mem_used: AtomicBool,
    /// /proc is mounted, so xattrs of a directory entry can be read by path
    /// without opening the entry.
    proc_fd: bool,
}

enum Got<const N: usize> {
    Value([u8; N]),
    None,
    Unsupported,
}

impl MetaStore {
    pub fn new() -> MetaStore {
        MetaStore {
            mem: Mutex::new(HashMap::new()),
            mem_used: AtomicBool::new(false),
            proc_fd: std::path::Path::new("/proc/self/fd").is_dir(),
        }
    }

    /// Whether `Target::Entry` and `Target::PathFd` can be read.
    pub fn can_read_by_path(&self) -> bool {
        self.proc_fd
    }

    fn mem(&self) -> MutexGuard<'_, HashMap<FileKey, Stored>> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads both values; `key` is the object's (dev, ino), used only for
    /// the in-memory fallback. Read errors other than "not supported" count
    /// as nothing stored: a stat must not fail over a missing attribute.
    pub fn read(&self, target: &Target<'_>, key: FileKey) -> Stored {
        let attrs = get::<4>(target, ATTR_XATTR);
        let mut unsupported = matches!(attrs, Got::Unsupported);
        let mut stored = Stored {
            attrs: match attrs {
                Got::Value(b) => Some(u32::from_le_bytes(b)),
                _ => None,
            },
            btime: None,
        };
        if !unsupported {
            match get::<8>(target, BTIME_XATTR) {
                Got::Value(b) => stored.btime = Some(u64::from_le_bytes(b)),
                Got::None => {}
                Got::Unsupported => unsupported = true,
            }
        }
        if unsupported && self.mem_used.load(Ordering::Relaxed) {
            if let Some(m) = self.mem().get(&key) {
                return *m;
            }
        }
        stored
    }

    pub fn set_attrs(&self, fd: BorrowedFd<'_>, attrs: u32) -> VfsResult<()> {
        self.set(fd, ATTR_XATTR, &attrs.to_le_bytes(), |s| {
            s.attrs = Some(attrs)
        })
    }

    pub fn set_btime(&self, fd: BorrowedFd<'_>, filetime: u64) -> VfsResult<()> {
        self.set(fd, BTIME_XATTR, &filetime.to_le_bytes(), |s| {
            s.btime = Some(filetime)
        })
    }

    fn set(
        &self,
        fd: BorrowedFd<'_>,
        name: &str,
        value: &[u8],
        update: impl FnOnce(&mut Stored),
    ) -> VfsResult<()> {
        match fsetxattr(fd, name, value, XattrFlags::empty()) {
            Ok(()) => Ok(()),
            Err(Errno::OPNOTSUPP) => {
                let key = file_key(&statx_fd(fd).map_err(io_err)?);
                self.mem_used.store(true, Ordering::Relaxed);
                update(self.mem().entry(key).or_default());
                Ok(())
            }
            Err(e) => Err(io_err(e)),
        }
    }

    /// The inode is gone: a new object reusing its number must not inherit
    /// what was kept in memory for it.
    pub fn forget(&self, key: FileKey) {
        if self.mem_used.load(Ordering::Relaxed) {
            self.mem().remove(&key);
        }
    }
}

fn get<const N: usize>(target: &Target<'_>, name: &str) -> Got<N> {
    let mut buf = [0u8; N];
    let r = match target {
        Target::Fd(fd) => fgetxattr(fd, name, &mut buf),
        Target::Entry { dir, name: entry } => {
            let path = format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), entry);
            lgetxattr(path, name, &mut buf)
        }
        Target::PathFd(fd) => {
            // Follows the magic link to the object itself; the descriptor
            // was opened beneath the share, so this reads nothing outside.
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            getxattr(path, name, &mut buf)
        }
    };
    match r {
        Ok(n) if n == N => Got::Value(buf),
        Err(Errno::OPNOTSUPP) => Got::Unsupported,
        // Wrong length (ERANGE: longer than ours), absent, or unreadable:
        // treat as never set.
        _ => Got::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn xattrs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let store = MetaStore::new();
        let key = file_key(&statx_fd(f.as_fd()).unwrap());
        assert_eq!(store.read(&Target::Fd(f.as_fd()), key), Stored::default());
        store.set_attrs(f.as_fd(), 0x22).unwrap();
        store.set_btime(f.as_fd(), 125_911_584_000_000_000).unwrap();
        let want = Stored {
            attrs: Some(0x22),
            btime: Some(125_911_584_000_000_000),
        };
        assert_eq!(store.read(&Target::Fd(f.as_fd()), key), want);
        // The on-disk format: 4 bytes little-endian.
        let mut raw = [0u8; 8];
        let n = fgetxattr(&f, ATTR_XATTR, &mut raw).unwrap();
        assert_eq!(&raw[..n], &[0x22, 0, 0, 0]);
        // Read by path, as listings do; a fresh store sees the same.
        let fresh = MetaStore::new();
        if fresh.can_read_by_path() {
            let d = std::fs::File::open(dir.path()).unwrap();
            let entry = Target::Entry {
                dir: d.as_fd(),
                name: "f",
            };
            assert_eq!(fresh.read(&entry, key), want);
        }
    }

    #[test]
    fn falls_back_to_memory_without_xattr_support() {
        // procfs refuses user xattrs with EOPNOTSUPP.
        let Ok(f) = std::fs::File::open("/proc/self/comm") else {
            return;
        };
        if fsetxattr(&f, ATTR_XATTR, &[0; 4], XattrFlags::empty()) != Err(Errno::OPNOTSUPP) {
            return;
        }
        let store = MetaStore::new();
        let key = file_key(&statx_fd(f.as_fd()).unwrap());
        store.set_attrs(f.as_fd(), 0x2).unwrap();
        store.set_btime(f.as_fd(), 42).unwrap();
        assert_eq!(
            store.read(&Target::Fd(f.as_fd()), key),
            Stored {
                attrs: Some(0x2),
                btime: Some(42)
            }
        );
        store.forget(key);
        assert_eq!(store.read(&Target::Fd(f.as_fd()), key), Stored::default());
    }
}
