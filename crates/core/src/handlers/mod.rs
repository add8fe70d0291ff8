//! Command handlers that act on opens: one file per concern.

pub mod create;
pub mod dir;
pub mod file;
pub mod info;
pub mod ioctl;

use copyless_fscc::FileInfo;
use copyless_proto::messages::{FileId, FileTimes};
use copyless_proto::status::{self, NtStatus};
use copyless_vfs::{FileStat, VfsError};

use crate::conn::connection::{Compound, Connection, Req};
use crate::open::Open;

/// The NTSTATUS Windows gives for a filesystem error.
pub fn vfs_status(e: &VfsError) -> NtStatus {
    match e {
        VfsError::NameNotFound => status::OBJECT_NAME_NOT_FOUND,
        VfsError::PathNotFound => status::OBJECT_PATH_NOT_FOUND,
        VfsError::Collision => status::OBJECT_NAME_COLLISION,
        VfsError::NotADirectory => status::NOT_A_DIRECTORY,
        VfsError::IsADirectory => status::FILE_IS_A_DIRECTORY,
        VfsError::NotEmpty => status::DIRECTORY_NOT_EMPTY,
        VfsError::AccessDenied => status::ACCESS_DENIED,
        VfsError::InvalidName => status::OBJECT_NAME_INVALID,
        VfsError::DiskFull => status::DISK_FULL,
        VfsError::NotSupported => status::NOT_SUPPORTED,
        VfsError::Cancelled => status::CANCELLED,
        VfsError::Io(_) => status::UNSUCCESSFUL,
    }
}

/// Windows reports no size for directories.
pub fn file_times(st: &FileStat) -> FileTimes {
    FileTimes {
        creation_time: st.creation_time,
        last_access_time: st.last_access_time,
        last_write_time: st.last_write_time,
        change_time: st.change_time,
        allocation_size: if st.is_dir { 0 } else { st.alloc_size },
        end_of_file: if st.is_dir { 0 } else { st.size },
        attributes: st.attributes,
    }
}

pub fn file_info(st: &FileStat, delete_pending: bool) -> FileInfo {
    FileInfo {
        creation_time: st.creation_time,
        last_access_time: st.last_access_time,
        last_write_time: st.last_write_time,
        change_time: st.change_time,
        end_of_file: if st.is_dir { 0 } else { st.size },
        allocation_size: if st.is_dir { 0 } else { st.alloc_size },
        attributes: st.attributes,
        file_id: st.ino,
        nlink: st.nlink,
        delete_pending,
        is_dir: st.is_dir,
        ea_size: 0,
    }
}

impl Connection {
    /// The open a request names, checked against its session and tree.
    pub(crate) fn open_mut(
        &mut self,
        req: &Req<'_>,
        compound: &Compound,
        id: FileId,
    ) -> Result<&mut Open, NtStatus> {
        let id = self.file_id(id, compound)?;
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        match session.opens.get_mut(&id.volatile) {
            Some(o) if o.file_id == id && o.tree_id == req.tree_id => Ok(o),
            _ => Err(status::FILE_CLOSED),
        }
    }
}
