//! Thin wrappers over the system calls every operation uses.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{
    makedev, openat2, statx, AtFlags, FileType, Mode, OFlags, ResolveFlags, Statx, StatxFlags,
    StatxTimestamp,
};
use rustix::io::Errno;

use super::case_cache::Stamp;
use super::time::filetime_from_unix;

/// Every path we open stays beneath the directory it is resolved from, and
/// /proc magic links (which can point anywhere) are never followed.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

const STATX_MASK: StatxFlags = StatxFlags::BASIC_STATS.union(StatxFlags::BTIME);

pub fn open_beneath(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let mut tries = 0;
    loop {
        match openat2(dir, path, flags | OFlags::CLOEXEC, mode, RESOLVE) {
            // openat2 says EAGAIN when a concurrent rename kept it from
            // proving the walk stayed beneath; trying again is the remedy.
            Err(Errno::AGAIN | Errno::INTR) if tries < 16 => tries += 1,
            r => return r,
        }
    }
}

/// An O_PATH descriptor of `path` beneath `dir`, only if every name on
/// the way is in the kernel's cache and on `dir`'s mount: EAGAIN (or
/// EXDEV) otherwise, never a wait for a disk.
pub fn open_cached(dir: BorrowedFd<'_>, path: &str) -> Result<OwnedFd, Errno> {
    openat2(
        dir,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        RESOLVE | ResolveFlags::CACHED | ResolveFlags::NO_XDEV,
    )
}

pub fn statx_fd(fd: BorrowedFd<'_>) -> Result<Statx, Errno> {
    statx(fd, "", AtFlags::EMPTY_PATH, STATX_MASK)
}

/// Stat of a single name in `dir`, not following a symlink.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &str) -> Result<Statx, Errno> {
    statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, STATX_MASK)
}

pub fn file_type(stx: &Statx) -> FileType {
    FileType::from_raw_mode(u32::from(stx.stx_mode))
}

/// (dev, ino): what identifies an inode for the caches.
pub fn file_key(stx: &Statx) -> (u64, u64) {
    (makedev(stx.stx_dev_major, stx.stx_dev_minor), stx.stx_ino)
}

pub fn stamp(stx: &Statx) -> Stamp {
    Stamp {
        mtime: (stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec),
        ctime: (stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec),
    }
}

pub fn filetime(t: &StatxTimestamp) -> u64 {
    filetime_from_unix(t.tv_sec, t.tv_nsec)
}

pub fn has_btime(stx: &Statx) -> bool {
    stx.stx_mask & StatxFlags::BTIME.bits() != 0
}

/// Whether the folder `dir` has a POSIX default ACL, which the kernel
/// gives what is made in it instead of applying the umask.
pub fn has_default_acl(dir: BorrowedFd<'_>) -> bool {
    // Size 0 asks only whether it is there.
    rustix::fs::fgetxattr(dir, "system.posix_acl_default", &mut [0u8; 0]).is_ok()
}

/// Gives the object `fd` just made in `dir` the mode `wanted` where the
/// kernel did not (the process's umask narrowed it, or mkdir dropped a
/// setgid bit asked for), unless the folder's default ACL decided it, as
/// it does under Samba. A folder keeps the setgid bit it got from its
/// parent. True when the mode was changed.
pub fn settle_mode(
    dir: BorrowedFd<'_>,
    fd: BorrowedFd<'_>,
    stx: &Statx,
    wanted: u32,
) -> Result<bool, Errno> {
    let is_dir = file_type(stx) == FileType::Directory;
    let got = u32::from(stx.stx_mode) & 0o7777;
    let wanted = match is_dir {
        true => wanted | (got & 0o2000),
        false => wanted,
    };
    if got == wanted || has_default_acl(dir) {
        return Ok(false);
    }
    rustix::fs::fchmod(fd, Mode::from_raw_mode(wanted))?;
    Ok(true)
}

/// The value of the xattr `name` of `fd`, of at most `max_len` bytes; None
/// when the object has none (or its filesystem keeps no xattrs).
pub fn xattr_value(
    fd: BorrowedFd<'_>,
    name: &str,
    max_len: usize,
) -> crate::VfsResult<Option<Vec<u8>>> {
    use std::os::fd::AsRawFd;
    let mut buf = vec![0u8; 1024.min(max_len)];
    loop {
        let r = match rustix::fs::fgetxattr(fd, name, &mut buf) {
            // A descriptor opened with O_PATH cannot be read through
            // directly; its /proc link can.
            Err(Errno::BADF) => {
                let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
                rustix::fs::getxattr(path, name, &mut buf)
            }
            r => r,
        };
        match r {
            Ok(n) => {
                buf.truncate(n);
                return Ok(Some(buf));
            }
            Err(Errno::RANGE) if buf.len() < max_len => buf.resize(max_len, 0),
            Err(Errno::NODATA) | Err(Errno::OPNOTSUPP) => return Ok(None),
            Err(e) => return Err(super::errno::io_err(e)),
        }
    }
}
