//! What a SET_INFO changes on the filesystem, or checks there before it
//! changes the server's tables: made by one call
//! ([`CallOp::Change`](crate::CallOp)) where it may wait for a disk,
//! after which the request runs again with its result.

use std::sync::Arc;

use copyless_proto::status::{self, NtStatus};
use copyless_vfs::{attr, Ea, FileHandle, Identity, SetTimes, Vfs};

use crate::handlers::vfs_status;
use crate::names::hiding::NameRules;

/// The change (or check).
#[derive(Debug, Clone)]
pub(crate) enum Alter {
    /// FileBasicInformation: the attributes to set, if any, then the
    /// times.
    Basic {
        attributes: Option<u32>,
        times: SetTimes,
    },
    /// FileEndOfFileInformation.
    Len(u64),
    /// FileAllocationInformation: below the end of file it cuts the file
    /// there.
    Allocation(u64),
    /// FileDispositionInformation asking for deletion: the object is not
    /// read-only, and a folder is empty.
    Deletable,
    /// FileFullEaInformation: EAs to set or (with empty values) remove.
    Eas(Vec<Ea>),
    /// Users' quota limits (uid, soft, hard), set by the server for a
    /// quota administrator (handlers/quota.rs).
    Quotas(Vec<(u32, u64, u64)>),
}

/// The call: `alter` on the object open as `handle`, in a share with the
/// rules for names `names`.
#[derive(Debug)]
pub struct Change {
    pub(crate) handle: Arc<FileHandle>,
    pub(crate) alter: Alter,
    pub(crate) names: Arc<NameRules>,
}

impl Change {
    /// Makes it through `vfs`, blocking.
    pub(crate) fn perform(&self, vfs: &dyn Vfs) -> Result<(), NtStatus> {
        make(vfs, &self.handle, &self.alter, &self.names)
    }
}

/// Makes `alter` on the object open as `h` through `vfs`, blocking.
pub(crate) fn make(
    vfs: &dyn Vfs,
    h: &FileHandle,
    alter: &Alter,
    names: &NameRules,
) -> Result<(), NtStatus> {
    let fs = |e| vfs_status(&e);
    match *alter {
        Alter::Basic { attributes, times } => {
            if let Some(a) = attributes {
                vfs.set_attributes(h, a).map_err(fs)?;
            }
            vfs.set_times(h, &times).map_err(fs)
        }
        Alter::Eas(ref eas) => vfs.set_eas(h, eas).map_err(fs),
        Alter::Quotas(ref limits) => limits.iter().try_for_each(|&(uid, soft, hard)| {
            vfs.set_quota(&Identity::Server, uid, soft, hard)
                .map_err(fs)
        }),
        Alter::Len(len) => vfs.set_len(h, len).map_err(fs),
        Alter::Allocation(len) => {
            if len < vfs.stat(h).map_err(fs)?.size {
                vfs.set_len(h, len).map_err(fs)
            } else {
                vfs.set_allocation(h, len).map_err(fs)
            }
        }
        Alter::Deletable => {
            if vfs.stat(h).map_err(fs)?.attributes & attr::READONLY != 0 {
                return Err(status::CANNOT_DELETE);
            }
            if h.is_dir && !names.may_remove_folder(vfs, h).map_err(fs)? {
                return Err(status::DIRECTORY_NOT_EMPTY);
            }
            Ok(())
        }
    }
}

/// Whether `alter` of the object open as `h` is made where the request
/// is handled: the stat of an open file of a local filesystem is in
/// memory, so checking that a file may be deleted is; a folder's
/// entries, attributes (extended attributes, which may be a block on
/// disk away), times, sizes and whatever another filesystem holds are
/// not.
pub(crate) fn in_place(vfs: &dyn Vfs, h: &FileHandle, alter: &Alter) -> bool {
    matches!(alter, Alter::Deletable) && !h.is_dir && vfs.data_fd(h).is_some()
}
