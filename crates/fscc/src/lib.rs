//! MS-FSCC information classes as an SMB2 server sends and receives them
//! (QUERY_DIRECTORY, QUERY_INFO, SET_INFO), and a self-relative security
//! descriptor (MS-DTYP 2.4.6) derived from POSIX ownership and mode.
//!
//! Pure encoding and decoding: no I/O, no state.

pub mod attr;
pub mod class;
pub mod descriptor;
mod dir;
pub mod ea;
mod error;
mod file_info;
mod fs_info;
pub mod notify;
pub mod quota;
mod security;
mod set_info;
mod wire;

pub use dir::DirWriter;
pub use error::InfoError;
pub use file_info::{
    encode_file_id_info, encode_file_info, min_file_info_size, query_file_info, QueryContext,
    QueryOutput,
};
pub use fs_info::{encode_fs_info, min_fs_info_size, query_fs_info, FsInfo, DEFAULT_FS_ATTRIBUTES};
pub use security::{access, additional_info, security_descriptor};
pub use set_info::{
    decode_basic, decode_disposition, decode_rename, decode_rename_ex, decode_u32, decode_u64,
    BasicInfo, RenameInfo, FILE_RENAME_POSIX_SEMANTICS, FILE_RENAME_REPLACE_IF_EXISTS,
};

/// FileSystemAttributes flags and device values for [`FsInfo`].
pub mod fs_attr {
    pub use crate::fs_info::{
        FILE_CASE_PRESERVED_NAMES, FILE_CASE_SENSITIVE_SEARCH, FILE_DEVICE_DISK,
        FILE_DEVICE_IS_MOUNTED, FILE_FILE_COMPRESSION, FILE_NAMED_STREAMS, FILE_PERSISTENT_ACLS,
        FILE_READ_ONLY_VOLUME, FILE_SUPPORTS_BLOCK_REFCOUNTING, FILE_SUPPORTS_EXTENDED_ATTRIBUTES,
        FILE_SUPPORTS_HARD_LINKS, FILE_SUPPORTS_OBJECT_IDS, FILE_SUPPORTS_OPEN_BY_FILE_ID,
        FILE_SUPPORTS_REPARSE_POINTS, FILE_SUPPORTS_SPARSE_FILES, FILE_UNICODE_ON_DISK,
        FILE_VC_QUOTA_ENFORCE, FILE_VC_QUOTA_TRACK, FILE_VOLUME_QUOTAS,
    };
}

/// What the server knows about one file, in Windows terms (times are FILETIME).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileInfo {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub attributes: u32,
    pub file_id: u64,
    pub nlink: u32,
    pub delete_pending: bool,
    pub is_dir: bool,
    pub ea_size: u32,
}
