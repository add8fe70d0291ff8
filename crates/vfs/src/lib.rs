//! The filesystem behind a share.
//!
//! The protocol core sees a share only through [`Vfs`]. Paths given to it are
//! relative to the share root, use `/` as separator, have no leading slash,
//! and the empty string names the root itself. Every implementation must keep
//! every lookup beneath the root (no `..`, no absolute symlink escapes).
//!
//! Names are matched case-insensitively (as Windows clients expect) but
//! stored with the case the client gave when created.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

pub mod eas;
mod identity;
pub mod memory;
mod names;
mod new_modes;
pub mod posix;
pub mod quota;
pub mod shortname;
pub mod snapshots;

pub use eas::Ea;
pub use identity::{Identity, UnixIds};
pub use names::join;
pub use new_modes::NewModes;
pub use quota::{KernelQuotas, Quota, QuotaState};

/// FILE_ATTRIBUTE_* bits (MS-FSCC 2.6) the VFS stores and reports.
pub mod attr {
    pub const READONLY: u32 = 0x0001;
    pub const HIDDEN: u32 = 0x0002;
    pub const SYSTEM: u32 = 0x0004;
    pub const DIRECTORY: u32 = 0x0010;
    pub const ARCHIVE: u32 = 0x0020;
    pub const NORMAL: u32 = 0x0080;
    pub const TEMPORARY: u32 = 0x0100;
    pub const REPARSE_POINT: u32 = 0x0400;
    pub const OFFLINE: u32 = 0x1000;
    pub const NOT_CONTENT_INDEXED: u32 = 0x2000;
    /// The bits a client may set and that survive a restart: MS-FSA's
    /// ValidSetAttributes (2.1.5.15.2); the others describe how data is
    /// stored, which is the filesystem's to say.
    pub const SETTABLE: u32 =
        READONLY | HIDDEN | SYSTEM | ARCHIVE | TEMPORARY | OFFLINE | NOT_CONTENT_INDEXED;
    /// Kept with the settable bits, but set and cleared only by
    /// [`crate::Vfs::set_sparse`] (FSCTL_SET_SPARSE).
    pub const SPARSE_FILE: u32 = 0x0200;
    /// The bits a backend stores.
    pub const STORED: u32 = SETTABLE | SPARSE_FILE;
    /// The filesystem compresses the object's data (reported from the
    /// filesystem, set by [`crate::Vfs::set_compression`]).
    pub const COMPRESSED: u32 = 0x0800;
}

#[derive(Debug)]
pub enum VfsError {
    /// The last component does not exist.
    NameNotFound,
    /// A directory on the way does not exist (or is not a directory).
    PathNotFound,
    /// Create asked for a name that exists.
    Collision,
    /// The object is a file but a directory was required.
    NotADirectory,
    /// The object is a directory but a non-directory was required.
    IsADirectory,
    /// A directory to remove is not empty.
    NotEmpty,
    /// Permission denied, or a path that would leave the share.
    AccessDenied,
    /// A name the filesystem cannot hold (bad characters, too long).
    InvalidName,
    /// No space left on the device.
    DiskFull,
    /// The filesystem cannot keep what was asked (e.g. no xattrs).
    NotSupported,
    /// The engine stopped the operation because the client cancelled it.
    Cancelled,
    /// Anything else, with the OS error.
    Io(std::io::Error),
}

impl fmt::Display for VfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for VfsError {}

pub type VfsResult<T> = Result<T, VfsError>;

/// Times are Windows FILETIME: 100 ns units since 1601-01-01 UTC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileStat {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub alloc_size: u64,
    pub nlink: u32,
    pub is_dir: bool,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    /// FILE_ATTRIBUTE_* as Windows would report them: the stored DOS bits,
    /// plus DIRECTORY for directories, or NORMAL when nothing else is set.
    pub attributes: u32,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// The size of its extended attributes as Windows lists them
    /// ([`eas::encode`]); 0 without any.
    pub ea_size: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Replace if it exists, else create.
    Supersede,
    /// Open if it exists, else fail.
    Open,
    /// Create, fail if it exists.
    Create,
    /// Open if it exists, else create.
    OpenIf,
    /// Truncate if it exists, else fail.
    Overwrite,
    /// Truncate if it exists, else create.
    OverwriteIf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// FILE_DIRECTORY_FILE: must be (or be created as) a directory.
    Directory,
    /// FILE_NON_DIRECTORY_FILE: must not be a directory.
    NonDirectory,
    /// Either; a new object is created as a file.
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateAction {
    Superseded,
    Opened,
    Created,
    Overwritten,
}

#[derive(Debug, Clone)]
pub struct OpenRequest<'a> {
    /// Who opens: the kernel checks the open against this identity, and
    /// the handle acts as it for as long as it lives.
    pub who: &'a Identity,
    pub path: &'a str,
    pub disposition: Disposition,
    pub kind: Kind,
    /// Data will be read through this handle.
    pub read: bool,
    /// Data will be written through this handle (or its size changed).
    pub write: bool,
    /// FILE_ATTRIBUTE_* for a newly created or overwritten object.
    pub attributes: u32,
    /// Preallocation asked for a new file (0: none).
    pub allocation_size: u64,
    /// The caller will ask whether the object may be unlinked (it may be
    /// granted DELETE): answered in [`Opened::may_unlink`] from the
    /// folder the open reached, instead of by a walk of its own
    /// ([`Vfs::may_delete`]).
    pub unlink_asked: bool,
}

impl<'a> OpenRequest<'a> {
    /// Opens an existing object of `kind` at `path` as `who` to look at
    /// it (its metadata, its descriptor, a handle to act from), neither
    /// reading nor writing its data.
    pub fn look(who: &'a Identity, path: &'a str, kind: Kind) -> Self {
        OpenRequest {
            who,
            path,
            disposition: Disposition::Open,
            kind,
            read: false,
            write: false,
            attributes: 0,
            allocation_size: 0,
            unlink_asked: false,
        }
    }
}

/// An open object. Closing is dropping.
#[derive(Debug)]
pub struct FileHandle {
    object: Object,
    pub is_dir: bool,
    /// The alternate data stream this handle is open on (its stored name),
    /// None for the object's main data.
    pub stream: Option<Box<str>>,
    /// An engine may read and write the descriptor itself, asynchronously
    /// (see [`Vfs::data_fd`]).
    direct: bool,
    /// Who opened it: everything done through it is done as them.
    who: Identity,
}

/// What a handle holds on to: a descriptor, or a node of a
/// [`memory::MemoryVfs`]. Each backend refuses the other's handles.
#[derive(Debug)]
enum Object {
    Fd(OwnedFd),
    Memory(memory::NodeRef),
}

impl FileHandle {
    /// A handle on an open descriptor, for backends whose objects are
    /// kernel files.
    pub fn from_fd(fd: OwnedFd, is_dir: bool, stream: Option<Box<str>>) -> FileHandle {
        FileHandle {
            object: Object::Fd(fd),
            is_dir,
            stream,
            direct: false,
            who: Identity::Server,
        }
    }

    /// The handle acts as `who`.
    pub(crate) fn acting_as(mut self, who: &Identity) -> FileHandle {
        self.who = who.clone();
        self
    }

    /// Who the handle acts as.
    pub fn who(&self) -> &Identity {
        &self.who
    }

    /// Says whether an engine may do this handle's data I/O on its
    /// descriptor itself (false unless said).
    pub(crate) fn direct(mut self, direct: bool) -> FileHandle {
        self.direct = direct;
        self
    }

    /// Whether an engine may do this handle's data I/O on its descriptor.
    pub(crate) fn is_direct(&self) -> bool {
        self.direct
    }

    fn from_memory(node: memory::NodeRef, is_dir: bool, stream: Option<Box<str>>) -> FileHandle {
        FileHandle {
            object: Object::Memory(node),
            is_dir,
            stream,
            direct: false,
            who: Identity::Server,
        }
    }

    /// The descriptor the handle holds; None when its object is not a
    /// kernel file.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.object {
            Object::Fd(fd) => Some(fd.as_fd()),
            Object::Memory(_) => None,
        }
    }

    fn memory(&self) -> Option<&memory::NodeRef> {
        match &self.object {
            Object::Memory(node) => Some(node),
            Object::Fd(_) => None,
        }
    }
}

#[derive(Debug)]
pub struct Opened {
    pub handle: FileHandle,
    pub action: CreateAction,
    pub stat: FileStat,
    /// The path as stored on disk (the real case of every component).
    pub path: String,
    /// What [`Vfs::may_delete`] would say of the object, where the
    /// request asked ([`OpenRequest::unlink_asked`]) and the VFS answers
    /// on the way; None otherwise.
    pub may_unlink: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: String,
    pub stat: FileStat,
}

/// Times to set; `None` leaves a time as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetTimes {
    pub creation_time: Option<u64>,
    pub last_access_time: Option<u64>,
    pub last_write_time: Option<u64>,
    pub change_time: Option<u64>,
}

/// What the kernel lets whoever opened a handle do with its object, by
/// its own rules (mode bits, POSIX ACLs): read (a directory: list),
/// write (a directory: add and remove entries) and execute (a directory:
/// pass through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnixAccess {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

impl UnixAccess {
    /// What the mode bits alone give `who` on an object owned by
    /// `uid`:`gid` (the owner class, else the group class for a member of
    /// its group, else the rest), as the kernel decides without ACLs; the
    /// server's own identity is taken to own what it serves.
    pub fn from_mode(mode: u32, uid: u32, gid: u32, who: &Identity) -> UnixAccess {
        let bits = match who {
            Identity::Server => mode >> 6,
            Identity::Unix(ids) if ids.uid == uid => mode >> 6,
            Identity::Unix(ids) if ids.gid == gid || ids.groups.contains(&gid) => mode >> 3,
            Identity::Unix(_) => mode,
        };
        UnixAccess {
            read: bits & 4 != 0,
            write: bits & 2 != 0,
            execute: bits & 1 != 0,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct FsStat {
    pub block_size: u32,
    pub total_blocks: u64,
    pub free_blocks: u64,
    pub avail_blocks: u64,
    pub fs_id: u64,
    pub max_name_len: u32,
    /// [`Vfs::copy_range`] shares blocks between the files rather than
    /// copying them (btrfs, XFS): FILE_SUPPORTS_BLOCK_REFCOUNTING.
    pub clones: bool,
    /// Files and folders may be compressed ([`Vfs::set_compression`]):
    /// FILE_FILE_COMPRESSION.
    pub compresses: bool,
    /// Whether users' disk quotas are kept ([`Vfs::quota`]):
    /// FILE_VOLUME_QUOTAS.
    pub quotas: QuotaState,
}

/// The share's root exists and is a directory: it can only be opened as
/// it is, never created, replaced or opened as a file.
fn root_may_open(req: &OpenRequest<'_>) -> VfsResult<()> {
    match req.disposition {
        Disposition::Create => Err(VfsError::Collision),
        Disposition::Overwrite | Disposition::OverwriteIf | Disposition::Supersede => {
            Err(VfsError::IsADirectory)
        }
        Disposition::Open | Disposition::OpenIf if req.kind == Kind::NonDirectory => {
            Err(VfsError::IsADirectory)
        }
        Disposition::Open | Disposition::OpenIf => Ok(()),
    }
}

/// Whether the folder a share serves is still the one at the share's
/// path: a folder removed, re-created, or on a filesystem that was
/// unmounted must not go on being served through a descriptor of what is
/// gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootState {
    /// The path still leads to the folder the share was opened on.
    Current,
    /// No folder is at the path.
    Gone,
    /// Another folder of the same filesystem is at the path: the share's
    /// folder was removed and made again.
    Replaced,
    /// A folder of another filesystem is at the path: the share's own
    /// filesystem was unmounted (the mount point shows), or something was
    /// mounted over it.
    Elsewhere,
}

/// Every operation is done as someone: an open as `req.who`, a path
/// operation as its `who`, anything through a handle as whoever opened it.
pub trait Vfs: Send + Sync {
    /// Looks up `req.path` case-insensitively, opens or creates it.
    fn open(&self, req: &OpenRequest<'_>) -> VfsResult<Opened>;
    /// Resolves a path case-insensitively without opening it, for rename
    /// targets and existence checks: the real path, or NameNotFound /
    /// PathNotFound.
    fn resolve(&self, who: &Identity, path: &str) -> VfsResult<String>;
    fn stat(&self, h: &FileHandle) -> VfsResult<FileStat>;
    /// Reads at `offset`; fewer bytes than asked only at end of file.
    fn read(&self, h: &FileHandle, offset: u64, buf: &mut [u8]) -> VfsResult<usize>;
    /// Writes all of `data` at `offset`.
    fn write(&self, h: &FileHandle, offset: u64, data: &[u8]) -> VfsResult<()>;
    /// The descriptor whose plain contents (pread, pwrite, fdatasync) are
    /// the handle's data, for engines that do data I/O themselves,
    /// asynchronously; None when only [`Vfs::read`] and [`Vfs::write`]
    /// can reach it, or when they are the safer way (a filesystem whose
    /// reads may wait on something else than a disk, such as a FUSE
    /// daemon, can block an io_uring submission itself).
    fn data_fd<'h>(&self, _h: &'h FileHandle) -> Option<BorrowedFd<'h>> {
        None
    }
    /// Whether the data behind [`Vfs::data_fd`] lives in memory only
    /// (tmpfs): reading and writing it waits for nothing but the copy.
    /// The kernel has no way to do such I/O without blocking (tmpfs takes
    /// no RWF_NOWAIT), so io_uring hands each operation to a worker thread
    /// of its own, which copies the data cold, on another core; an engine
    /// does better to read and write it at once, itself.
    fn data_in_memory(&self) -> bool {
        false
    }
    /// Whether `path` (real or as the client wrote it) would be found
    /// now without waiting for anything: every name on the way is in the
    /// kernel's memory, on a filesystem whose metadata calls on an open
    /// object wait for nothing but memory. An engine that serves sockets
    /// on one thread may then open it there rather than hand the request
    /// to a thread that may block. False whenever unsure (the default).
    fn found_without_waiting(&self, _path: &str) -> bool {
        false
    }
    /// An engine read (or wrote) `bytes` of a handle's data on its
    /// [`Vfs::data_fd`] itself, taking `ns`: for layers that count data
    /// I/O. Nothing by default.
    fn data_done(&self, _write: bool, _bytes: u64, _ns: u64) {}
    /// Makes written data durable (fdatasync).
    fn flush(&self, h: &FileHandle) -> VfsResult<()>;
    fn set_len(&self, h: &FileHandle, len: u64) -> VfsResult<()>;
    /// Preallocates (or, when smaller than the size, does nothing).
    fn set_allocation(&self, h: &FileHandle, len: u64) -> VfsResult<()>;
    fn set_times(&self, h: &FileHandle, times: &SetTimes) -> VfsResult<()>;
    /// Stores the settable DOS attribute bits (attr::SETTABLE); the
    /// sparse bit stays as it is.
    fn set_attributes(&self, h: &FileHandle, attributes: u32) -> VfsResult<()>;
    /// Marks the file `h` is open on sparse or not
    /// (attr::SPARSE_FILE). A file no longer sparse has its holes
    /// allocated, as NTFS does (MS-FSA 2.1.5.10.30).
    fn set_sparse(&self, h: &FileHandle, sparse: bool) -> VfsResult<()>;
    /// Makes the `len` bytes of the handle's data at `offset` read as
    /// zeros, below its end of file (which stays). With `deallocate`
    /// (a sparse file) the blocks wholly inside are given back; without,
    /// they stay allocated.
    fn zero_range(&self, h: &FileHandle, offset: u64, len: u64, deallocate: bool) -> VfsResult<()>;
    /// The ranges of the handle's data from `offset` up to `end` that
    /// are allocated (not holes), in order, joined where they touch,
    /// clipped to the range asked; at most `limit` of them.
    fn allocated_ranges(
        &self,
        h: &FileHandle,
        offset: u64,
        end: u64,
        limit: usize,
    ) -> VfsResult<Vec<std::ops::Range<u64>>>;
    /// Has the filesystem compress the data of the object `h` is open on
    /// (a folder: of what is made in it), or no longer; its attributes
    /// then say attr::COMPRESSED. NotSupported where the filesystem
    /// cannot (see [`FsStat::compresses`]), the default.
    fn set_compression(&self, _h: &FileHandle, _on: bool) -> VfsResult<()> {
        Err(VfsError::NotSupported)
    }
    /// Copies `len` bytes of `src`'s data at `src_offset` to `dst`'s at
    /// `dst_offset` inside the filesystem, sharing blocks where it can
    /// (see [`FsStat::clones`]): the bytes copied, fewer only at the end
    /// of `src`. `src` may be a handle of another share of this backend.
    /// NotSupported where this backend has no better way than reading
    /// and writing (the default), which the caller then does.
    fn copy_range(
        &self,
        _src: &FileHandle,
        _src_offset: u64,
        _dst: &FileHandle,
        _dst_offset: u64,
        _len: u64,
    ) -> VfsResult<u64> {
        Err(VfsError::NotSupported)
    }
    /// The names in an open directory except `.` and `..`, sorted.
    fn list_names(&self, h: &FileHandle) -> VfsResult<Vec<String>>;
    /// Hands each name of an open directory except `.` and `..` to `f`,
    /// in no particular order and without keeping them: for listings that
    /// keep only some of a large directory's names.
    fn each_name(&self, h: &FileHandle, f: &mut dyn FnMut(&str)) -> VfsResult<()> {
        for name in self.list_names(h)? {
            f(&name);
        }
        Ok(())
    }
    /// The entry `name` of an open directory; None when it is no longer
    /// there.
    fn entry(&self, dir: &FileHandle, name: &str) -> VfsResult<Option<FileStat>>;
    /// Whether whoever opened `dir` may read its entry `name` (its data,
    /// or a directory's list): for listings that leave out what the
    /// reader may not open (access-based enumeration).
    fn may_read_entry(&self, dir: &FileHandle, name: &str) -> VfsResult<bool>;
    /// What the kernel lets whoever opened `h` do with its object (a
    /// stream's: its file's), asked of the kernel itself so that POSIX
    /// ACLs count.
    fn unix_access(&self, h: &FileHandle) -> VfsResult<UnixAccess>;
    /// Whether whoever opened the directory `dir` may list the directory
    /// `path` beneath it (`/`-separated, relative to `dir`), by the
    /// kernel's rules for that identity (mode bits, POSIX ACLs): search
    /// permission on `dir` and on every directory on the way, read and
    /// search permission on `path` itself. False when `path` is not (or no
    /// longer) a directory there. For change notifications of a watched
    /// tree, which tell a watcher only what it could have listed.
    fn may_list_beneath(&self, dir: &FileHandle, path: &str) -> VfsResult<bool>;
    /// Whether [`Vfs::list_names`] would list nothing, without listing a
    /// large directory to find out.
    fn is_empty_dir(&self, h: &FileHandle) -> VfsResult<bool> {
        Ok(self.list_names(h)?.is_empty())
    }
    /// Every entry of an open directory except `.` and `..`, sorted by
    /// name.
    fn read_dir(&self, h: &FileHandle) -> VfsResult<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for name in self.list_names(h)? {
            if let Some(stat) = self.entry(h, &name)? {
                entries.push(DirEntry { name, stat });
            }
        }
        Ok(entries)
    }
    /// Renames `from` (a real path, as returned by open) to `to` (as the
    /// client gave it; its parent resolved case-insensitively). Returns the
    /// new real path. A target that exists is Collision unless `replace`,
    /// and a directory target is never replaced (AccessDenied). A rename
    /// that only changes case of the same object is allowed.
    fn rename(&self, who: &Identity, from: &str, to: &str, replace: bool) -> VfsResult<String>;
    /// Whether `who` may delete the object at the real path `path`, by the
    /// kernel's rule for unlinking: write and search permission on its
    /// directory and, in a sticky directory, owning the object or the
    /// directory. Asked before a client is granted DELETE, so that a
    /// delete it may not do is refused when it opens, not lost at close.
    fn may_delete(&self, who: &Identity, path: &str) -> VfsResult<()>;
    /// Removes a file or an empty directory by its real path.
    fn unlink(&self, who: &Identity, path: &str, is_dir: bool) -> VfsResult<()>;
    /// Makes the folder at the real path `path` (whose parent is there)
    /// as the server itself, then gives it to `owner` (its uid and
    /// primary group; the server's own identity keeps it) with exactly
    /// the permission bits `mode`: for folders the server keeps in a
    /// share for its users (a recycle bin's). A name already there is
    /// left as it is.
    fn make_dir_for(&self, owner: &Identity, path: &str, mode: u32) -> VfsResult<()>;
    fn fs_stat(&self) -> VfsResult<FsStat>;
    /// The disk quota entry of the Unix user `uid` on the share's
    /// filesystem, asked as `who` (a user may read their own entry; the
    /// server, with CAP_SYS_ADMIN, anyone's), where the filesystem keeps
    /// quotas ([`FsStat::quotas`]); NotSupported where it keeps none
    /// (the default).
    fn quota(&self, _who: &Identity, _uid: u32) -> VfsResult<Quota> {
        Err(VfsError::NotSupported)
    }
    /// The first quota entry of a uid from `from` on, with its uid, in
    /// uid order, asked as `who`; None past the last.
    fn next_quota(&self, _who: &Identity, _from: u32) -> VfsResult<Option<(u32, Quota)>> {
        Err(VfsError::NotSupported)
    }
    /// Sets the limits of `uid`'s entry, in bytes (0: none), as `who`.
    fn set_quota(&self, _who: &Identity, _uid: u32, _soft: u64, _hard: u64) -> VfsResult<()> {
        Err(VfsError::NotSupported)
    }
    /// Whether the share's folder is still the one at its path. Backends
    /// without a path of their own are always current.
    fn root_state(&self) -> RootState {
        RootState::Current
    }
    /// The NT security descriptor (self-relative) stored for the object,
    /// or None when it has none and its rights follow from its mode.
    fn security(&self, h: &FileHandle) -> VfsResult<Option<Vec<u8>>>;
    /// Stores a security descriptor for the object, replacing any other.
    fn set_security(&self, h: &FileHandle, sd: &[u8]) -> VfsResult<()>;
    /// Whether a security descriptor was ever stored on this share: until
    /// one is, none is looked up, and callers may skip the lookups that
    /// would lead to one.
    fn descriptors_stored(&self) -> bool;
    /// The security descriptor stored for the directory at the real path
    /// `path` (as returned by open), with the uid that owns the directory
    /// (the owner a descriptor that names none stands for).
    fn dir_security(&self, who: &Identity, path: &str) -> VfsResult<Option<(Vec<u8>, u32)>>;
    /// The extended attributes of the object `h` is open on (a stream's
    /// handle: its file's), in the order they were set.
    fn eas(&self, h: &FileHandle) -> VfsResult<Vec<Ea>>;
    /// Applies `changes` to the extended attributes of the object `h` is
    /// open on, all or none ([`eas::merge`]: an EA replaces the one of its
    /// name in any case, an empty value removes it).
    fn set_eas(&self, h: &FileHandle, changes: &[Ea]) -> VfsResult<()>;
    /// Whether an EA was ever stored on this share: until one is, no
    /// object has any, and callers may skip looking.
    fn eas_stored(&self) -> bool;
    /// Opens the alternate data stream `name` of the open object `base`,
    /// creating or truncating it as `disposition` says (matched
    /// case-insensitively). The handle's reads, writes, set_len and stat
    /// then apply to the stream; times, attributes and security to the
    /// object.
    fn open_stream(
        &self,
        base: &FileHandle,
        name: &str,
        disposition: Disposition,
    ) -> VfsResult<(FileHandle, CreateAction)>;
    /// The named streams of an object and their sizes.
    fn streams(&self, h: &FileHandle) -> VfsResult<Vec<(String, u64)>>;
    /// Removes the stream a handle is open on.
    fn delete_stream(&self, h: &FileHandle) -> VfsResult<()>;
    /// Renames the stream a handle is open on to `to`, another stream of
    /// the same object matched case-insensitively (or the same one, whose
    /// name then changes case). A target that exists is Collision unless
    /// `replace`, and NotEmpty unless it is empty. Returns the stored new
    /// name; the handle keeps naming the old one.
    fn rename_stream(&self, h: &FileHandle, to: &str, replace: bool) -> VfsResult<String>;
}
