//! What Windows keeps and POSIX does not: DOS attribute bits and a settable
//! creation time, stored in user xattrs so they survive a restart, or in
//! memory on filesystems without xattrs.
//!
//! What was read is remembered per inode with the inode's change time:
//! setting an xattr moves the change time, so a remembered value whose
//! change time still matches is what the xattrs hold. A change time is
//! trusted only once it is [`SETTLED`] old, since two changes inside one
//! clock tick share it. An open or a listing of an unchanged object then
//! costs no xattr read at all.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::{
    fgetxattr, fgetxattr_query, fsetxattr, getxattr, getxattr_query, lgetxattr, lgetxattr_query,
    Statx, XattrFlags,
};
use rustix::io::Errno;

use super::eas::EAS_XATTR;
use super::errno::io_err;
use super::sys::{file_key, statx_fd};
use crate::VfsResult;

/// How old a change time must be before values read under it are
/// remembered: longer than any filesystem's timestamp tick.
const SETTLED: Duration = Duration::from_secs(2);

/// Inodes whose values are remembered, per share; past it the memory is
/// emptied and filled again (about 64 bytes an inode).
const REMEMBERED: usize = 1 << 16;

pub const ATTR_XATTR: &str = "user.copyless.dosattrib";
pub const BTIME_XATTR: &str = "user.copyless.btime";

type FileKey = (u64, u64);

/// The stored values; None when never set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    pub attrs: Option<u32>,
    pub btime: Option<u64>,
    /// The length of its EAs' xattr (eas.rs), read only on a share
    /// that stores EAs.
    pub ea_size: Option<u32>,
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

/// A change time, seconds and nanoseconds.
type ChangeTime = (i64, u32);

pub struct MetaStore {
    /// Used only for objects on filesystems that refuse user xattrs.
    mem: Mutex<HashMap<FileKey, Stored>>,
    /// What the xattrs held, by inode, and the change time then.
    read: Mutex<HashMap<FileKey, (ChangeTime, Stored)>>,
    mem_used: AtomicBool,
    /// The share stores EAs: their size is read with the rest.
    eas: AtomicBool,
    /// /proc is mounted, so xattrs of a directory entry can be read by path
    /// without opening the entry.
    proc_fd: bool,
}

enum Got<const N: usize> {
    Value([u8; N]),
    /// Not set.
    None,
    /// Could not be read (not allowed, or not ours): taken as not set,
    /// but not remembered, since another caller may read it.
    Unread,
    Unsupported,
}

impl<const N: usize> Got<N> {
    fn value(&self) -> Option<[u8; N]> {
        match self {
            Got::Value(b) => Some(*b),
            _ => None,
        }
    }

    /// What any caller would read.
    fn definite(&self) -> bool {
        matches!(self, Got::Value(_) | Got::None)
    }
}

impl MetaStore {
    pub fn new() -> MetaStore {
        MetaStore {
            mem: Mutex::new(HashMap::new()),
            read: Mutex::new(HashMap::new()),
            mem_used: AtomicBool::new(false),
            eas: AtomicBool::new(false),
            proc_fd: std::path::Path::new("/proc/self/fd").is_dir(),
        }
    }

    /// From now on, reads take in the size of an object's EAs.
    pub fn read_ea_sizes(&self) {
        self.eas.store(true, Ordering::Relaxed);
    }

    /// Whether `Target::Entry` and `Target::PathFd` can be read.
    pub fn can_read_by_path(&self) -> bool {
        self.proc_fd
    }

    fn mem(&self) -> MutexGuard<'_, HashMap<FileKey, Stored>> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the values of the object `stx` describes (and the size of
    /// its EAs, on a share that stores them). Read errors
    /// other than "not supported" count as nothing stored: a stat must not
    /// fail over a missing attribute.
    pub fn read(&self, target: &Target<'_>, stx: &Statx) -> Stored {
        if let Some(stored) = self.remembered_for(stx) {
            return stored;
        }
        let key = file_key(stx);
        let changed = change_time(stx);
        let attrs = get::<4>(target, ATTR_XATTR);
        let btime = match attrs {
            Got::Unsupported => Got::Unsupported,
            _ => get::<8>(target, BTIME_XATTR),
        };
        // Some(None): not there; None: not read.
        let ea_size = if self.eas.load(Ordering::Relaxed) {
            get_len(target, EAS_XATTR)
        } else {
            Some(None)
        };
        let stored = Stored {
            attrs: attrs.value().map(u32::from_le_bytes),
            btime: btime.value().map(u64::from_le_bytes),
            ea_size: ea_size.flatten(),
        };
        if matches!(attrs, Got::Unsupported) || matches!(btime, Got::Unsupported) {
            if self.mem_used.load(Ordering::Relaxed) {
                if let Some(m) = self.mem().get(&key) {
                    return *m;
                }
            }
            return stored;
        }
        if attrs.definite() && btime.definite() && ea_size.is_some() && settled(changed) {
            let mut remembered = self.remembered();
            if remembered.len() >= REMEMBERED {
                remembered.clear();
            }
            remembered.insert(key, (changed, stored));
        }
        stored
    }

    /// Whether reading the values of the object `stx` describes needs no
    /// disk: they are remembered, or the object changed so recently (too
    /// recently to remember, see [`SETTLED`]) that the block holding them
    /// was just written and is in memory. Small xattrs such as ours live
    /// in the inode itself on ext4 and XFS, and beside it on btrfs.
    pub fn in_memory(&self, stx: &Statx) -> bool {
        self.remembered_for(stx).is_some() || !settled(change_time(stx))
    }

    /// What is remembered of the object `stx` describes, if it has not
    /// changed since.
    fn remembered_for(&self, stx: &Statx) -> Option<Stored> {
        let remembered = self.remembered();
        let (at, stored) = remembered.get(&file_key(stx))?;
        (*at == change_time(stx)).then_some(*stored)
    }

    fn remembered(&self) -> MutexGuard<'_, HashMap<FileKey, (ChangeTime, Stored)>> {
        self.read.lock().unwrap_or_else(|e| e.into_inner())
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
        // What is remembered of this inode needs no forgetting: the change
        // time moves with the xattr, past any settled one.
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
        self.remembered().remove(&key);
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
        // Absent, or of another length than ours (ERANGE: longer): never
        // set by us.
        Ok(_) | Err(Errno::NODATA | Errno::RANGE) => Got::None,
        Err(_) => Got::Unread,
    }
}

/// The length of xattr `name`: Some(None) when it is not there, None
/// when it could not be read.
fn get_len(target: &Target<'_>, name: &str) -> Option<Option<u32>> {
    let r = match target {
        Target::Fd(fd) => fgetxattr_query(fd, name),
        Target::Entry { dir, name: entry } => {
            let path = format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), entry);
            lgetxattr_query(path, name)
        }
        Target::PathFd(fd) => {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            getxattr_query(path, name)
        }
    };
    match r {
        Ok(n) => Some(u32::try_from(n).ok()),
        Err(Errno::NODATA) => Some(None),
        Err(_) => None,
    }
}

fn change_time(stx: &Statx) -> ChangeTime {
    (stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec)
}

/// Whether a change time is old enough that a later change cannot share it.
fn settled(changed: ChangeTime) -> bool {
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        return false;
    };
    let changed = Duration::new(changed.0.max(0) as u64, changed.1);
    now.saturating_sub(changed) >= SETTLED
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
        assert_eq!(
            store.read(&Target::Fd(f.as_fd()), &statx_fd(f.as_fd()).unwrap()),
            Stored::default()
        );
        store.set_attrs(f.as_fd(), 0x22).unwrap();
        store.set_btime(f.as_fd(), 125_911_584_000_000_000).unwrap();
        let want = Stored {
            attrs: Some(0x22),
            btime: Some(125_911_584_000_000_000),
            ea_size: None,
        };
        assert_eq!(
            store.read(&Target::Fd(f.as_fd()), &statx_fd(f.as_fd()).unwrap()),
            want
        );
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
            assert_eq!(fresh.read(&entry, &statx_fd(f.as_fd()).unwrap()), want);
        }
    }

    #[test]
    fn values_read_under_a_settled_change_time_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let store = MetaStore::new();
        store.set_attrs(f.as_fd(), 0x20).unwrap();
        let mut old = statx_fd(f.as_fd()).unwrap();
        old.stx_ctime.tv_sec -= 10;
        let mut fresh = statx_fd(f.as_fd()).unwrap();
        let was = Stored {
            attrs: Some(0x20),
            btime: None,
            ea_size: None,
        };
        assert_eq!(store.read(&Target::Fd(f.as_fd()), &old), was);
        // Changed behind the store's back, yet under the same change
        // time: the remembered value is what is read, so no xattr was.
        fsetxattr(&f, ATTR_XATTR, &0x22u32.to_le_bytes(), XattrFlags::empty()).unwrap();
        assert_eq!(store.read(&Target::Fd(f.as_fd()), &old), was);
        // The real change time differs: read again.
        let now = Stored {
            attrs: Some(0x22),
            btime: None,
            ea_size: None,
        };
        assert_eq!(store.read(&Target::Fd(f.as_fd()), &fresh), now);
        // A change time of just now is not trusted: two changes may share it.
        fsetxattr(&f, ATTR_XATTR, &0x24u32.to_le_bytes(), XattrFlags::empty()).unwrap();
        assert_eq!(store.read(&Target::Fd(f.as_fd()), &fresh).attrs, Some(0x24));
        fresh = statx_fd(f.as_fd()).unwrap();
        store.forget(file_key(&fresh));
        assert_eq!(store.read(&Target::Fd(f.as_fd()), &old).attrs, Some(0x24));
    }

    #[test]
    fn values_are_in_memory_when_remembered_or_just_changed() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let store = MetaStore::new();
        let fresh = statx_fd(f.as_fd()).unwrap();
        assert!(store.in_memory(&fresh), "just made");
        let mut old = fresh;
        old.stx_ctime.tv_sec -= 10;
        assert!(!store.in_memory(&old), "settled and never read");
        store.read(&Target::Fd(f.as_fd()), &old);
        assert!(store.in_memory(&old), "settled and read");
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
            store.read(&Target::Fd(f.as_fd()), &statx_fd(f.as_fd()).unwrap()),
            Stored {
                attrs: Some(0x2),
                btime: Some(42),
                ea_size: None,
            }
        );
        store.forget(key);
        assert_eq!(
            store.read(&Target::Fd(f.as_fd()), &statx_fd(f.as_fd()).unwrap()),
            Stored::default()
        );
    }
}
