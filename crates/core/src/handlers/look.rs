//! What a QUERY_INFO (or a CLOSE asking for attributes back) needs of the
//! filesystem: the open's stat, and its streams, its extended attributes,
//! its filesystem's figures or its security descriptor. Where that is not in memory, one call
//! ([`CallOp::Look`]) gathers it, and the request runs again with it.

use std::sync::Arc;

use copyless_fscc::descriptor::Descriptor;
use copyless_proto::status::NtStatus;
use copyless_vfs::{Ea, FileHandle, FileStat, FsStat, Identity, Quota, Vfs};

use crate::conn::connection::Reply;
use crate::conn::waiting::Wait;
use crate::handlers::{vfs_status, Then};
use crate::intent::CallOp;
use crate::open::FileOpen;
use crate::security;

/// Whether `part` of open `f` is in memory: the stat of an open file
/// of a local filesystem is; its streams and descriptor (extended
/// attributes, which may be a block on disk away), the filesystem's
/// figures and whatever another filesystem holds are not.
pub(crate) fn looks_in_place(f: &FileOpen, part: &Part) -> bool {
    matches!(part, Part::Stat) && f.vfs.data_fd(&f.handle).is_some()
}

/// `part` of open `f` for a request: what its call brought back
/// (`looked`, on the run after it), else gathered here where it is in
/// memory; else None, the call set on `reply`, to run the request again
/// as `then` says.
pub(crate) fn here_or_by_call(
    f: &FileOpen,
    part: Part,
    looked: Option<Result<Box<Looked>, NtStatus>>,
    reply: &mut Reply,
    then: impl FnOnce() -> Then,
) -> Option<Result<Looked, NtStatus>> {
    match looked {
        Some(looked) => Some(looked.map(|l| *l)),
        None if looks_in_place(f, &part) => Some(gather(f.vfs.as_ref(), &f.handle, &part)),
        None => {
            reply.wait = Some(Wait::Call {
                vfs: f.vfs.clone(),
                op: CallOp::Look(Look {
                    handle: f.handle.clone(),
                    part,
                }),
                then: then(),
                mark: None,
            });
            None
        }
    }
}

/// What a query asks beyond memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    /// The open's stat (and attributes).
    Stat,
    /// Its stat and its alternate data streams.
    Streams,
    /// The figures of the share's filesystem, and the quota of whoever
    /// opened it.
    Fs,
    /// Users' disk quota entries (handlers/quota.rs).
    Quotas(Box<QuotaAsk>),
    /// Its stat and its security descriptor, stored or made from its
    /// mode.
    Security,
    /// Its stat and its extended attributes.
    Eas,
}

/// Which quota entries a query reads, and as whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotaAsk {
    pub(crate) who: Identity,
    pub(crate) what: QuotaUsers,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QuotaUsers {
    /// The entries of these uids, in this order.
    These(Vec<u32>),
    /// The entries from uid `from` on, in uid order, at most `most`.
    From { from: u32, most: usize },
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
    pub(crate) eas: Vec<Ea>,
    /// The quota of whoever opened it ([`Part::Fs`], where the
    /// filesystem keeps quotas).
    pub(crate) quota: Option<Quota>,
    /// Users' entries, with their uids ([`Part::Quotas`]).
    pub(crate) quotas: Vec<(u32, Quota)>,
}

impl Look {
    /// Gathers it through `vfs`, blocking.
    pub(crate) fn perform(&self, vfs: &dyn Vfs) -> Result<Looked, NtStatus> {
        gather(vfs, &self.handle, &self.part)
    }
}

/// Gathers `part` of the object open as `h` through `vfs`, blocking.
pub(crate) fn gather(vfs: &dyn Vfs, h: &FileHandle, part: &Part) -> Result<Looked, NtStatus> {
    let stat = || vfs.stat(h).map_err(|e| vfs_status(&e));
    let mut looked = Looked::default();
    match part {
        Part::Stat => looked.stat = Some(stat()?),
        Part::Streams => {
            looked.stat = Some(stat()?);
            looked.streams = vfs.streams(h).map_err(|e| vfs_status(&e))?;
        }
        Part::Eas => {
            looked.stat = Some(stat()?);
            looked.eas = vfs.eas(h).map_err(|e| vfs_status(&e))?;
        }
        Part::Fs => {
            let fs = vfs.fs_stat().map_err(|e| vfs_status(&e))?;
            // A user's own entry, which they may read themselves, where
            // limits hold; a failure leaves the volume's figures as they
            // are.
            if let (true, Identity::Unix(ids)) = (fs.quotas.enforced, h.who()) {
                looked.quota = vfs.quota(h.who(), ids.uid).ok();
            }
            looked.fs = Some(fs);
        }
        Part::Quotas(ask) => {
            let fs = |e| vfs_status(&e);
            // Where none are kept, nothing is answered, even for SIDs that
            // name nobody (MS-SMB2 3.3.5.20.4).
            if !vfs.fs_stat().map_err(fs)?.quotas.tracked {
                return Err(copyless_proto::status::NOT_SUPPORTED);
            }
            looked.quotas = match &ask.what {
                QuotaUsers::These(uids) => uids
                    .iter()
                    .map(|&uid| Ok((uid, vfs.quota(&ask.who, uid).map_err(fs)?)))
                    .collect::<Result<_, NtStatus>>()?,
                &QuotaUsers::From { from, most } => {
                    let mut found = Vec::new();
                    let mut next = Some(from);
                    while let (Some(from), true) = (next, found.len() < most) {
                        let Some((uid, quota)) = vfs.next_quota(&ask.who, from).map_err(fs)? else {
                            break;
                        };
                        found.push((uid, quota));
                        next = uid.checked_add(1);
                    }
                    found
                }
            };
        }
        Part::Security => {
            let st = stat()?;
            looked.descriptor = Some(security::effective(vfs, h, &st)?);
            looked.stat = Some(st);
        }
    }
    Ok(looked)
}
