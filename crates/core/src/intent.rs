//! Filesystem work the core asks the engine to perform: reads, writes and
//! flushes of a file's data leave the core as [`Intent`]s, other calls on
//! a share (opening, renaming, unlinking) as [`Call`]s, each tagged with a token;
//! the request goes on only when the engine hands the result back to
//! [`crate::Connection::complete`]. The engine picks the mechanism
//! (io_uring, splice, a worker thread, or [`Intent::perform`] and
//! [`Call::perform`]).

use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

pub use crate::handlers::change::Change;
pub use crate::handlers::create::{
    Inheriting, Judging, Made, Overwrite, StreamMade, StreamOpening,
};
pub use crate::handlers::dir::DirStep;
pub use crate::handlers::fsctl::Fsctl;
pub use crate::handlers::info::{RenameJudging, SecuritySet};
pub use crate::handlers::look::{Look, Looked};
pub use crate::notify_sight::Sighting;
use copyless_proto::status::NtStatus;
use copyless_vfs::{
    Disposition, FileHandle, FileStat, Identity, Kind, OpenRequest, Opened, Vfs, VfsResult,
};

pub use copyless_state::Token;

/// The file an intent reads or writes: the share's VFS and the open
/// handle. Holding it keeps the handle alive even when the client closes
/// the file while the intent runs.
#[derive(Clone)]
pub struct DataFile {
    pub vfs: Arc<dyn Vfs>,
    pub handle: Arc<FileHandle>,
}

impl DataFile {
    /// The descriptor whose plain contents are this handle's data, for
    /// engines that read and write descriptors themselves; None when the
    /// data lives elsewhere (an alternate data stream) and only the VFS
    /// can reach it.
    pub fn data_fd(&self) -> Option<BorrowedFd<'_>> {
        self.vfs.data_fd(&self.handle)
    }
}

impl std::fmt::Debug for DataFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataFile")
            .field("handle", &self.handle)
            .finish()
    }
}

/// Bytes to write.
#[derive(Debug)]
pub enum WriteData {
    /// This range of the received frame the engine passed to
    /// [`crate::Connection::handle`]; the engine keeps that frame until
    /// the intent completes, so the payload is never copied.
    Frame(Range<usize>),
    /// Bytes the core holds (a decrypted frame, or the rest of a compound
    /// that waited for an earlier intent).
    Owned(Vec<u8>),
}

impl WriteData {
    /// The bytes, given the frame the intent came from.
    pub fn bytes<'a>(&'a self, frame: &'a [u8]) -> &'a [u8] {
        match self {
            WriteData::Frame(r) => &frame[r.clone()],
            WriteData::Owned(v) => v,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            WriteData::Frame(r) => r.len(),
            WriteData::Owned(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
pub enum Op {
    /// Append up to `len` bytes of the file at `offset` to `buf`: fewer
    /// only at end of file. `buf` already holds the reply's header room;
    /// the data lands right behind it, where the reply carries it, so it
    /// is never copied again.
    ///
    /// When `bare`, the reply goes out as it is: neither signed nor
    /// sealed, alone in its frame. The engine may then leave the data out
    /// of `buf`, move it aside (a pipe) and send it straight after the
    /// reply, completing with [`Completion::ReadAside`].
    Read {
        offset: u64,
        len: usize,
        buf: Vec<u8>,
        bare: bool,
    },
    /// Write all of `data` at `offset`; then, when `sync`, make it durable.
    Write {
        offset: u64,
        data: WriteData,
        sync: bool,
    },
    /// Make written data durable (fdatasync).
    Flush,
}

#[derive(Debug)]
pub struct Intent {
    pub token: Token,
    pub file: DataFile,
    pub op: Op,
}

/// The result of an intent, handed back to the core.
#[derive(Debug)]
pub enum Completion {
    /// The read's buffer, with the data appended (whatever was read before
    /// an error is ignored).
    Read(Vec<u8>, VfsResult<()>),
    /// A bare read whose data the engine moved aside: the buffer as it
    /// was given, and how many bytes (fewer than asked only at end of
    /// file). When the reply carries them, the output says so
    /// ([`crate::Output::aside`]).
    ReadAside(Vec<u8>, VfsResult<usize>),
    Write(VfsResult<()>),
    Flush(VfsResult<()>),
    /// A [`CallOp::Open`]'s, [`CallOp::OpenJudged`]'s or
    /// [`CallOp::Inherit`]'s result.
    Made(Box<Made>),
    /// A [`CallOp::Unlink`]'s result.
    Unlinked(VfsResult<()>),
    /// A [`CallOp::Rename`]'s or [`CallOp::RenameJudged`]'s result: the
    /// open's real path and its new one.
    Renamed(Result<(String, String), NtStatus>),
    /// A [`CallOp::List`]'s step, made.
    Listed(Box<DirStep>),
    /// A [`CallOp::Look`]'s result.
    Looked(Result<Box<Looked>, NtStatus>),
    /// A [`CallOp::Change`]'s or [`CallOp::SetSecurity`]'s result.
    Changed(Result<(), NtStatus>),
    /// A [`CallOp::Overwrite`]'s result: the object opened, with its new
    /// stat.
    Overwritten(Box<(Opened, VfsResult<FileStat>)>),
    /// A [`CallOp::Watch`] made.
    Watched,
    /// A [`CallOp::Sight`]'s answer: the folders each watching open may
    /// list, by open.
    Sighted(Vec<(u64, String)>),
    /// A [`CallOp::Fsctl`]'s result: the reply's status and output, or
    /// an error alone.
    Fsctl(Result<(NtStatus, Vec<u8>), NtStatus>),
}

impl Completion {
    /// Whether an engine may stop the work before it ends: a flush. A
    /// read or write that has begun runs to its end and is answered as
    /// usual, as Samba answers one (MS-SMB2 3.3.5.16 leaves it to the
    /// server; smbtorture smb2.aio_delay.aio_cancel expects the data): a
    /// client that gave up on it loses nothing by getting it; so does a
    /// call.
    pub fn stoppable(&self) -> bool {
        matches!(self, Completion::Flush(_))
    }
}

impl Intent {
    /// Carries the intent out through the share's VFS, blocking: the way
    /// for engines (and tests) without a faster mechanism. `frame` is the
    /// received frame the intent came from.
    pub fn perform(self, frame: &[u8]) -> (Token, Completion) {
        let f = &self.file;
        let done = match self.op {
            Op::Read {
                offset,
                len,
                mut buf,
                ..
            } => {
                let start = buf.len();
                buf.resize(start + len, 0);
                let result = f.vfs.read(&f.handle, offset, &mut buf[start..]);
                let n = result.as_ref().map_or(0, |n| *n);
                buf.truncate(start + n);
                Completion::Read(buf, result.map(|_| ()))
            }
            Op::Write { offset, data, sync } => Completion::Write(
                f.vfs
                    .write(&f.handle, offset, data.bytes(frame))
                    .and_then(|()| if sync { f.vfs.flush(&f.handle) } else { Ok(()) }),
            ),
            Op::Flush => Completion::Flush(f.vfs.flush(&f.handle)),
        };
        (self.token, done)
    }
}

/// A filesystem call on a share that moves no file data, made as the
/// identity it names. Only what the core cannot yet go on without leaves
/// as a call; the engine makes it where it does not hold up other
/// requests (a worker thread, or [`Call::perform`] for engines that
/// block anyway).
pub struct Call {
    pub token: Token,
    pub vfs: Arc<dyn Vfs>,
    pub op: CallOp,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("token", &self.token)
            .field("op", &self.op)
            .finish()
    }
}

#[derive(Debug)]
pub enum CallOp {
    /// [`Vfs::open`], completing with [`Completion::Made`].
    Open(OpenCall),
    /// An open of what is there, with the decision on the caller's
    /// rights that reads stored descriptors, completing with
    /// [`Completion::Made`].
    OpenJudged(Box<Judging>),
    /// The making of a name, with what it inherits from its folder's
    /// stored descriptor, completing with [`Completion::Made`].
    Inherit(Box<Inheriting>),
    /// The open of a named stream, its file made if need be, completing
    /// with [`Completion::Made`].
    OpenStream(Box<StreamOpening>),
    /// The engine's watcher of local changes is brought up to date with
    /// the folders watched now (see `local::LocalWatch`): a folder newly
    /// watched gets its kernel watches, which may walk a tree. Completes
    /// with [`Completion::Watched`].
    Watch(WatchCall),
    /// [`Vfs::unlink`] of the real path `path`, completing with
    /// [`Completion::Unlinked`]; a folder's vetoed names go first when
    /// its share deletes them (`vetoed`, see names/hiding.rs); a file
    /// goes to the share's recycle bin where it has one (recycle.rs).
    Unlink {
        who: Identity,
        path: String,
        is_dir: bool,
        vetoed: Option<Arc<crate::names::hiding::NameRules>>,
        recycle: Option<Box<crate::recycle::Recycling>>,
    },
    /// [`Vfs::delete_stream`] of an open named stream, completing with
    /// [`Completion::Unlinked`].
    DeleteStream(Arc<FileHandle>),
    /// [`Vfs::rename`] of the real path `from` to `to`, completing with
    /// [`Completion::Renamed`].
    Rename {
        who: Identity,
        from: String,
        to: String,
        replace: bool,
    },
    /// A rename with the checks stored descriptors ask for, completing
    /// with [`Completion::Renamed`].
    RenameJudged(Box<RenameJudging>),
    /// A QUERY_DIRECTORY's filesystem work on an open folder, completing
    /// with [`Completion::Listed`].
    List(Box<DirStep>),
    /// What a QUERY_INFO needs of an open object, completing with
    /// [`Completion::Looked`].
    Look(Look),
    /// What a SET_INFO changes on an open object (or checks before it
    /// changes the server's tables), completing with
    /// [`Completion::Changed`].
    Change(Change),
    /// The truncation of what a CREATE opened, completing with
    /// [`Completion::Overwritten`].
    Overwrite(Box<Overwrite>),
    /// A security descriptor's parts merged into what an open object
    /// holds, completing with [`Completion::Changed`].
    SetSecurity(Box<SecuritySet>),
    /// What watchers of a tree may see of changes beneath their folders
    /// (notify_sight.rs), completing with [`Completion::Sighted`].
    Sight(Box<Sighting>),
    /// A file-system control's work on file data (a copy, a clone, a
    /// hole), completing with [`Completion::Fsctl`].
    Fsctl(Box<Fsctl>),
}

impl CallOp {
    /// The share paths the call acts on.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            CallOp::Open(o) => vec![&o.path],
            CallOp::OpenJudged(j) => vec![j.path()],
            CallOp::Inherit(i) => vec![i.path()],
            CallOp::OpenStream(o) => vec![o.path()],
            CallOp::Unlink { path, .. } => vec![path],
            CallOp::Rename { from, to, .. } => vec![from, to],
            CallOp::RenameJudged(r) => r.paths(),
            // The open folder is where it is: no path is looked up.
            CallOp::List(_)
            | CallOp::Look(_)
            | CallOp::Change(_)
            | CallOp::Overwrite(_)
            | CallOp::SetSecurity(_)
            | CallOp::DeleteStream(_)
            | CallOp::Watch(_)
            | CallOp::Sight(_)
            | CallOp::Fsctl(_) => Vec::new(),
        }
    }
}

/// The server whose watched folders [`CallOp::Watch`] brings the
/// engine's watcher up to date with.
pub struct WatchCall {
    pub(crate) server: std::sync::Arc<crate::server::Server>,
}

impl std::fmt::Debug for WatchCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WatchCall")
    }
}

/// An [`OpenRequest`] that owns what it names, to travel to the engine.
#[derive(Debug, Clone)]
pub struct OpenCall {
    pub who: Identity,
    pub path: String,
    pub disposition: Disposition,
    pub kind: Kind,
    pub read: bool,
    pub write: bool,
    pub attributes: u32,
    pub allocation_size: u64,
    pub unlink_asked: bool,
}

impl OpenCall {
    pub fn new(req: &OpenRequest<'_>) -> OpenCall {
        OpenCall {
            who: req.who.clone(),
            path: req.path.to_owned(),
            disposition: req.disposition,
            kind: req.kind,
            read: req.read,
            write: req.write,
            attributes: req.attributes,
            allocation_size: req.allocation_size,
            unlink_asked: req.unlink_asked,
        }
    }

    pub fn request(&self) -> OpenRequest<'_> {
        OpenRequest {
            who: &self.who,
            path: &self.path,
            disposition: self.disposition,
            kind: self.kind,
            read: self.read,
            write: self.write,
            attributes: self.attributes,
            allocation_size: self.allocation_size,
            unlink_asked: self.unlink_asked,
        }
    }
}

impl Call {
    /// Makes the call through the share's VFS, blocking.
    pub fn perform(self) -> (Token, Completion) {
        let vfs = self.vfs.as_ref();
        let done = match self.op {
            CallOp::Open(o) => Completion::Made(Box::new(Made::Opened {
                opened: vfs.open(&o.request()),
                judged: None,
                write: o.write,
            })),
            CallOp::OpenJudged(j) => Completion::Made(Box::new(j.perform(vfs))),
            CallOp::Inherit(i) => Completion::Made(Box::new(i.perform(vfs))),
            CallOp::OpenStream(o) => Completion::Made(Box::new(o.perform(vfs))),
            CallOp::Unlink {
                who,
                path,
                is_dir,
                vetoed,
                recycle,
            } => {
                let cleared = match &vetoed {
                    Some(rules) => rules.remove_vetoed(vfs, &who, &path),
                    None => Ok(()),
                };
                Completion::Unlinked(cleared.and_then(|()| match recycle {
                    Some(r) => r.bin.delete(vfs, &who, &r.user, &path),
                    None => vfs.unlink(&who, &path, is_dir),
                }))
            }
            CallOp::DeleteStream(handle) => Completion::Unlinked(vfs.delete_stream(&handle)),
            CallOp::Rename {
                who,
                from,
                to,
                replace,
            } => Completion::Renamed(
                vfs.rename(&who, &from, &to, replace)
                    .map(|to| (from, to))
                    .map_err(|e| crate::handlers::vfs_status(&e)),
            ),
            CallOp::RenameJudged(r) => Completion::Renamed(r.perform(vfs)),
            CallOp::List(step) => Completion::Listed(Box::new(step.perform(vfs))),
            CallOp::Look(look) => Completion::Looked(look.perform(vfs).map(Box::new)),
            CallOp::Change(change) => Completion::Changed(change.perform(vfs)),
            CallOp::SetSecurity(set) => Completion::Changed(set.perform(vfs)),
            CallOp::Overwrite(o) => Completion::Overwritten(Box::new(o.perform(vfs))),
            CallOp::Watch(w) => {
                w.server.watched_changed();
                Completion::Watched
            }
            CallOp::Sight(sighting) => Completion::Sighted(sighting.perform()),
            CallOp::Fsctl(fsctl) => Completion::Fsctl(fsctl.perform()),
        };
        (self.token, done)
    }
}
