//! What a QUERY_INFO needs of the filesystem: the open's stat, and its
//! streams, its filesystem's figures or its security descriptor. Where
//! that is not in memory, one call ([`CallOp::Look`](crate::CallOp))
//! gathers it, and the query runs again with it.

use std::sync::Arc;

use copyless_fscc::descriptor::Descriptor;
use copyless_proto::status::NtStatus;
use copyless_vfs::{FileHandle, FileStat, FsStat, Vfs};

use crate::handlers::vfs_status;
use crate::security;

/// What a query asks beyond memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The open's stat (and attributes).
    Stat,
    /// Its stat and its alternate data streams.
    Streams,
    /// The figures of the share's filesystem.
    Fs,
    /// Its stat and its security descriptor, stored or made from its
    /// mode.
    Security,
}

/// The call: `part` of the object open as `handle`.
#[derive(Debug)]
pub struct Look {
    pub(crate) handle: Arc<FileHandle>,
    pub(crate) part: Part,
}

/// What a [`Look`] found.
#[derive(Debug, Default)]
pub struct Looked {
    pub(crate) stat: Option<FileStat>,
    pub(crate) streams: Vec<(String, u64)>,
    pub(crate) fs: Option<FsStat>,
    pub(crate) descriptor: Option<Descriptor>,
}

impl Look {
    /// Gathers it through `vfs`, blocking.
    pub(crate) fn perform(&self, vfs: &dyn Vfs) -> Result<Looked, NtStatus> {
        gather(vfs, &self.handle, self.part)
    }
}

/// Gathers `part` of the object open as `h` through `vfs`, blocking.
pub(crate) fn gather(vfs: &dyn Vfs, h: &FileHandle, part: Part) -> Result<Looked, NtStatus> {
    let stat = || vfs.stat(h).map_err(|e| vfs_status(&e));
    let mut looked = Looked::default();
    match part {
        Part::Stat => looked.stat = Some(stat()?),
        Part::Streams => {
            looked.stat = Some(stat()?);
            looked.streams = vfs.streams(h).map_err(|e| vfs_status(&e))?;
        }
        Part::Fs => looked.fs = Some(vfs.fs_stat().map_err(|e| vfs_status(&e))?),
        Part::Security => {
            let st = stat()?;
            looked.descriptor = Some(security::effective(vfs, h, &st)?);
            looked.stat = Some(st);
        }
    }
    Ok(looked)
}
