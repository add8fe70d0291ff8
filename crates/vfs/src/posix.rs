//! The POSIX backend: a share is a directory tree on a local Linux
//! filesystem.
//!
//! Every path is opened relative to a descriptor of the share root with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so neither `..` nor a
//! symlink can lead outside it; symlinks whose targets stay inside are
//! followed. Names are looked up exactly first and, on a miss, through a
//! per-directory case-folded name cache (see [`case_cache`]).

mod case_cache;
mod creds;
mod eas;
mod errno;
mod extents;
mod meta;
mod ntacl;
mod streams;
mod sys;
mod time;
mod tunnel;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{
    accessat, fallocate, fcntl_setfl, fdatasync, fstatvfs, fsync, ftruncate, futimens, mkdirat,
    renameat, renameat_with, unlinkat, Access, AtFlags, Dir, FallocateFlags, FileType, Mode,
    OFlags, RenameFlags, Statx, StatxAttributes, StatxFlags, Timespec, Timestamps, UTIME_OMIT,
};
use rustix::io::Errno;

use crate::names::{fold, join, split};
use crate::shortname;
use crate::{
    attr, CreateAction, Disposition, Ea, FileHandle, FileStat, FsStat, Identity, KernelQuotas,
    Kind, NewModes, OpenRequest, Opened, Quota, QuotaState, RootState, SetTimes, UnixAccess, Vfs,
    VfsError, VfsResult,
};
use case_cache::{CaseCache, DirKey, Lookup};
use eas::EaStore;
use errno::{io_err, path_err};
use meta::{MetaStore, Stored, Target};
use ntacl::AclStore;
use sys::{
    file_key, file_type, filetime, has_btime, has_default_acl, lstat_at, open_beneath, settle_mode,
    stamp, statx_fd,
};
use tunnel::Tunnel;

pub use time::{filetime_from_unix, unix_from_filetime, UNIX_EPOCH_AS_FILETIME};

/// Directories whose names the case cache holds at most.
const MAX_CACHED_DIRS: usize = 1024;
/// Names the case cache holds at most, over all directories.
const MAX_CACHED_NAMES: usize = 1 << 20;

pub struct PosixVfs {
    root: OwnedFd,
    /// The path the root was opened at, and the (dev, ino) found there:
    /// the share is current while the path still leads to it.
    source: std::path::PathBuf,
    root_key: (u64, u64),
    /// The device of the share's root, when its filesystem is one whose
    /// data an engine may read and write itself (see [`DataKind`]).
    direct_dev: Option<u64>,
    /// That data is in memory ([`DataKind::Memory`]).
    data_in_memory: bool,
    /// Copies inside the filesystem clone ([`FsStat::clones`]).
    clones: bool,
    /// Files may be compressed ([`FsStat::compresses`]).
    compresses: bool,
    /// How the engine reaches the kernel's disk quotas; without it the
    /// share has none.
    quotas: Option<std::sync::Arc<dyn KernelQuotas>>,
    cache: CaseCache,
    /// Long names that left a folder moments ago (see tunnel.rs).
    tunnel: Tunnel,
    meta: MetaStore,
    acls: AclStore,
    eas: EaStore,
    change_times: ChangeTimes,
    /// Serializes read-modify-write of stream xattrs.
    stream_lock: std::sync::Mutex<()>,
    /// The modes of what the share creates.
    modes: NewModes,
}

/// Change times set by clients. Linux owns ctime, so a set value is kept
/// in memory beside the real ctime it was set at, and reported for as long
/// as the file's real ctime has not moved since: any later change to the
/// file's data or names then shows through, as it would on Windows. The
/// metadata a client sets itself (attributes, times, EAs) is kept in ways
/// that move the real ctime too; those changes carry the set value over,
/// as Windows keeps a change time the client set on that open
/// (MS-FSA 2.1.4.17, Open.UserSetChangeTime). Lost on restart, when the
/// real ctime is reported again.
#[derive(Default)]
struct ChangeTimes {
    map: std::sync::Mutex<std::collections::HashMap<(u64, u64), PinnedChange>>,
}

/// (the change time reported, the real ctime seconds and nanoseconds it
/// holds for).
type PinnedChange = (u64, i64, u32);

impl ChangeTimes {
    /// Bound on remembered files; past it the oldest state is dropped.
    const MAX: usize = 65536;

    fn set(&self, stx: &Statx, value: u64) {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= Self::MAX {
            m.clear();
        }
        m.insert(
            (file_key(stx).0, stx.stx_ino),
            (value, stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec),
        );
    }

    /// The change time set for the object `fd` is open on, if it still
    /// holds.
    fn pinned(&self, fd: BorrowedFd<'_>) -> VfsResult<Option<u64>> {
        if self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            // Nothing was ever set: no stat needed.
            return Ok(None);
        }
        let stx = statx_fd(fd).map_err(io_err)?;
        let m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        Ok(match m.get(&(file_key(&stx).0, stx.stx_ino)) {
            Some(&(v, sec, nsec))
                if sec == stx.stx_ctime.tv_sec && nsec == stx.stx_ctime.tv_nsec =>
            {
                Some(v)
            }
            _ => None,
        })
    }

    /// Makes `change` of the metadata of the object `fd` is open on, and
    /// carries a change time set for it over to the ctime that follows.
    fn keeping<T>(
        &self,
        fd: BorrowedFd<'_>,
        change: impl FnOnce() -> VfsResult<T>,
    ) -> VfsResult<T> {
        let pinned = self.pinned(fd)?;
        let done = change()?;
        if let Some(v) = pinned {
            self.set(&statx_fd(fd).map_err(io_err)?, v);
        }
        Ok(done)
    }

    fn apply(&self, stx: &Statx, mut st: FileStat) -> FileStat {
        let mut m = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if m.is_empty() {
            return st;
        }
        let key = (file_key(stx).0, stx.stx_ino);
        match m.get(&key) {
            Some(&(v, sec, nsec))
                if sec == stx.stx_ctime.tv_sec && nsec == stx.stx_ctime.tv_nsec =>
            {
                st.change_time = v;
            }
            Some(_) => {
                m.remove(&key);
            }
            None => {}
        }
        st
    }
}

/// A directory on the way to an object: the root itself or one we opened.
enum DirRef<'a> {
    Root(BorrowedFd<'a>),
    Sub(OwnedFd),
}

impl DirRef<'_> {
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            DirRef::Root(fd) => *fd,
            DirRef::Sub(fd) => fd.as_fd(),
        }
    }
}

/// An existing directory entry: its real name and its lstat.
struct Child {
    name: String,
    lstat: Statx,
}

impl PosixVfs {
    pub fn new(root: &Path) -> std::io::Result<PosixVfs> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Without openat2 (Linux < 5.6) the share cannot be kept safe: refuse
        // to start rather than fail on every request.
        open_beneath(
            fd.as_fd(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        let acls = AclStore::new(fd.as_fd());
        let eas = EaStore::new(fd.as_fd());
        let root_key = file_key(&statx_fd(fd.as_fd())?);
        let data = data_kind(fd.as_fd())?;
        let clones = clones(fd.as_fd())?;
        // btrfs alone of the local filesystems compresses what is marked.
        let compresses = rustix::fs::fstatfs(&fd)?.f_type as i64 == BTRFS;
        let direct_dev = (data != DataKind::Indirect).then_some(root_key.0);
        let meta = MetaStore::new();
        if eas.in_use() {
            meta.read_ea_sizes();
        }
        Ok(PosixVfs {
            acls,
            eas,
            direct_dev,
            data_in_memory: data == DataKind::Memory,
            clones,
            compresses,
            quotas: None,
            root: fd,
            source: root.to_path_buf(),
            root_key,
            cache: CaseCache::new(MAX_CACHED_DIRS, MAX_CACHED_NAMES),
            tunnel: Tunnel::default(),
            meta,
            change_times: ChangeTimes::default(),
            stream_lock: std::sync::Mutex::new(()),
            modes: NewModes::default(),
        })
    }

    /// The share's modes for what it creates ([`NewModes::default`] until
    /// set).
    pub fn with_modes(mut self, modes: NewModes) -> PosixVfs {
        self.modes = modes;
        self
    }

    /// Users' disk quotas, read and set through `quotas` (see quota.rs).
    pub fn with_quotas(mut self, quotas: std::sync::Arc<dyn KernelQuotas>) -> PosixVfs {
        self.quotas = Some(quotas);
        self
    }

    /// The kernel's quotas, acting as `who`.
    fn quotas_as(&self, who: &Identity) -> VfsResult<&dyn KernelQuotas> {
        let quotas = self.quotas.as_deref().ok_or(VfsError::NotSupported)?;
        creds::act_as(who)?;
        Ok(quotas)
    }

    /// Opens a directory by its real path beneath the root.
    fn open_dir(&self, path: &str) -> Result<OwnedFd, Errno> {
        open_dir_at(self.root.as_fd(), path)
    }

    /// Resolves the directories of a path case-insensitively: a descriptor
    /// of the last one and its real path.
    fn resolve_dir(&self, comps: &[&str]) -> VfsResult<(DirRef<'_>, String)> {
        if comps.is_empty() {
            return Ok((DirRef::Root(self.root.as_fd()), String::new()));
        }
        // Clients nearly always send the real case: one walk in the kernel.
        let given = comps.join("/");
        match self.open_dir(&given) {
            Ok(fd) => return Ok((DirRef::Sub(fd), given)),
            Err(Errno::NOENT | Errno::NOTDIR) => {}
            Err(e) => return Err(path_err(e, false)),
        }
        let mut dir = DirRef::Root(self.root.as_fd());
        let mut real = String::new();
        for comp in comps {
            let child = self
                .find_child(dir.fd(), comp)?
                .ok_or(VfsError::PathNotFound)?;
            real = join(&real, &child.name);
            // From the directory reached so far, so that a deep path costs
            // one lookup a level, not the whole prefix again; a symlink
            // from the root, where it may lead anywhere beneath.
            let fd = if file_type(&child.lstat) == FileType::Symlink {
                self.open_dir(&real)
            } else {
                open_dir_at(dir.fd(), &child.name)
            };
            dir = DirRef::Sub(fd.map_err(|e| path_err(e, false))?);
        }
        Ok((dir, real))
    }

    /// Finds `name` in `dir`: the exact name first, else an entry equal to
    /// it case-insensitively.
    fn find_child(&self, dir: BorrowedFd<'_>, name: &str) -> VfsResult<Option<Child>> {
        self.look_up(dir, name).map(|(child, _)| child)
    }

    /// [`PosixVfs::find_child`], with the key of `dir` where it was looked
    /// at (the exact name was not there), so that a change made next need
    /// not look again. A name of a short name's form that names nothing
    /// else names the entry whose short name it is.
    fn look_up(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
    ) -> VfsResult<(Option<Child>, Option<DirKey>)> {
        let (child, key) = self.look_up_any_case(dir, name)?;
        if child.is_some() || !shortname::is_hashed(name) {
            return Ok((child, key));
        }
        let Ok(names) = scan_names(dir) else {
            return Ok((None, key));
        };
        let Some(real) = names.into_iter().find(|n| shortname::matches(name, n)) else {
            return Ok((None, key));
        };
        match lstat_at(dir, &real) {
            Ok(lstat) => Ok((Some(Child { name: real, lstat }), key)),
            Err(Errno::NOENT) => Ok((None, key)),
            Err(e) => Err(path_err(e, true)),
        }
    }

    /// [`PosixVfs::look_up`] by the name alone: exactly, else case aside.
    fn look_up_any_case(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
    ) -> VfsResult<(Option<Child>, Option<DirKey>)> {
        match lstat_at(dir, name) {
            Ok(lstat) => {
                let child = Child {
                    name: name.to_owned(),
                    lstat,
                };
                return Ok((Some(child), None));
            }
            Err(Errno::NOENT) => {}
            Err(e) => return Err(path_err(e, true)),
        }
        let folded = fold(name);
        // A few rounds, for a directory that changes while we read it.
        for _ in 0..3 {
            let generation = self.cache.generation();
            let dstx = statx_fd(dir).map_err(io_err)?;
            let key = file_key(&dstx);
            match self.cache.lookup(key, stamp(&dstx), &folded) {
                Lookup::Absent => return Ok((None, Some(key))),
                Lookup::Found(real) => match lstat_at(dir, &real) {
                    Ok(lstat) => return Ok((Some(Child { name: real, lstat }), Some(key))),
                    Err(Errno::NOENT) => self.cache.invalidate(key),
                    Err(e) => return Err(path_err(e, true)),
                },
                Lookup::Unknown => {
                    // The listing answers this lookup even when it cannot
                    // be kept for the next one.
                    let names = match scan_names(dir) {
                        Ok(names) => names,
                        // A folder its caller may pass through but not
                        // list (held as O_PATH): no other case of the name
                        // can be found, and the kernel decides on this one.
                        Err(VfsError::AccessDenied) => return Ok((None, Some(key))),
                        Err(VfsError::Io(e))
                            if e.raw_os_error() == Some(Errno::BADF.raw_os_error()) =>
                        {
                            return Ok((None, Some(key)))
                        }
                        Err(e) => return Err(e),
                    };
                    let real = names.iter().find(|n| fold(n) == folded).cloned();
                    self.cache.fill(key, stamp(&dstx), generation, names);
                    let Some(real) = real else {
                        return Ok((None, Some(key)));
                    };
                    match lstat_at(dir, &real) {
                        Ok(lstat) => return Ok((Some(Child { name: real, lstat }), Some(key))),
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(path_err(e, true)),
                    }
                }
            }
        }
        Ok((None, None))
    }

    /// Announces a change of ours about to be made in `dirs` (see
    /// case_cache.rs), until the guard goes.
    fn changing(&self, dirs: &[BorrowedFd<'_>]) -> case_cache::Changing<'_> {
        let keys: Vec<_> = dirs
            .iter()
            .filter_map(|d| statx_fd(*d).ok().map(|stx| file_key(&stx)))
            .collect();
        self.cache.changing(&keys)
    }

    fn note_added(&self, dir: BorrowedFd<'_>, name: &str) {
        if let Ok(stx) = statx_fd(dir) {
            self.cache.added(file_key(&stx), stamp(&stx), name);
        }
    }

    /// We moved an entry from one folder and name to another (the same
    /// folder when `same_dir`): each folder looked at once.
    fn note_moved(
        &self,
        (from, from_name): (BorrowedFd<'_>, &str),
        (to, to_name): (BorrowedFd<'_>, &str),
        same_dir: bool,
    ) {
        let to_stx = statx_fd(to);
        let from_stx = match &to_stx {
            Ok(stx) if same_dir => Ok(*stx),
            _ => statx_fd(from),
        };
        if let Ok(stx) = from_stx {
            self.cache.removed(file_key(&stx), stamp(&stx), from_name);
            if !same_dir || fold(from_name) != fold(to_name) {
                self.tunnel.note_gone(file_key(&stx), from_name);
            }
        }
        if let Ok(stx) = to_stx {
            self.cache.added(file_key(&stx), stamp(&stx), to_name);
        }
    }

    fn note_removed(&self, dir: BorrowedFd<'_>, name: &str) {
        if let Ok(stx) = statx_fd(dir) {
            self.cache.removed(file_key(&stx), stamp(&stx), name);
            self.tunnel.note_gone(file_key(&stx), name);
        }
    }

    /// The long name a new entry `name` in `dir` takes back (see
    /// tunnel.rs), if nothing has taken it since.
    fn tunneled(&self, dir: BorrowedFd<'_>, name: &str) -> Option<String> {
        if !shortname::is_hashed(name) {
            return None;
        }
        let key = file_key(&statx_fd(dir).ok()?);
        let long = self.tunnel.take_long_name(key, name)?;
        matches!(lstat_at(dir, &long), Err(Errno::NOENT)).then_some(long)
    }

    /// An object's directory entry went away: drop what we keep about the
    /// inode if that was its last name.
    fn note_gone(&self, lstat: &Statx) {
        let key = file_key(lstat);
        if file_type(lstat) == FileType::Directory {
            self.cache.invalidate(key);
            self.meta.forget(key);
        } else if lstat.stx_nlink <= 1 {
            self.meta.forget(key);
        }
    }

    /// [`Opened::may_unlink`] of an entry owned by `owner` just opened in
    /// the folder `dir`.
    fn may_unlink(&self, req: &OpenRequest<'_>, dir: BorrowedFd<'_>, owner: u32) -> Option<bool> {
        req.unlink_asked
            .then(|| may_unlink_from(req.who, dir, owner).is_ok())
    }

    fn stat_fd(&self, fd: BorrowedFd<'_>) -> VfsResult<FileStat> {
        let stx = statx_fd(fd).map_err(io_err)?;
        let stored = self.meta.read(&Target::Fd(fd), &stx);
        Ok(self.change_times.apply(&stx, build_stat(&stx, stored)))
    }

    fn open_root(&self, req: &OpenRequest<'_>) -> VfsResult<Opened> {
        crate::root_may_open(req)?;
        let fd = self.open_dir("").map_err(|e| path_err(e, true))?;
        let stat = self.stat_fd(fd.as_fd())?;
        Ok(Opened {
            handle: FileHandle::from_fd(fd, true, None).acting_as(req.who),
            action: CreateAction::Opened,
            stat,
            path: String::new(),
            may_unlink: None,
        })
    }

    /// Opens an existing object found as `child` at the real `path`;
    /// `action` tells whether it is to be truncated.
    fn open_existing(
        &self,
        path: &str,
        child: &Child,
        req: &OpenRequest<'_>,
        action: CreateAction,
    ) -> VfsResult<(FileHandle, FileStat)> {
        let truncate = action != CreateAction::Opened;
        // What the entry is, when it is not a symlink we have yet to follow.
        let known_dir = match file_type(&child.lstat) {
            FileType::Directory => Some(true),
            FileType::RegularFile => Some(false),
            FileType::Symlink => None,
            // Devices, FIFOs and sockets are not served.
            _ => return Err(VfsError::AccessDenied),
        };
        check_kind(known_dir, req.kind, truncate)?;
        let as_dir = known_dir == Some(true) || req.kind == Kind::Directory;
        let fd = if as_dir {
            self.open_dir(path).map_err(|e| match e {
                Errno::NOTDIR => VfsError::NotADirectory,
                e => path_err(e, true),
            })?
        } else {
            let access = if req.write || truncate {
                OFlags::RDWR
            } else {
                OFlags::RDONLY
            };
            // O_NONBLOCK so that a FIFO swapped in under us cannot block the
            // open; it is cleared again below once we know it is a file.
            let flags = access | OFlags::NONBLOCK | OFlags::NOCTTY;
            match open_beneath(self.root.as_fd(), path, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::ISDIR) if req.kind == Kind::Any && !truncate => {
                    self.open_dir(path).map_err(|e| path_err(e, true))?
                }
                Err(e) => return Err(path_err(e, true)),
            }
        };
        let mut stx = statx_fd(fd.as_fd()).map_err(io_err)?;
        let is_dir = match file_type(&stx) {
            FileType::Directory => true,
            FileType::RegularFile => false,
            _ => return Err(VfsError::AccessDenied),
        };
        check_kind(Some(is_dir), req.kind, truncate)?;
        if !is_dir && !as_dir {
            // io_uring would hand EAGAIN back for a file left O_NONBLOCK.
            fcntl_setfl(&fd, OFlags::empty()).map_err(io_err)?;
        }
        if truncate {
            ftruncate(&fd, 0).map_err(io_err)?;
            self.meta.set_attrs(
                fd.as_fd(),
                (req.attributes & attr::SETTABLE) | attr::ARCHIVE,
            )?;
            if req.allocation_size > 0 {
                preallocate(fd.as_fd(), req.allocation_size)?;
            }
            stx = statx_fd(fd.as_fd()).map_err(io_err)?;
        }
        let stored = self.meta.read(&Target::Fd(fd.as_fd()), &stx);
        let stat = self.change_times.apply(&stx, build_stat(&stx, stored));
        Ok((self.handle(fd, is_dir, &stat, req.who), stat))
    }

    /// A handle on a file or directory opened for `who`: its data I/O left
    /// to the engine when the file lies on the share's own device.
    fn handle(&self, fd: OwnedFd, is_dir: bool, stat: &FileStat, who: &Identity) -> FileHandle {
        FileHandle::from_fd(fd, is_dir, None)
            .direct(self.direct_dev == Some(stat.dev))
            .acting_as(who)
    }

    /// Creates `name` in `dir` (whose key is known when it was looked at
    /// just before); Collision if anything has that exact name.
    fn create_new(
        &self,
        (dir, key): (BorrowedFd<'_>, Option<DirKey>),
        name: &str,
        req: &OpenRequest<'_>,
    ) -> VfsResult<(FileHandle, FileStat)> {
        let settable = req.attributes & attr::SETTABLE;
        let is_dir = req.kind == Kind::Directory;
        let _changing = match key {
            Some(key) => self.cache.changing(&[key]),
            None => self.changing(&[dir]),
        };
        let parent = match self.modes.needs_parent() {
            true => statx_fd(dir).map_err(io_err)?.stx_mode.into(),
            false => 0,
        };
        let wanted = self.modes.mode(is_dir, parent);
        let acl_inherited = self.modes.inherit_acls && has_default_acl(dir);
        // Writable by its owner until its attributes are stored (a user
        // xattr needs write permission); `settle_mode` then gives the
        // mode wanted.
        let given = match (acl_inherited, is_dir) {
            (true, true) => 0o777,
            (true, false) => 0o666,
            (false, _) => wanted | 0o200,
        };
        let fd = if is_dir {
            mkdirat(dir, name, Mode::from_raw_mode(given)).map_err(|e| path_err(e, true))?;
            self.note_added(dir, name);
            open_beneath(
                dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
                Mode::empty(),
            )
            .map_err(|e| path_err(e, true))?
        } else {
            let access = if req.write {
                OFlags::RDWR
            } else {
                OFlags::RDONLY
            };
            // O_EXCL: an existing name, even a dangling symlink, is a
            // collision and is never followed.
            let flags = access | OFlags::CREATE | OFlags::EXCL | OFlags::NOCTTY;
            let fd = open_beneath(dir, name, flags, Mode::from_raw_mode(given))
                .map_err(|e| path_err(e, true))?;
            self.note_added(dir, name);
            fd
        };
        let setup = || -> VfsResult<FileStat> {
            let attrs = if is_dir {
                (settable != 0).then_some(settable)
            } else {
                Some(settable | attr::ARCHIVE)
            };
            if let Some(attrs) = attrs {
                self.meta.set_attrs(fd.as_fd(), attrs)?;
            }
            // A hint: a file the room cannot be kept for is still made.
            if !is_dir && req.allocation_size > 0 {
                let _ = preallocate(fd.as_fd(), req.allocation_size);
            }
            // A new object holds only what was just written: nothing to
            // read back.
            let mut stx = statx_fd(fd.as_fd()).map_err(io_err)?;
            if !acl_inherited && settle_mode(dir, fd.as_fd(), &stx, wanted).map_err(io_err)? {
                stx = statx_fd(fd.as_fd()).map_err(io_err)?;
            }
            let stored = Stored {
                attrs,
                ..Stored::default()
            };
            Ok(self.change_times.apply(&stx, build_stat(&stx, stored)))
        };
        match setup() {
            Ok(stat) => Ok((self.handle(fd, is_dir, &stat, req.who), stat)),
            Err(e) => {
                // Leave no half-made object behind.
                let flags = if is_dir {
                    AtFlags::REMOVEDIR
                } else {
                    AtFlags::empty()
                };
                if unlinkat(dir, name, flags).is_ok() {
                    self.note_removed(dir, name);
                }
                Err(e)
            }
        }
    }

    /// Stat of one directory entry for a listing; None if it vanished.
    fn entry_stat(&self, dir: BorrowedFd<'_>, name: &str) -> VfsResult<Option<FileStat>> {
        let lstat = match lstat_at(dir, name) {
            Ok(s) => s,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(path_err(e, true)),
        };
        let ftype = file_type(&lstat);
        if ftype == FileType::Symlink {
            // Followed only while it stays beneath this directory (we do not
            // know the directory's place in the share from its descriptor).
            // A link that escapes, dangles or loops is listed as the link
            // itself rather than hidden: the name is taken, and a client that
            // cannot see it would be puzzled by a Create that collides.
            if let Ok(pfd) = open_beneath(dir, name, OFlags::PATH, Mode::empty()) {
                if let Ok(stx) = statx_fd(pfd.as_fd()) {
                    let stored = if self.meta.can_read_by_path() {
                        self.meta.read(&Target::PathFd(pfd.as_fd()), &stx)
                    } else {
                        self.stored_by_open(dir, name, OFlags::empty(), &stx)
                    };
                    return Ok(Some(
                        self.change_times.apply(&stx, build_stat(&stx, stored)),
                    ));
                }
            }
            return Ok(Some(build_stat(&lstat, Stored::default())));
        }
        let stored = if self.meta.can_read_by_path() {
            self.meta.read(&Target::Entry { dir, name }, &lstat)
        } else if matches!(ftype, FileType::RegularFile | FileType::Directory) {
            self.stored_by_open(dir, name, OFlags::NOFOLLOW, &lstat)
        } else {
            Stored::default()
        };
        Ok(Some(
            self.change_times.apply(&lstat, build_stat(&lstat, stored)),
        ))
    }

    /// Reads stored metadata by opening the entry (when /proc is missing).
    fn stored_by_open(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
        extra: OFlags,
        stx: &Statx,
    ) -> Stored {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | extra;
        match open_beneath(dir, name, flags, Mode::empty()) {
            Ok(fd) => self.meta.read(&Target::Fd(fd.as_fd()), stx),
            Err(_) => Stored::default(),
        }
    }
}

/// Opens the directory `path` beneath `base`.
fn open_dir_at(base: BorrowedFd<'_>, path: &str) -> Result<OwnedFd, Errno> {
    let path = if path.is_empty() { "." } else { path };
    match open_beneath(
        base,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    ) {
        // Search permission without read permission: enough to walk
        // through, though not to list.
        Err(Errno::ACCESS) => {
            open_beneath(base, path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
        }
        r => r,
    }
}

/// [`Vfs::may_delete`] of an entry owned by `owner` in the folder `dir`,
/// for `who`, the thread's identity.
fn may_unlink_from(who: &Identity, dir: BorrowedFd<'_>, owner: u32) -> VfsResult<()> {
    if *who == Identity::Server && rustix::process::geteuid().is_root() {
        return Ok(());
    }
    accessat(
        dir,
        ".",
        Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::EACCESS,
    )
    .map_err(|_| VfsError::AccessDenied)?;
    let uid = match who {
        Identity::Server => rustix::process::geteuid().as_raw(),
        Identity::Unix(ids) => ids.uid,
    };
    let dir_stat = statx_fd(dir).map_err(io_err)?;
    let sticky = u32::from(dir_stat.stx_mode) & 0o1000 != 0;
    if sticky && uid != 0 && uid != owner && uid != dir_stat.stx_uid {
        return Err(VfsError::AccessDenied);
    }
    Ok(())
}

/// Checks an object's type (None: not known yet) against what was asked.
fn check_kind(is_dir: Option<bool>, kind: Kind, truncate: bool) -> VfsResult<()> {
    match is_dir {
        // Windows cannot overwrite or supersede a directory.
        Some(true) if kind == Kind::NonDirectory || truncate => Err(VfsError::IsADirectory),
        Some(false) if kind == Kind::Directory => Err(VfsError::NotADirectory),
        _ => Ok(()),
    }
}

fn preallocate(fd: BorrowedFd<'_>, len: u64) -> VfsResult<()> {
    match fallocate(fd, FallocateFlags::KEEP_SIZE, 0, len) {
        // Preallocation is a hint; filesystems without it still work.
        Ok(()) | Err(Errno::OPNOTSUPP) => Ok(()),
        Err(e) => Err(io_err(e)),
    }
}

/// Every name in a directory except `.` and `..`. Names that are not UTF-8
/// cannot be named by a client and are left out.
fn scan_names(dir: BorrowedFd<'_>) -> VfsResult<Vec<String>> {
    let mut names = Vec::new();
    each_name_in(dir, &mut |name| names.push(name.to_owned()))?;
    Ok(names)
}

fn each_name_in(dir: BorrowedFd<'_>, f: &mut dyn FnMut(&str)) -> VfsResult<()> {
    for entry in Dir::read_from(dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        if let Some(name) = listed_name(entry.file_name().to_bytes()) {
            f(name);
        }
    }
    Ok(())
}

fn listed_name(raw: &[u8]) -> Option<&str> {
    if raw == b"." || raw == b".." {
        return None;
    }
    std::str::from_utf8(raw).ok()
}

fn build_stat(stx: &Statx, stored: Stored) -> FileStat {
    let is_dir = file_type(stx) == FileType::Directory;
    let last_write_time = filetime(&stx.stx_mtime);
    let change_time = filetime(&stx.stx_ctime);
    let creation_time = stored.btime.unwrap_or_else(|| {
        if has_btime(stx) {
            filetime(&stx.stx_btime)
        } else {
            last_write_time.min(change_time)
        }
    });
    let mut attributes = stored.attrs.unwrap_or(0) & attr::STORED;
    if stx.stx_attributes.contains(StatxAttributes::COMPRESSED) {
        attributes |= attr::COMPRESSED;
    }
    if is_dir {
        attributes |= attr::DIRECTORY;
    }
    if attributes == 0 {
        attributes = attr::NORMAL;
    }
    FileStat {
        dev: file_key(stx).0,
        ino: stx.stx_ino,
        size: stx.stx_size,
        alloc_size: stx.stx_blocks.saturating_mul(512),
        nlink: stx.stx_nlink,
        is_dir,
        creation_time,
        last_access_time: filetime(&stx.stx_atime),
        last_write_time,
        change_time,
        attributes,
        mode: u32::from(stx.stx_mode),
        uid: stx.stx_uid,
        gid: stx.stx_gid,
        ea_size: stored.ea_size.unwrap_or(0),
    }
}

/// A time a client asked to set: 0 means "leave it", and so do the
/// FILETIME values -1 and -2 (which ask to stop or resume automatic
/// updates, something Linux cannot do).
fn time_to_set(t: Option<u64>) -> Option<u64> {
    t.filter(|&v| v != 0 && v < u64::MAX - 1)
}

fn timespec(t: Option<u64>) -> Timespec {
    match t {
        Some(ft) => {
            let (sec, nsec) = unix_from_filetime(ft);
            Timespec {
                tv_sec: sec,
                tv_nsec: nsec.into(),
            }
        }
        None => Timespec {
            tv_sec: 0,
            tv_nsec: UTIME_OMIT,
        },
    }
}

/// The descriptor of a handle this backend opened. A handle of another
/// backend is refused as a descriptor that is not open would be.
/// The handle's descriptor, this thread acting as whoever opened it.
/// The process's /proc/self/fd, opened once; None where /proc is not
/// mounted (or is not procfs).
fn proc_self_fd() -> Option<BorrowedFd<'static>> {
    static FDS: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    FDS.get_or_init(|| {
        let fd = rustix::fs::open(
            "/proc/self/fd",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let fs = rustix::fs::fstatfs(&fd).ok()?;
        (fs.f_type == PROC_SUPER_MAGIC).then_some(fd)
    })
    .as_ref()
    .map(|fd| fd.as_fd())
}

/// statfs's f_type of procfs.
const PROC_SUPER_MAGIC: rustix::fs::FsWord = 0x9fa0;

fn fd_of(h: &FileHandle) -> VfsResult<BorrowedFd<'_>> {
    let fd = h.fd().ok_or_else(|| VfsError::Io(Errno::BADF.into()))?;
    creds::act_as(h.who())?;
    Ok(fd)
}

/// Makes this thread act as the server itself, for the server's own file
/// work beside a share's [`Vfs`]: watching a share's directories for
/// local changes, which must cover what any user may list, whoever's
/// request set the watch up.
pub fn act_as_server() -> VfsResult<()> {
    creds::act_as(&Identity::Server)
}

/// Maps the error of a read, write or sync an engine made itself on a
/// handle's [`Vfs::data_fd`], as the backend maps its own.
pub fn data_error(e: std::io::Error) -> VfsError {
    match e.raw_os_error() {
        Some(code) => io_err(Errno::from_raw_os_error(code)),
        None => VfsError::Io(e),
    }
}

impl Vfs for PosixVfs {
    fn open(&self, req: &OpenRequest<'_>) -> VfsResult<Opened> {
        creds::act_as(req.who)?;
        let comps = split(req.path)?;
        let Some((last, parents)) = comps.split_last() else {
            return self.open_root(req);
        };
        let (dir, dir_real) = self.resolve_dir(parents)?;
        // Two rounds: a name may appear or vanish between our look and our
        // open or create.
        for _ in 0..2 {
            let (child, dir_key) = self.look_up(dir.fd(), last)?;
            match child {
                Some(child) => {
                    let action = match req.disposition {
                        Disposition::Create => return Err(VfsError::Collision),
                        Disposition::Open | Disposition::OpenIf => CreateAction::Opened,
                        Disposition::Overwrite | Disposition::OverwriteIf => {
                            CreateAction::Overwritten
                        }
                        Disposition::Supersede => CreateAction::Superseded,
                    };
                    let path = join(&dir_real, &child.name);
                    let may_create = matches!(
                        req.disposition,
                        Disposition::OpenIf | Disposition::OverwriteIf | Disposition::Supersede
                    );
                    let is_link = file_type(&child.lstat) == FileType::Symlink;
                    match self.open_existing(&path, &child, req, action) {
                        Ok((handle, stat)) => {
                            // A link is unlinked as itself.
                            let owner = child.lstat.stx_uid;
                            return Ok(Opened {
                                handle,
                                action,
                                stat,
                                path,
                                may_unlink: self.may_unlink(req, dir.fd(), owner),
                            });
                        }
                        Err(VfsError::NameNotFound) if may_create && !is_link => continue,
                        Err(e) => return Err(e),
                    }
                }
                None => {
                    if matches!(req.disposition, Disposition::Open | Disposition::Overwrite) {
                        return Err(VfsError::NameNotFound);
                    }
                    let tunneled = self.tunneled(dir.fd(), last);
                    let last = tunneled.as_deref().unwrap_or(last);
                    match self.create_new((dir.fd(), dir_key), last, req) {
                        Ok((handle, stat)) => {
                            // Its creator is granted what it asked for.
                            return Ok(Opened {
                                handle,
                                action: CreateAction::Created,
                                stat,
                                path: join(&dir_real, last),
                                may_unlink: None,
                            });
                        }
                        Err(VfsError::Collision) if req.disposition != Disposition::Create => {
                            continue
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        // The name kept changing under us.
        Err(VfsError::Io(Errno::AGAIN.into()))
    }

    fn resolve(&self, who: &Identity, path: &str) -> VfsResult<String> {
        creds::act_as(who)?;
        let comps = split(path)?;
        let Some((last, parents)) = comps.split_last() else {
            return Ok(String::new());
        };
        let (dir, dir_real) = self.resolve_dir(parents)?;
        let child = self
            .find_child(dir.fd(), last)?
            .ok_or(VfsError::NameNotFound)?;
        Ok(join(&dir_real, &child.name))
    }

    fn stat(&self, h: &FileHandle) -> VfsResult<FileStat> {
        let fd = fd_of(h)?;
        let mut st = self.stat_fd(fd)?;
        if let Some(name) = &h.stream {
            let len = streams::get(fd, name)?.len() as u64;
            st.size = len;
            st.alloc_size = len.div_ceil(4096) * 4096;
            st.is_dir = false;
            st.attributes &= !attr::DIRECTORY;
            if st.attributes == 0 {
                st.attributes = attr::NORMAL;
            }
        }
        Ok(st)
    }

    fn data_fd<'h>(&self, h: &'h FileHandle) -> Option<BorrowedFd<'h>> {
        if h.stream.is_some() || !h.is_direct() {
            return None;
        }
        h.fd()
    }

    fn data_in_memory(&self) -> bool {
        self.data_in_memory
    }

    fn read(&self, h: &FileHandle, offset: u64, buf: &mut [u8]) -> VfsResult<usize> {
        let fd = fd_of(h)?;
        if let Some(name) = &h.stream {
            let data = streams::get(fd, name)?;
            let start = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(data.len());
            let n = buf.len().min(data.len() - start);
            buf[..n].copy_from_slice(&data[start..start + n]);
            return Ok(n);
        }
        extents::read_at(fd, offset, buf)
    }

    fn write(&self, h: &FileHandle, offset: u64, data: &[u8]) -> VfsResult<()> {
        let fd = fd_of(h)?;
        if let Some(name) = &h.stream {
            let end = offset
                .checked_add(data.len() as u64)
                .filter(|&e| e <= streams::MAX_LEN as u64)
                .ok_or(VfsError::DiskFull)? as usize;
            let _guard = self.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut value = streams::get(fd, name)?;
            if value.len() < end {
                value.resize(end, 0);
            }
            value[offset as usize..end].copy_from_slice(data);
            return streams::put(fd, name, &value);
        }
        extents::write_at(fd, offset, data)
    }

    fn flush(&self, h: &FileHandle) -> VfsResult<()> {
        let fd = fd_of(h)?;
        let r = if h.is_dir { fsync(fd) } else { fdatasync(fd) };
        r.map_err(io_err)
    }

    fn set_len(&self, h: &FileHandle, len: u64) -> VfsResult<()> {
        let fd = fd_of(h)?;
        if let Some(name) = &h.stream {
            if len > streams::MAX_LEN as u64 {
                return Err(VfsError::DiskFull);
            }
            let _guard = self.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut value = streams::get(fd, name)?;
            value.resize(len as usize, 0);
            return streams::put(fd, name, &value);
        }
        ftruncate(fd, len).map_err(io_err)
    }

    fn set_allocation(&self, h: &FileHandle, len: u64) -> VfsResult<()> {
        let fd = fd_of(h)?;
        if h.stream.is_some() {
            return Ok(());
        }
        let stx = statx_fd(fd).map_err(io_err)?;
        if len > stx.stx_blocks.saturating_mul(512) {
            preallocate(fd, len)?;
        }
        Ok(())
    }

    fn set_times(&self, h: &FileHandle, times: &SetTimes) -> VfsResult<()> {
        let fd = fd_of(h)?;
        // A change time set before stays, unless this sets another.
        let change_time = match time_to_set(times.change_time) {
            Some(ct) => Some(ct),
            None => self.change_times.pinned(fd)?,
        };
        if let Some(ct) = time_to_set(times.creation_time) {
            self.meta.set_btime(fd, ct)?;
        }
        let atime = time_to_set(times.last_access_time);
        let mtime = time_to_set(times.last_write_time);
        if atime.is_some() || mtime.is_some() {
            let ts = Timestamps {
                last_access: timespec(atime),
                last_modification: timespec(mtime),
            };
            futimens(fd, &ts).map_err(io_err)?;
        }
        // Last, so the ctime it is pinned to includes the changes above.
        if let Some(ct) = change_time {
            let stx = statx_fd(fd).map_err(io_err)?;
            self.change_times.set(&stx, ct);
        }
        Ok(())
    }

    fn set_attributes(&self, h: &FileHandle, attributes: u32) -> VfsResult<()> {
        let fd = fd_of(h)?;
        let sparse = self.stat_fd(fd)?.attributes & attr::SPARSE_FILE;
        self.change_times.keeping(fd, || {
            self.meta
                .set_attrs(fd, (attributes & attr::SETTABLE) | sparse)
        })
    }

    fn set_sparse(&self, h: &FileHandle, sparse: bool) -> VfsResult<()> {
        let fd = fd_of(h)?;
        let st = self.stat_fd(fd)?;
        let stored = st.attributes & attr::STORED;
        let wanted = if sparse {
            stored | attr::SPARSE_FILE
        } else {
            stored & !attr::SPARSE_FILE
        };
        if wanted == stored {
            return Ok(());
        }
        if !sparse {
            extents::allocate(fd, 0, st.size)?;
        }
        self.change_times
            .keeping(fd, || self.meta.set_attrs(fd, wanted))
    }

    fn zero_range(&self, h: &FileHandle, offset: u64, len: u64, deallocate: bool) -> VfsResult<()> {
        let fd = fd_of(h)?;
        if let Some(name) = &h.stream {
            let _guard = self.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
            let mut value = streams::get(fd, name)?;
            let end = value.len().min(offset.saturating_add(len) as usize);
            if let Some(zeroed) = value.get_mut(offset as usize..end) {
                zeroed.fill(0);
                return streams::put(fd, name, &value);
            }
            return Ok(());
        }
        extents::zero(fd, offset, len, deallocate)
    }

    fn allocated_ranges(
        &self,
        h: &FileHandle,
        offset: u64,
        end: u64,
        limit: usize,
    ) -> VfsResult<Vec<std::ops::Range<u64>>> {
        let fd = fd_of(h)?;
        if let Some(name) = &h.stream {
            let len = streams::get(fd, name)?.len() as u64;
            let end = end.min(len);
            return Ok((offset < end && limit > 0)
                .then_some(offset..end)
                .into_iter()
                .collect());
        }
        extents::data_ranges(fd, offset, end, limit)
    }

    fn set_compression(&self, h: &FileHandle, on: bool) -> VfsResult<()> {
        if !self.compresses {
            return Err(VfsError::NotSupported);
        }
        let fd = fd_of(h)?;
        let flags = rustix::fs::ioctl_getflags(fd).map_err(io_err)?;
        let wanted = if on {
            flags | rustix::fs::IFlags::COMPRESSED
        } else {
            flags - rustix::fs::IFlags::COMPRESSED
        };
        if wanted == flags {
            return Ok(());
        }
        rustix::fs::ioctl_setflags(fd, wanted).map_err(io_err)
    }

    fn copy_range(
        &self,
        src: &FileHandle,
        src_offset: u64,
        dst: &FileHandle,
        dst_offset: u64,
        len: u64,
    ) -> VfsResult<u64> {
        // A stream's data is an extended attribute: only reads and
        // writes reach it.
        if src.stream.is_some() || dst.stream.is_some() {
            return Err(VfsError::NotSupported);
        }
        let from = src.fd().ok_or(VfsError::NotSupported)?;
        let to = fd_of(dst)?;
        extents::copy(from, src_offset, to, dst_offset, len)
    }

    fn list_names(&self, h: &FileHandle) -> VfsResult<Vec<String>> {
        let fd = fd_of(h)?;
        // Stamp before listing: a change during the listing then shows as a
        // stale cache entry instead of being missed.
        let generation = self.cache.generation();
        let dstx = statx_fd(fd).map_err(io_err)?;
        if file_type(&dstx) != FileType::Directory {
            return Err(VfsError::NotADirectory);
        }
        let mut names = scan_names(fd)?;
        names.sort_unstable();
        self.cache
            .fill(file_key(&dstx), stamp(&dstx), generation, names.clone());
        Ok(names)
    }

    fn each_name(&self, h: &FileHandle, f: &mut dyn FnMut(&str)) -> VfsResult<()> {
        let fd = fd_of(h)?;
        if file_type(&statx_fd(fd).map_err(io_err)?) != FileType::Directory {
            return Err(VfsError::NotADirectory);
        }
        each_name_in(fd, f)
    }

    fn entry(&self, dir: &FileHandle, name: &str) -> VfsResult<Option<FileStat>> {
        self.entry_stat(fd_of(dir)?, name)
    }

    fn is_empty_dir(&self, h: &FileHandle) -> VfsResult<bool> {
        for entry in Dir::read_from(fd_of(h)?).map_err(io_err)? {
            let entry = entry.map_err(io_err)?;
            if listed_name(entry.file_name().to_bytes()).is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn rename(&self, who: &Identity, from: &str, to: &str, replace: bool) -> VfsResult<String> {
        creds::act_as(who)?;
        let from_comps = split(from)?;
        let to_comps = split(to)?;
        let (Some((from_name, from_parents)), Some((to_name, to_parents))) =
            (from_comps.split_last(), to_comps.split_last())
        else {
            // The root can be neither moved nor replaced.
            return Err(VfsError::AccessDenied);
        };
        let (from_dir, from_real) = self.resolve_dir(from_parents)?;
        let src = self
            .find_child(from_dir.fd(), from_name)?
            .ok_or(VfsError::NameNotFound)?;
        // Most renames stay in their folder: reached and looked at once.
        let other_dir = if to_parents == from_parents {
            None
        } else {
            Some(self.resolve_dir(to_parents)?)
        };
        let fd_from = from_dir.fd();
        let (fd_to, to_real) = match &other_dir {
            None => (fd_from, from_real),
            Some((dir, real)) => (dir.fd(), real.clone()),
        };
        let from_key = file_key(&statx_fd(fd_from).map_err(io_err)?);
        let to_key = match other_dir {
            None => from_key,
            Some(_) => file_key(&statx_fd(fd_to).map_err(io_err)?),
        };
        let same_dir = from_key == to_key;
        let _changing = self.cache.changing(&[from_key, to_key]);

        let new_name: &str = match self.find_child(fd_to, to_name)? {
            Some(t)
                if same_dir
                    && file_key(&t.lstat) == file_key(&src.lstat)
                    && fold(&t.name) == fold(&src.name) =>
            {
                // The target is the source itself: only the case changes.
                // A plain rename, as RENAME_NOREPLACE would refuse this on a
                // case-insensitive filesystem.
                if src.name != *to_name {
                    renameat(fd_from, &src.name, fd_to, *to_name).map_err(|e| path_err(e, true))?;
                    self.note_moved((fd_from, &src.name), (fd_to, to_name), same_dir);
                }
                to_name
            }
            Some(t) => {
                if !replace {
                    return Err(VfsError::Collision);
                }
                if file_type(&t.lstat) == FileType::Directory {
                    return Err(VfsError::AccessDenied);
                }
                renameat(fd_from, &src.name, fd_to, &t.name).map_err(|e| path_err(e, true))?;
                self.note_gone(&t.lstat);
                self.note_moved((fd_from, &src.name), (fd_to, &t.name), same_dir);
                // Give the new object the case the client asked for; if
                // that fails it keeps the replaced one's name, still correct
                // case-insensitively.
                if t.name != *to_name
                    && renameat_with(fd_to, &t.name, fd_to, *to_name, RenameFlags::NOREPLACE)
                        .is_ok()
                {
                    self.note_moved((fd_to, &t.name), (fd_to, to_name), true);
                    to_name
                } else {
                    return Ok(join(&to_real, &t.name));
                }
            }
            None => {
                rename_noreplace(fd_from, &src.name, fd_to, to_name)?;
                self.note_moved((fd_from, &src.name), (fd_to, to_name), same_dir);
                to_name
            }
        };
        Ok(join(&to_real, new_name))
    }

    fn may_read_entry(&self, dir: &FileHandle, name: &str) -> VfsResult<bool> {
        let fd = fd_of(dir)?;
        match accessat(fd, name, Access::READ_OK, AtFlags::EACCESS) {
            Ok(()) => Ok(true),
            Err(Errno::ACCESS | Errno::PERM | Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    fn unix_access(&self, h: &FileHandle) -> VfsResult<UnixAccess> {
        let fd = fd_of(h)?;
        let Some(fds) = proc_self_fd() else {
            // Without /proc the mode bits answer, as the kernel would for
            // a file without POSIX ACLs.
            let st = statx_fd(fd).map_err(io_err)?;
            let own;
            let who = match h.who() {
                Identity::Server => {
                    own = creds::own_identity();
                    &own
                }
                who => who,
            };
            return Ok(UnixAccess::from_mode(
                u32::from(st.stx_mode),
                st.stx_uid,
                st.stx_gid,
                who,
            ));
        };
        // /proc/self/fd/N leads to the open object itself, whatever its
        // name is now; faccessat2 with AT_EACCESS checks it as this
        // thread's identity.
        let name = fd.as_raw_fd().to_string();
        let may = |access| match accessat(fds, name.as_str(), access, AtFlags::EACCESS) {
            Ok(()) => Ok(true),
            Err(Errno::ACCESS | Errno::PERM | Errno::ROFS) => Ok(false),
            Err(e) => Err(io_err(e)),
        };
        Ok(UnixAccess {
            read: may(Access::READ_OK)?,
            write: may(Access::WRITE_OK)?,
            execute: may(Access::EXEC_OK)?,
        })
    }

    fn may_list_beneath(&self, dir: &FileHandle, path: &str) -> VfsResult<bool> {
        let fd = fd_of(dir)?;
        // The walk itself needs search permission on `dir` and on every
        // directory on the way, as the opener; O_PATH asks nothing more of
        // the last one, whose read and search permission is asked next.
        let path = if path.is_empty() { "." } else { path };
        let sub = match open_beneath(fd, path, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()) {
            Ok(sub) => sub,
            Err(
                Errno::ACCESS
                | Errno::PERM
                | Errno::NOENT
                | Errno::NOTDIR
                | Errno::LOOP
                | Errno::XDEV,
            ) => return Ok(false),
            Err(e) => return Err(io_err(e)),
        };
        match accessat(
            sub.as_fd(),
            ".",
            Access::READ_OK | Access::EXEC_OK,
            AtFlags::EACCESS,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::ACCESS | Errno::PERM | Errno::NOENT) => Ok(false),
            Err(e) => Err(io_err(e)),
        }
    }

    fn may_delete(&self, who: &Identity, path: &str) -> VfsResult<()> {
        let comps = split(path)?;
        let Some((last, parents)) = comps.split_last() else {
            // The share's root is never deleted.
            return Err(VfsError::AccessDenied);
        };
        if *who == Identity::Server && rustix::process::geteuid().is_root() {
            return Ok(());
        }
        creds::act_as(who)?;
        let (dir, _) = self.resolve_dir(parents)?;
        let child = self
            .find_child(dir.fd(), last)?
            .ok_or(VfsError::NameNotFound)?;
        may_unlink_from(who, dir.fd(), child.lstat.stx_uid)
    }

    fn unlink(&self, who: &Identity, path: &str, is_dir: bool) -> VfsResult<()> {
        creds::act_as(who)?;
        let comps = split(path)?;
        let Some((last, parents)) = comps.split_last() else {
            return Err(VfsError::AccessDenied);
        };
        let (dir, _) = self.resolve_dir(parents)?;
        let child = self
            .find_child(dir.fd(), last)?
            .ok_or(VfsError::NameNotFound)?;
        let ftype = file_type(&child.lstat);
        // A symlink opened as a directory is removed as the link it is.
        if ftype == FileType::Directory && !is_dir {
            return Err(VfsError::IsADirectory);
        }
        if is_dir && !matches!(ftype, FileType::Directory | FileType::Symlink) {
            return Err(VfsError::NotADirectory);
        }
        let flags = if ftype == FileType::Directory {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        let _changing = self.changing(&[dir.fd()]);
        unlinkat(dir.fd(), child.name.as_str(), flags).map_err(|e| match e {
            Errno::NOTEMPTY | Errno::EXIST => VfsError::NotEmpty,
            e => path_err(e, true),
        })?;
        self.note_removed(dir.fd(), &child.name);
        self.note_gone(&child.lstat);
        Ok(())
    }

    fn security(&self, h: &FileHandle) -> VfsResult<Option<Vec<u8>>> {
        let fd = h.fd().ok_or_else(|| VfsError::Io(Errno::BADF.into()))?;
        if !self.acls.in_use() {
            // Nothing to read: no reason to change identity (three
            // system calls there and three back).
            return Ok(None);
        }
        // A descriptor decides who may use its object, so the server reads
        // it as itself: a caller who may not read the object's data may
        // still be granted what the descriptor (or the folder's) gives.
        creds::act_as(&Identity::Server)?;
        self.acls.get(fd)
    }

    fn set_security(&self, h: &FileHandle, sd: &[u8]) -> VfsResult<()> {
        if !self.acls.in_use() {
            // The share's marker is the server's, whoever stores the first
            // descriptor.
            creds::act_as(&Identity::Server)?;
            self.acls.mark_in_use(self.root.as_fd())?;
        }
        self.acls.set(fd_of(h)?, sd)
    }

    fn descriptors_stored(&self) -> bool {
        self.acls.in_use()
    }

    fn eas(&self, h: &FileHandle) -> VfsResult<Vec<Ea>> {
        self.eas.get(fd_of(h)?)
    }

    fn set_eas(&self, h: &FileHandle, changes: &[Ea]) -> VfsResult<()> {
        if !self.eas.in_use() {
            // The share's marker is the server's, whoever stores the
            // first EA.
            creds::act_as(&Identity::Server)?;
            self.eas.mark_in_use(self.root.as_fd())?;
            self.meta.read_ea_sizes();
        }
        let fd = fd_of(h)?;
        self.change_times.keeping(fd, || self.eas.set(fd, changes))
    }

    fn eas_stored(&self) -> bool {
        self.eas.in_use()
    }

    fn found_without_waiting(&self, path: &str) -> bool {
        // Only on the filesystems an engine may do data I/O on itself,
        // whose stat of an open object is in memory; only for a path every
        // name of which the kernel finds in its cache without leaving the
        // share's mount (a case-insensitive match is not looked for); and
        // only for an object whose stored attributes are remembered or
        // just changed, so that opening it reads no xattr from the disk.
        // The descriptor is only a probe.
        if self.direct_dev.is_none() {
            return false;
        }
        let probe = if path.is_empty() {
            None
        } else {
            match sys::open_cached(self.root.as_fd(), path) {
                Ok(fd) => Some(fd),
                Err(_) => return false,
            }
        };
        // Where data lives in memory (tmpfs), so do the attributes.
        if self.data_in_memory {
            return true;
        }
        let fd = probe.as_ref().map_or(self.root.as_fd(), |fd| fd.as_fd());
        statx_fd(fd).is_ok_and(|stx| self.meta.in_memory(&stx))
    }

    fn dir_security(&self, who: &Identity, path: &str) -> VfsResult<Option<(Vec<u8>, u32)>> {
        if !self.acls.in_use() {
            return Ok(None);
        }
        creds::act_as(who)?;
        let fd = self.open_dir(path).map_err(|e| path_err(e, true))?;
        // Reached as `who`, read as the server (see `security`).
        creds::act_as(&Identity::Server)?;
        let Some(sd) = self.acls.get(fd.as_fd())? else {
            return Ok(None);
        };
        let owner = statx_fd(fd.as_fd()).map_err(io_err)?.stx_uid;
        Ok(Some((sd, owner)))
    }

    fn open_stream(
        &self,
        base: &FileHandle,
        name: &str,
        disposition: Disposition,
    ) -> VfsResult<(FileHandle, CreateAction)> {
        let fd = fd_of(base)?;
        let _guard = self.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
        let (real, action) = match (streams::find(fd, name)?, disposition) {
            (Some(_), Disposition::Create) => return Err(VfsError::Collision),
            (Some(real), Disposition::Open | Disposition::OpenIf) => (real, CreateAction::Opened),
            (Some(real), Disposition::Overwrite | Disposition::OverwriteIf) => {
                streams::put(fd, &real, &[])?;
                (real, CreateAction::Overwritten)
            }
            (Some(real), Disposition::Supersede) => {
                streams::put(fd, &real, &[])?;
                (real, CreateAction::Superseded)
            }
            (None, Disposition::Open | Disposition::Overwrite) => {
                return Err(VfsError::NameNotFound)
            }
            (None, _) => {
                streams::create(fd, name)?;
                (name.to_owned(), CreateAction::Created)
            }
        };
        let fd = rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(io_err)?;
        Ok((
            FileHandle::from_fd(fd, false, Some(real.into())).acting_as(base.who()),
            action,
        ))
    }

    fn streams(&self, h: &FileHandle) -> VfsResult<Vec<(String, u64)>> {
        streams::list(fd_of(h)?)
    }

    fn delete_stream(&self, h: &FileHandle) -> VfsResult<()> {
        match &h.stream {
            Some(name) => streams::remove(fd_of(h)?, name),
            None => Err(VfsError::IsADirectory),
        }
    }

    fn rename_stream(&self, h: &FileHandle, to: &str, replace: bool) -> VfsResult<String> {
        let from = h.stream.as_deref().ok_or(VfsError::IsADirectory)?;
        let fd = fd_of(h)?;
        let _guard = self.stream_lock.lock().unwrap_or_else(|e| e.into_inner());
        match streams::find(fd, to)? {
            Some(target) if target == from => {}
            Some(_) if !replace => return Err(VfsError::Collision),
            Some(target) => {
                if streams::len(fd, &target)? != 0 {
                    return Err(VfsError::NotEmpty);
                }
                if target != to {
                    streams::remove(fd, &target)?;
                }
            }
            None => {}
        }
        if to != from {
            // The new name holds the data before the old one lets go.
            let data = streams::get(fd, from)?;
            streams::put(fd, to, &data)?;
            streams::remove(fd, from)?;
        }
        Ok(to.to_owned())
    }

    fn root_state(&self) -> RootState {
        // As the server: the share's path may lie where its users cannot
        // look.
        if creds::act_as(&Identity::Server).is_err() {
            return RootState::Current;
        }
        // What the kernel knows is enough: a network filesystem is not
        // asked again every second.
        let found = rustix::fs::statx(
            rustix::fs::CWD,
            &self.source,
            AtFlags::STATX_DONT_SYNC,
            StatxFlags::TYPE | StatxFlags::INO,
        );
        match found {
            Ok(stx) if file_type(&stx) != FileType::Directory => RootState::Gone,
            Ok(stx) if file_key(&stx) == self.root_key => RootState::Current,
            Ok(stx) if file_key(&stx).0 == self.root_key.0 => RootState::Replaced,
            Ok(_) => RootState::Elsewhere,
            Err(Errno::NOENT | Errno::NOTDIR) => RootState::Gone,
            // Anything else (a path it may not look at, a dying mount)
            // says nothing for sure: the share is left as it is.
            Err(_) => RootState::Current,
        }
    }

    fn make_dir_for(&self, owner: &Identity, path: &str, mode: u32) -> VfsResult<()> {
        let comps = split(path)?;
        let Some((name, parents)) = comps.split_last() else {
            return Ok(());
        };
        creds::act_as(&Identity::Server)?;
        let dir = self
            .open_dir(&parents.join("/"))
            .map_err(|e| path_err(e, false))?;
        match mkdirat(&dir, *name, Mode::from_raw_mode(0o700)) {
            Ok(()) => self.note_added(dir.as_fd(), name),
            Err(Errno::EXIST) => return Ok(()),
            Err(e) => return Err(path_err(e, true)),
        }
        let made = open_beneath(
            dir.as_fd(),
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .map_err(|e| path_err(e, true))?;
        if let Identity::Unix(ids) = owner {
            rustix::fs::fchown(
                &made,
                Some(rustix::fs::Uid::from_raw(ids.uid)),
                Some(rustix::fs::Gid::from_raw(ids.gid)),
            )
            .map_err(io_err)?;
        }
        rustix::fs::fchmod(&made, Mode::from_raw_mode(mode & 0o7777)).map_err(io_err)
    }

    fn fs_stat(&self) -> VfsResult<FsStat> {
        let st = fstatvfs(&self.root).map_err(io_err)?;
        let block = if st.f_frsize != 0 {
            st.f_frsize
        } else {
            st.f_bsize
        };
        Ok(FsStat {
            block_size: u32::try_from(block).unwrap_or(u32::MAX),
            total_blocks: st.f_blocks,
            free_blocks: st.f_bfree,
            avail_blocks: st.f_bavail,
            fs_id: st.f_fsid,
            max_name_len: u32::try_from(st.f_namemax).unwrap_or(u32::MAX),
            clones: self.clones,
            compresses: self.compresses,
            // Asking how quotas are kept takes no privilege.
            quotas: match &self.quotas {
                Some(q) => q.state(self.root.as_fd()).unwrap_or_default(),
                None => QuotaState::default(),
            },
        })
    }

    fn quota(&self, who: &Identity, uid: u32) -> VfsResult<Quota> {
        self.quotas_as(who)?
            .get(self.root.as_fd(), uid)
            .map_err(quota_error)
    }

    fn next_quota(&self, who: &Identity, from: u32) -> VfsResult<Option<(u32, Quota)>> {
        self.quotas_as(who)?
            .next(self.root.as_fd(), from)
            .map_err(quota_error)
    }

    fn set_quota(&self, who: &Identity, uid: u32, soft: u64, hard: u64) -> VfsResult<()> {
        self.quotas_as(who)?
            .set(self.root.as_fd(), uid, soft, hard)
            .map_err(quota_error)
    }
}

/// A quota call's error: where the filesystem keeps no quotas (ENOSYS,
/// or ESRCH when they are off), NotSupported.
fn quota_error(e: std::io::Error) -> VfsError {
    match e.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::NOSYS | Errno::SRCH | Errno::NOTSUP | Errno::INVAL) => VfsError::NotSupported,
        _ => data_error(e),
    }
}

/// Renames without replacing anything. Falls back to a checked plain rename
/// on filesystems that do not know RENAME_NOREPLACE.
fn rename_noreplace(
    from_dir: BorrowedFd<'_>,
    from: &str,
    to_dir: BorrowedFd<'_>,
    to: &str,
) -> VfsResult<()> {
    match renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(Errno::INVAL) => match lstat_at(to_dir, to) {
            Ok(_) => Err(VfsError::Collision),
            Err(Errno::NOENT) => {
                renameat(from_dir, from, to_dir, to).map_err(|e| path_err(e, true))
            }
            Err(e) => Err(path_err(e, true)),
        },
        Err(e) => Err(path_err(e, true)),
    }
}

#[cfg(test)]
mod tests;

/// How an engine may reach the data of files of the filesystem holding a
/// share's root.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum DataKind {
    /// Itself, asynchronously (io_uring): local filesystems whose reads
    /// wait on nothing but their disk.
    Disk,
    /// Itself, the data being in memory (tmpfs): reading and writing it
    /// waits for nothing but the copy, so an engine may do it at once.
    Memory,
    /// Only through the VFS, on a thread that may block: on FUSE, io_uring
    /// was seen to wait for the daemon's answer inside the submission,
    /// stopping every connection of its ring; network filesystems may hang
    /// for as long as their server does. A file on another filesystem
    /// mounted inside the share is not on the root's device, and takes
    /// this way too.
    Indirect,
}

const EXT4: i64 = 0xEF53;
const XFS: i64 = 0x5846_5342;
const BTRFS: i64 = 0x9123_683E;
const TMPFS: i64 = 0x0102_1994;

fn data_kind(root: BorrowedFd<'_>) -> std::io::Result<DataKind> {
    let fs = rustix::fs::fstatfs(root)?;
    Ok(match fs.f_type as i64 {
        EXT4 | XFS | BTRFS => DataKind::Disk,
        TMPFS => DataKind::Memory,
        _ => DataKind::Indirect,
    })
}

/// Whether the filesystem of the share's root shares blocks between
/// files when data is copied inside it: btrfs always, XFS as made since
/// xfsprogs 5.1 (reflink on by default); `copy_file_range` then clones
/// (the kernel tries the filesystem's remap first, as FICLONERANGE does).
fn clones(root: BorrowedFd<'_>) -> std::io::Result<bool> {
    let fs = rustix::fs::fstatfs(root)?;
    Ok(matches!(fs.f_type as i64, XFS | BTRFS))
}
