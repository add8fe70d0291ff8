//! Open files and pipes of a session, and what closing one does to the
//! shared file table (share modes, delete-on-close).

use std::sync::Arc;

use copyless_proto::messages::FileId;
use copyless_vfs::{FileHandle, Vfs};

use crate::server::{FileKey, Server};

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
    pub handle: FileHandle,
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
    pub dir: Option<crate::enumeration::Enumeration>,
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
    server.files().files.get(key).map(|f| f.path.clone())
}

/// Releases an open: its share-mode entry goes, and when it was the last
/// open of a file marked for deletion, the file is removed.
pub fn close_open(server: &Server, open: Open) {
    let OpenKind::File(f) = open.kind else {
        return;
    };
    let unlink = {
        let mut table = server.files();
        let Some(state) = table.files.get_mut(&f.key) else {
            return;
        };
        state.opens.retain(|o| o.id != open.file_id.volatile);
        if f.delete_on_close {
            state.delete_pending = true;
        }
        if state.opens.is_empty() {
            let state = table.files.remove(&f.key).expect("present");
            state.delete_pending.then_some((state.path, state.is_dir))
        } else {
            None
        }
    };
    if unlink.is_some() && f.handle.stream.is_some() {
        let _ = f.vfs.delete_stream(&f.handle);
        return;
    }
    drop(f.handle);
    if let Some((path, is_dir)) = unlink {
        // Failure here (the directory became non-empty) leaves the file,
        // as Windows leaves it when the delete cannot happen.
        let _ = f.vfs.unlink(&path, is_dir);
    }
}
