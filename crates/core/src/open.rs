//! Open files and pipes of a session, and what closing one does to the
//! shared file table (share modes, delete-on-close).

use std::sync::Arc;

use copyless_proto::messages::FileId;
use copyless_vfs::{FileHandle, Vfs};

use crate::file_table::{Closed, FileKey};
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
    pub dir: Option<Box<crate::names::enumeration::Enumeration>>,
    /// The directory is watched for changes (CHANGE_NOTIFY).
    pub watch: Option<Box<crate::notify::Watch>>,
    /// Data was written through it: watchers hear of it at its close.
    pub written: bool,
    /// It outlives its connection for a while (durable.rs).
    pub durable: Option<Box<crate::durable::Durable>>,
    /// Made at the first LOCK that names a sequence, when the open checks
    /// them (handlers/file.rs).
    pub lock_sequences: Option<Box<crate::durable::LockSequences>>,
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

/// Releases an open: its share-mode entry, its locks and its oplock go,
/// and when it was the last open of a file marked for deletion, the file
/// is removed. Returns what waited on them, to be woken.
pub fn close_open(server: &Server, open: Open) -> Closed {
    let OpenKind::File(f) = open.kind else {
        return Closed::default();
    };
    if f.durable.is_some() {
        server.durable.detach(open.file_id.persistent);
    }
    // What was written through the open, and the deletion its close may
    // make, are the server's own changes (local.rs); the mark stands
    // before the open leaves the table, so no event falls between.
    let path = if server.own_changes().is_active() {
        current_path(server, &f.key)
    } else {
        None
    };
    let _own = server
        .own_changes()
        .begin(f.key.0, path.as_deref().as_slice());
    let mut closed = server
        .files()
        .unregister(&f.key, open.file_id.volatile, f.delete_on_close);
    if closed.unwatched {
        server.watched_changed();
    }
    let last = closed.last.take().filter(|last| last.delete_pending);
    if last.as_ref().is_some_and(|l| !l.deletes_file) && f.handle.stream.is_some() {
        let _ = f.vfs.delete_stream(&f.handle);
        return closed;
    }
    let unlink = last.map(|last| (last.path, last.is_dir));
    // The last to close deletes, as themselves.
    let who = f.handle.who().clone();
    drop(f.handle);
    if let Some((path, is_dir)) = unlink {
        // Failure here (the directory became non-empty) leaves the file,
        // as Windows leaves it when the delete cannot happen.
        if f.vfs.unlink(&who, &path, is_dir).is_ok() {
            closed.removed = Some((path, is_dir));
        }
    }
    closed
}
