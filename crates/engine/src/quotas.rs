//! The kernel's disk quotas, through `quotactl_fd` (Linux 5.14): the
//! filesystem is named by a descriptor of the share's root, so neither a
//! block device path nor access to /dev is needed (the service runs with
//! PrivateDevices), and tmpfs, which has no device, would do too.
//! Neither rustix nor libc wraps the call; this is the one place that
//! makes it.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use copyless_vfs::{KernelQuotas, Quota, QuotaState};

/// `quotactl` sub-commands (linux/quota.h, linux/dqblk_xfs.h).
const Q_GETQUOTA: u32 = 0x80_0007;
const Q_SETQUOTA: u32 = 0x80_0008;
const Q_GETNEXTQUOTA: u32 = 0x80_0009;
const Q_XGETQSTAT: u32 = ((b'X' as u32) << 8) + 5;
const USRQUOTA: u32 = 0;

/// The kernel counts limits in blocks of 1 KiB (QIF_DQBLKSIZE).
const QUOTA_BLOCK: u64 = 1024;
/// if_dqblk.dqb_valid: the block limits.
const QIF_BLIMITS: u32 = 1;
/// fs_quota_stat.qs_flags: user quotas counted, and enforced.
const FS_QUOTA_UDQ_ACCT: u16 = 1;
const FS_QUOTA_UDQ_ENFD: u16 = 2;

/// struct if_nextdqblk: struct if_dqblk (which Q_GETQUOTA and
/// Q_SETQUOTA take; the same size, its padding where dqb_id is) and
/// the entry's id.
#[repr(C)]
#[derive(Default)]
struct NextDqblk {
    bhardlimit: u64,
    bsoftlimit: u64,
    curspace: u64,
    ihardlimit: u64,
    isoftlimit: u64,
    curinodes: u64,
    btime: u64,
    itime: u64,
    valid: u32,
    id: u32,
}

impl NextDqblk {
    fn quota(&self) -> Quota {
        Quota {
            used: self.curspace,
            soft: self.bsoftlimit.saturating_mul(QUOTA_BLOCK),
            hard: self.bhardlimit.saturating_mul(QUOTA_BLOCK),
        }
    }
}

/// `quotactl_fd(fd, QCMD(cmd, USRQUOTA), id, addr)`.
///
/// `addr` must be the address of a buffer at least as large as what the
/// kernel reads or writes for `cmd`: struct if_dqblk for Q_GETQUOTA and
/// Q_SETQUOTA, struct if_nextdqblk for Q_GETNEXTQUOTA, struct
/// fs_quota_stat (80 bytes) for Q_XGETQSTAT.
fn quotactl_fd(fd: BorrowedFd<'_>, cmd: u32, id: u32, addr: *mut libc::c_void) -> io::Result<()> {
    // SAFETY: the descriptor is borrowed, so open for the call; the
    // kernel touches no memory but the `addr` buffer, whose size each
    // caller below gives for its command (see above), and keeps no
    // pointer to it after the call returns.
    let r = unsafe {
        libc::syscall(
            libc::SYS_quotactl_fd,
            libc::c_long::from(fd.as_raw_fd()),
            libc::c_long::from((cmd << 8) | USRQUOTA),
            libc::c_long::from(id),
            addr,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The kernel's quotas, as the VFS asks for them.
pub struct Quotactl;

impl KernelQuotas for Quotactl {
    fn state(&self, fd: BorrowedFd<'_>) -> io::Result<QuotaState> {
        // struct fs_quota_stat is 80 bytes on every 64-bit architecture;
        // its qs_flags are bytes 2 and 3. The buffer is larger, and
        // 8-byte aligned as the struct is.
        let mut stat = [0u64; 16];
        match quotactl_fd(fd, Q_XGETQSTAT, 0, stat.as_mut_ptr().cast()) {
            Ok(()) => {
                let head = stat[0].to_ne_bytes();
                let flags = u16::from_ne_bytes([head[2], head[3]]);
                Ok(QuotaState {
                    tracked: flags & FS_QUOTA_UDQ_ACCT != 0,
                    enforced: flags & FS_QUOTA_UDQ_ENFD != 0,
                })
            }
            // No quota support in the filesystem, or none turned on.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::ESRCH)) => {
                Ok(QuotaState::default())
            }
            Err(e) => Err(e),
        }
    }

    fn get(&self, fd: BorrowedFd<'_>, uid: u32) -> io::Result<Quota> {
        let mut d = NextDqblk::default();
        match quotactl_fd(fd, Q_GETQUOTA, uid, (&mut d as *mut NextDqblk).cast()) {
            Ok(()) => Ok(d.quota()),
            // XFS keeps no entry for a user who never had one.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(Quota::default()),
            Err(e) => Err(e),
        }
    }

    fn next(&self, fd: BorrowedFd<'_>, from: u32) -> io::Result<Option<(u32, Quota)>> {
        let mut d = NextDqblk::default();
        match quotactl_fd(fd, Q_GETNEXTQUOTA, from, (&mut d as *mut NextDqblk).cast()) {
            Ok(()) => Ok(Some((d.id, d.quota()))),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn set(&self, fd: BorrowedFd<'_>, uid: u32, soft: u64, hard: u64) -> io::Result<()> {
        // A limit is never lower than asked: bytes are rounded up to
        // whole blocks.
        let mut d = NextDqblk {
            bsoftlimit: soft.div_ceil(QUOTA_BLOCK),
            bhardlimit: hard.div_ceil(QUOTA_BLOCK),
            valid: QIF_BLIMITS,
            ..NextDqblk::default()
        };
        quotactl_fd(fd, Q_SETQUOTA, uid, (&mut d as *mut NextDqblk).cast())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_structs_have_their_sizes() {
        // struct if_dqblk and struct if_nextdqblk are both 72 bytes.
        assert_eq!(std::mem::size_of::<NextDqblk>(), 72);
        assert_eq!(std::mem::size_of::<libc::dqblk>(), 72);
        assert_eq!(std::mem::offset_of!(NextDqblk, id), 68);
    }

    /// Each call reaches the kernel as it should: on a disk's filesystem
    /// (which has quota operations, unlike tmpfs) a call the kernel did
    /// not understand would be EINVAL, a bad buffer EFAULT, a bad
    /// descriptor EBADF; without quotas turned on the answer is ESRCH
    /// (or ENOSYS where the filesystem has no quota operations at all).
    #[test]
    fn the_kernel_answers_each_call() {
        use std::os::fd::AsFd;
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let fd = rustix::fs::open(
            dir.path(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let fd = fd.as_fd();
        let state = Quotactl.state(fd).unwrap();
        let own = rustix::process::geteuid().as_raw();
        let off = |e: io::Error| {
            assert!(
                matches!(e.raw_os_error(), Some(libc::ESRCH | libc::ENOSYS)),
                "{e}"
            );
            assert!(!state.tracked);
        };
        match Quotactl.get(fd, own) {
            Ok(_) => assert!(state.tracked),
            Err(e) => off(e),
        }
        match Quotactl.next(fd, 0) {
            Ok(_) => assert!(state.tracked),
            Err(e) => off(e),
        }
    }
}
