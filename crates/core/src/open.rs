//! Open files and pipes of a session, and what closing one does to the
//! shared file table (share modes, delete-on-close).

use std::sync::Arc;

use copyless_proto::messages::FileId;
use copyless_vfs::{FileHandle, Identity, Vfs};

use crate::file_table::{Closed, FileKey};
use crate::intent::{Call, CallOp, Completion};
use crate::server::Server;

pub struct Open {
    pub file_id: FileId,
    pub tree_id: u32,
    /// Granted access after generic mapping.
    pub access: u32,
    pub kind: OpenKind,
    /// Held while the open lives; gives its place back when dropped.
    pub _slot: crate::quota::OpenSlot,
}

pub enum OpenKind {
    File(FileOpen),
    Pipe(copyless_rpc::Pipe),
}

pub struct FileOpen {
    pub vfs: Arc<dyn Vfs>,
    /// What its share hides and vetoes.
    pub names: Arc<crate::names::hiding::NameRules>,
    /// What its share's audit trail keeps.
    pub audit: crate::audit::AuditKinds,
    pub handle: Arc<FileHandle>,
    pub key: FileKey,
    pub is_dir: bool,
    pub share_access: u32,
    /// FILE_DELETE_CHILD... no: FILE_DELETE_ON_CLOSE was given at create.
    pub delete_on_close: bool,
    pub write_through: bool,
    /// FilePositionInformation, kept for clients that query it.
    pub position: u64,
    /// FileModeInformation flags from the create options.
    pub mode: u32,
    /// The EA a query of FileFullEaInformation without SL_RESTART_SCAN
    /// goes on from: the count of those returned before.
    pub ea_index: usize,
    pub dir: Option<Box<crate::names::enumeration::Enumeration>>,
    /// The enumeration is with a call (`dir` is None meanwhile): another
    /// query of it waits for it to come back.
    pub dir_away: bool,
    /// The directory is watched for changes (CHANGE_NOTIFY).
    pub watch: Option<Box<crate::notify::Watch>>,
    /// Data was written through it: watchers hear of it at its close.
    pub written: bool,
    /// It outlives its connection for a while (durable.rs).
    pub durable: Option<Box<crate::durable::Durable>>,
    /// Made at the first LOCK that names a sequence, when the open checks
    /// them (handlers/file.rs).
    pub lock_sequences: Option<Box<crate::durable::LockSequences>>,
    /// The key FSCTL_SRV_REQUEST_RESUME_KEY gave out for it, by which a
    /// server-side copy names it as its source (handlers/ioctl.rs).
    pub resume_key: Option<[u8; copyless_proto::fsctl::RESUME_KEY_LEN]>,
    /// Opened in a snapshot: its data and metadata are write-protected
    /// (STATUS_MEDIA_WRITE_PROTECTED).
    pub snapshot: bool,
    /// The share's recycle bin, and whose part of it a file this open
    /// deletes goes to.
    pub recycle: Option<crate::recycle::Recycling>,
    /// The uid a quota enumeration without RestartScan goes on from
    /// (handlers/quota.rs).
    pub quota_scan: u64,
}

impl FileOpen {
    /// The file as a data intent names it.
    pub fn data_file(&self) -> crate::intent::DataFile {
        crate::intent::DataFile {
            vfs: self.vfs.clone(),
            handle: self.handle.clone(),
        }
    }
}

impl Open {
    pub fn file(&self) -> Option<&FileOpen> {
        match &self.kind {
            OpenKind::File(f) => Some(f),
            OpenKind::Pipe(_) => None,
        }
    }
}

/// Current path of an open file, from the shared table (renames through
/// another open move it).
pub fn current_path(server: &Server, key: &FileKey) -> Option<String> {
    server.files().get(key).map(|f| f.path().to_owned())
}

/// What closing the last open of a file (or named stream) marked for
/// deletion leaves to do: remove it, as whoever opened it.
pub enum Unlink {
    /// The file or folder at the real path `path`.
    Name {
        vfs: Arc<dyn Vfs>,
        who: Identity,
        path: String,
        is_dir: bool,
        /// A folder whose vetoed names go with it.
        vetoed: Option<Arc<crate::names::hiding::NameRules>>,
        /// A file that goes to a recycle bin.
        recycle: Option<crate::recycle::Recycling>,
    },
    /// A named stream, whose file stays.
    Stream {
        vfs: Arc<dyn Vfs>,
        handle: Arc<FileHandle>,
    },
}

impl Unlink {
    /// The removal as a call's operation, with the VFS to make it
    /// through, and the name it removes (path, and whether a folder), of
    /// which watchers are told once it is gone.
    pub fn into_call(self) -> (Arc<dyn Vfs>, CallOp, Option<(String, bool)>) {
        match self {
            Unlink::Name {
                vfs,
                who,
                path,
                is_dir,
                vetoed,
                recycle,
            } => {
                let name = Some((path.clone(), is_dir));
                let op = CallOp::Unlink {
                    who,
                    path,
                    is_dir,
                    vetoed,
                    recycle: recycle.map(Box::new),
                };
                (vfs, op, name)
            }
            Unlink::Stream { vfs, handle } => (vfs, CallOp::DeleteStream(handle), None),
        }
    }

    /// Removes it on the calling thread; the name removed, if one was.
    /// Failure (a folder no longer empty) leaves it, as Windows does
    /// when the delete cannot happen.
    pub fn remove_now(self) -> Option<(String, bool)> {
        let (vfs, op, name) = self.into_call();
        let (_, done) = Call { token: 0, vfs, op }.perform();
        name.filter(|_| matches!(done, Completion::Unlinked(Ok(()))))
    }
}

/// Releases an open: its share-mode entry, its locks and its oplock go.
/// When it was the last open of a file or stream marked for deletion,
/// what is left to do is to remove it, which the caller does. Returns what
/// waited on the open, to be woken. Unless the caller holds the server's
/// own-change mark (local.rs) from before this until the file is gone, a
/// local watcher may report the removal as another process's.
pub fn let_go(server: &Server, open: Open) -> (Closed, Option<Unlink>) {
    let OpenKind::File(f) = open.kind else {
        return (Closed::default(), None);
    };
    if f.durable.is_some() {
        server.durable.detach(open.file_id.persistent);
    }
    let mut closed = server
        .files()
        .unregister(&f.key, open.file_id.volatile, f.delete_on_close);
    if closed.unwatched {
        server.unwatched();
    }
    let last = closed.last.take().filter(|last| last.delete_pending);
    // The last to close deletes, as themselves.
    let unlink = last.map(|last| match &f.handle.stream {
        Some(_) if !last.deletes_file => Unlink::Stream {
            vfs: f.vfs.clone(),
            handle: f.handle.clone(),
        },
        _ => Unlink::Name {
            vfs: f.vfs.clone(),
            who: f.handle.who().clone(),
            path: last.path,
            is_dir: last.is_dir,
            vetoed: (last.is_dir && f.names.deletes_vetoed()).then(|| f.names.clone()),
            recycle: f.recycle.clone().filter(|_| !last.is_dir),
        },
    });
    (closed, unlink)
}
