//! CREATE (MS-SMB2 3.3.5.9): opening and creating files, directories and
//! pipes, with share-mode and access checks.

use std::sync::Arc;

use copyless_fscc::descriptor::Descriptor;
use copyless_fscc::notify;
use copyless_proto::create_context::{self as cc, CreateContext};
use copyless_proto::lease::{self, LeaseContext};
use copyless_proto::messages::{self, CreateRequest, FileId, OPLOCK_LEVEL_LEASE};
use copyless_proto::negotiate::{CAP_DIRECTORY_LEASING, DIALECT_210, DIALECT_300};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{utf16, Writer};
use copyless_vfs::{
    attr, CreateAction, Disposition, FileHandle, FileStat, Kind, OpenRequest, Opened, Vfs,
    VfsError, VfsResult,
};

use crate::access::{self, map_generic};
use crate::audit::{AuditKind, Audited};
use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::tree::TreeKind;
use crate::conn::waiting::{Awaited, Hold, Wait};
use crate::durable;
use crate::env::Env;
use crate::file_table::{stream_id, AppOpen, FileKey, LeaseAsk, OpenRef, OplockRequest};
use crate::handlers::info::eas_to_set;
use crate::handlers::quota;
use crate::handlers::{file_times, vfs_status, Then};
use crate::intent::{CallOp, OpenCall, WatchCall};
use crate::leases;
use crate::open::{FileOpen, Open, OpenKind};
use crate::quota::OpenSlot;
use crate::rights;
use crate::security::{self, Caller, OwnedCaller};
use crate::server::{Server, Share};

pub const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
pub const FILE_WRITE_THROUGH: u32 = 0x0000_0002;
pub const FILE_SEQUENTIAL_ONLY: u32 = 0x0000_0004;
pub const FILE_NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
/// Options that must be zero (MS-SMB2 2.2.13).
const OPTIONS_RESERVED: u32 = 0xFF00_0000;
/// FILE_NO_COMPRESSION: what is made is not compressed, whatever its
/// folder says.
const FILE_NO_COMPRESSION: u32 = 0x0000_8000;
/// Options Windows refuses with NOT_SUPPORTED (MS-SMB2 2.2.13):
/// FILE_CREATE_TREE_CONNECTION, FILE_OPEN_BY_FILE_ID and
/// FILE_RESERVE_OPFILTER.
const OPTIONS_NOT_SUPPORTED: u32 = 0x0010_2080;
/// Access bits MS-SMB2 3.3.5.9 says fail with ACCESS_DENIED.
const ACCESS_RESERVED: u32 = 0x0CE0_FE00;
/// FILE_ATTRIBUTE_* bits a CREATE may carry (MS-FSCC 2.6,
/// FILE_ATTRIBUTE_VALID_FLAGS): VOLUME, DEVICE, INTEGRITY_STREAM and the
/// bits above are INVALID_PARAMETER on Windows.
const ATTRIBUTES_VALID: u32 = 0x0000_7FB7;

const SUPERSEDE: u32 = 0;
pub(crate) const OPEN: u32 = 1;
const CREATE: u32 = 2;
const OPEN_IF: u32 = 3;
const OVERWRITE: u32 = 4;
const OVERWRITE_IF: u32 = 5;

const ACTION_SUPERSEDED: u32 = 0;
pub(crate) const ACTION_OPENED: u32 = 1;
const ACTION_CREATED: u32 = 2;
const ACTION_OVERWRITTEN: u32 = 3;

/// Where the first open of a CREATE comes from.
enum First {
    /// The handler makes it.
    Make,
    /// The engine is to make it (see [`opens_by_call`]).
    Call,
    /// The engine made it: its result.
    Made(Made),
}

/// What the engine made of a CREATE's call.
#[derive(Debug)]
pub enum Made {
    /// The open, and on a share with stored descriptors what the caller
    /// may do with an object that was there ([`Judging`]); `write` when
    /// it was asked to open for writing.
    Opened {
        opened: VfsResult<Opened>,
        judged: Option<Result<rights::Granted, NtStatus>>,
        write: bool,
    },
    /// A new object with what it inherits ([`Inheriting`]); None when
    /// the name was taken meanwhile.
    Inherited(Result<Option<Opened>, NtStatus>),
    /// A named stream opened or made ([`StreamOpening`]).
    Stream(Result<StreamMade, NtStatus>),
}

/// The open of what is there on a share with stored descriptors, made by
/// the engine as a call ([`CallOp::OpenJudged`]) together with what the
/// decision on the caller's rights reads of the filesystem: the object's
/// stored descriptor, its folder's, the kernel's answer where the mode
/// refuses (see `security::OpenedFacts`).
#[derive(Debug)]
pub struct Judging {
    open: OpenCall,
    caller: OwnedCaller,
    desired: u32,
    disposition: u32,
    tree: TreeRights,
}

impl Judging {
    /// The share path it opens.
    pub(crate) fn path(&self) -> &str {
        &self.open.path
    }

    /// Makes it through `vfs`, blocking.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> Made {
        let opened = vfs.open(&self.open.request());
        let judged = match &opened {
            Ok(o) if o.action != CreateAction::Created => {
                let caller = self.caller.caller(&self.open.who);
                let tree = &self.tree;
                Some(judge(vfs, &caller, o, self.desired, self.disposition, tree))
            }
            _ => None,
        };
        Made::Opened {
            opened,
            judged,
            write: self.open.write,
        }
    }
}

/// The making of a name that is not there on a share with stored
/// descriptors, by the engine as a call ([`CallOp::Inherit`]): its
/// folder's descriptor allows it, and what the new object inherits is
/// stored on it (see [`create_inheriting`]).
#[derive(Debug)]
pub struct Inheriting {
    open: OpenCall,
    caller: OwnedCaller,
    creator_sd: Option<Descriptor>,
}

impl Inheriting {
    /// The share path it makes.
    pub(crate) fn path(&self) -> &str {
        &self.open.path
    }

    /// Makes it through `vfs`, blocking.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> Made {
        let caller = self.caller.caller(&self.open.who);
        let req = self.open.request();
        Made::Inherited(create_inheriting(
            vfs,
            &req,
            &caller,
            self.creator_sd.as_ref(),
        ))
    }
}

/// The open of a named stream, made by the engine as a call
/// ([`CallOp::OpenStream`]): its file opened (or made, with what it
/// inherits, where the disposition allows), the caller's rights on the
/// file decided, the stream opened (or made) and looked at.
#[derive(Debug)]
pub struct StreamOpening {
    base: OpenCall,
    name: String,
    disposition: u32,
    desired: u32,
    caller: OwnedCaller,
    creator_sd: Option<Descriptor>,
    tree: TreeRights,
    read_only: bool,
}

impl StreamOpening {
    /// The share path of the stream's file.
    pub(crate) fn path(&self) -> &str {
        &self.base.path
    }

    /// Makes it through `vfs`, blocking.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> Made {
        let caller = self.caller.caller(&self.base.who);
        Made::Stream(make_stream(
            vfs,
            &self.base.request(),
            &self.name,
            self.disposition,
            self.desired,
            self.creator_sd.as_ref(),
            &self.tree,
            &caller,
            self.read_only,
        ))
    }
}

/// A named stream opened or made, before it is registered.
#[derive(Debug)]
pub struct StreamMade {
    opened: Opened,
    granted: u32,
    maximal: u32,
}

/// What became of the open of a CREATE.
enum Opening {
    Done(Outcome),
    /// It waits for the engine to make this call: an open, judged or
    /// not.
    Call(CallOp),
    /// What is there is opened and registered; its truncation, with
    /// these attributes (a file's; a stream has none of its own) and
    /// this allocation, is the engine's call.
    Overwrite(Outcome, Option<u32>, u64),
}

/// The truncation of what an OVERWRITE_IF or SUPERSEDE opened, made by
/// the engine as a call ([`CallOp::Overwrite`]) once the open is
/// registered, so that a conflicting open never sees data lost.
#[derive(Debug)]
pub struct Overwrite {
    opened: Opened,
    attrs: Option<u32>,
    allocation: u64,
}

impl Overwrite {
    /// Makes it through `vfs`, blocking: the object opened, with its new
    /// stat.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> (Opened, VfsResult<FileStat>) {
        let r = overwrite(vfs, &self.opened.handle, self.attrs, self.allocation);
        (self.opened, r)
    }
}

/// Empties the file or stream open as `h` and gives it `attrs` and the
/// `allocation` asked for (AlSi; a hint, as at a file's making): its new
/// stat.
fn overwrite(
    vfs: &dyn Vfs,
    h: &FileHandle,
    attrs: Option<u32>,
    allocation: u64,
) -> VfsResult<FileStat> {
    vfs.set_len(h, 0)?;
    if let Some(attrs) = attrs {
        vfs.set_attributes(h, attrs)?;
    }
    if allocation > 0 {
        let _ = vfs.set_allocation(h, allocation);
    }
    vfs.stat(h)
}

/// A CREATE whose open is made and registered, and what the rest of the
/// request needs of its first part.
pub(crate) struct Finishing {
    index: usize,
    share: Arc<Share>,
    /// The open is of a snapshot (read-only media).
    snapshot: bool,
    /// The open is of the quota file.
    quota_file: bool,
    id: u64,
    slot: OpenSlot,
    oplock: OplockRequest,
    durable_asked: durable::Asked,
    app_instance: Option<[u8; 16]>,
    stream: Option<String>,
    action: u32,
    granted: u32,
    maximal: u32,
    /// The registered open's file, which it leaves if the request ends
    /// before the open is made.
    key: FileKey,
}

/// The 8-byte value of the create context `name`, if sent; one of
/// another size is malformed.
fn u64_context(contexts: &[CreateContext<'_>], name: &[u8]) -> Result<Option<u64>, NtStatus> {
    contexts
        .iter()
        .find(|c| c.name == name)
        .map(|c| {
            c.data
                .try_into()
                .map(u64::from_le_bytes)
                .map_err(|_| status::INVALID_PARAMETER)
        })
        .transpose()
}

/// What every @GMT token holds: a name with it may name a snapshot.
pub(crate) const GMT_MARK: &str = "@GMT-";

/// The share as it was at `when` (FILETIME): its snapshot then, served
/// read only; OBJECT_NAME_NOT_FOUND where there is none, as Windows
/// answers a version it does not have.
fn at_snapshot(share: &Arc<Share>, when: u64) -> Result<Arc<Share>, NtStatus> {
    let snapshots = share
        .snapshots
        .as_ref()
        .ok_or(status::OBJECT_NAME_NOT_FOUND)?;
    let vfs = snapshots
        .at(when)
        .map_err(|e| vfs_status(&e))?
        .ok_or(status::OBJECT_NAME_NOT_FOUND)?;
    Ok(Arc::new(Share {
        name: share.name.clone(),
        vfs,
        read_only: true,
        path: share.path.clone(),
        comment: share.comment.clone(),
        names: share.names.clone(),
        owner: share.owner.clone(),
        access: share.access.clone(),
        audit: share.audit,
        snapshots: None,
        recycle: None,
    }))
}

/// Create contexts whose handling reaches nothing but memory.
pub(crate) const MEMORY_ONLY_CONTEXTS: [&[u8]; 5] =
    [cc::MXAC, cc::QFID, cc::RQLS, cc::DHNQ, cc::DH2Q];

/// Whether a CREATE leaves its open as a call to the engine: the open
/// is then all that may wait for a disk, and the request goes on from
/// its result, on the engine's loop, with nothing but memory (the object
/// just opened is in the kernel's cache). So not when anything else may
/// reach the disk: a descriptor sent with it. A named stream is opened,
/// or made with its file, by one call ([`StreamOpening`]). An allocation
/// asked for (AlSi) is made by the call that makes or empties the file.
/// Where descriptors are stored, the call also reads what decides the
/// caller's rights on what is there ([`Judging`]), and a name that is
/// not there is made by a second call, which stores what the new object
/// inherits ([`Inheriting`]). One that may make its
/// object does so only if it may (else its one-walk open is not made);
/// the name stays marked as the server's own change (local.rs) until the
/// call is made. The truncation of what is there (OVERWRITE,
/// OVERWRITE_IF, SUPERSEDE; a file or a stream) is a second call, once the open is
/// registered, unless the filesystem keeps its data in memory, where it
/// waits for nothing. A parked durable open found in the way when the
/// request runs again with the open is closed, and the request runs
/// once more, as an inline open would.
pub(crate) fn opens_by_call(
    cr: &CreateRequest<'_>,
    contexts: &[CreateContext<'_>],
    path: &str,
    stream: &Option<String>,
    read_only: bool,
) -> bool {
    let disposition_allows = match cr.create_disposition {
        OPEN | OVERWRITE => true,
        CREATE | OPEN_IF | SUPERSEDE | OVERWRITE_IF => may_create(cr, path, read_only).is_ok(),
        _ => false,
    };
    // A stream's open makes no allocation.
    let allocates = stream.is_none();
    // A snapshot is found by reading its folder first.
    disposition_allows
        && !path.contains(GMT_MARK)
        && contexts
            .iter()
            .all(|c| MEMORY_ONLY_CONTEXTS.contains(&c.name) || (allocates && c.name == cc::ALSI))
}

struct Outcome {
    opened: Opened,
    action: u32,
    /// Access granted, and the most that could have been (MxAc).
    granted: u32,
    maximal: u32,
}

/// What the tree allows an open, and whether the client asked to hear
/// its maximal access (MxAc).
#[derive(Debug, Clone, Copy)]
struct TreeRights {
    maximal: u32,
    maximal_wanted: bool,
}

impl Connection {
    /// The lease a CREATE asks for (MS-SMB2 3.3.5.9.8, .11): with
    /// OplockLevel LEASE on SMB 2.1 and later, an RqLs context whose key
    /// is not all zeros; version 2 only on SMB 3. A context of another
    /// size is malformed.
    fn lease_asked(
        &self,
        cr: &CreateRequest<'_>,
        contexts: &[CreateContext<'_>],
    ) -> Result<Option<LeaseAsk>, NtStatus> {
        if cr.oplock_level != OPLOCK_LEVEL_LEASE || self.dialect < DIALECT_210 {
            return Ok(None);
        }
        let Some(c) = contexts.iter().find(|c| c.name == cc::RQLS) else {
            return Ok(None);
        };
        let l = LeaseContext::parse(c.data).map_err(|_| status::INVALID_PARAMETER)?;
        if l.key == [0; 16] || (l.v2.is_some() && self.dialect < DIALECT_300) {
            return Ok(None);
        }
        // The parent's key counts only when the flag says it is set.
        let parent_set = l.flags & lease::FLAG_PARENT_LEASE_KEY_SET != 0;
        Ok(Some(LeaseAsk {
            id: (self.client_guid, l.key),
            state: l.state,
            v2: l
                .v2
                .map(|(parent, epoch)| (if parent_set { parent } else { [0; 16] }, epoch)),
        }))
    }

    /// `opened` is the result of the open call a first run of the
    /// request made (see [`opens_by_call`]); None when it runs for the
    /// first time.
    pub(crate) fn create(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        _env: &mut dyn Env,
        made: Option<Made>,
    ) -> Result<NtStatus, NtStatus> {
        let mut cr = CreateRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        // The quota file (handlers/quota.rs) is the share's folder opened
        // for its quotas alone: whatever the request asks, nothing of the
        // folder reaches the open.
        let quota_file = quota::names_quota_file(cr.name);
        if quota_file {
            cr.desired_access = access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE;
            cr.create_options = FILE_DIRECTORY_FILE;
            cr.oplock_level = 0;
        }
        let contexts = cc::parse_chain(cr.contexts).map_err(|_| status::INVALID_PARAMETER)?;
        let durable_asked = durable::asked(&contexts, self.dialect)?;
        if let Some(reclaim) = durable::reclaim(&durable_asked, &contexts, cr.name)? {
            return self.reconnect(req, compound, reply, w, reclaim);
        }
        let app_instance = match durable_asked {
            durable::Asked::V2(_) => durable::app_instance(&contexts)?,
            _ => None,
        };
        if let Some(app) = app_instance {
            let token = self.next_hold_token();
            if let Some(key) = self.end_app_instance(req, cr.name, app, token)? {
                reply.hold = Some(Hold {
                    token,
                    key,
                    awaited: Awaited::Breaks,
                });
                return Ok(status::PENDING);
            }
        }
        if cr.impersonation_level > 3 {
            return Err(status::BAD_IMPERSONATION_LEVEL);
        }
        if cr.create_disposition > OVERWRITE_IF
            || cr.create_options & OPTIONS_RESERVED != 0
            || cr.share_access & !7 != 0
            || (cr.create_options & FILE_DIRECTORY_FILE != 0
                && cr.create_options & FILE_NON_DIRECTORY_FILE != 0)
        {
            return Err(status::INVALID_PARAMETER);
        }
        // Nothing asked for is refused (MS-FSA 2.1.5.1).
        if cr.desired_access == 0
            || cr.desired_access & ACCESS_RESERVED != 0
            || !access::is_valid(cr.desired_access)
        {
            return Err(status::ACCESS_DENIED);
        }
        // The SACL needs SeSecurityPrivilege, which no user of this
        // server holds.
        if cr.desired_access & access::ACCESS_SYSTEM_SECURITY != 0 {
            return Err(status::PRIVILEGE_NOT_HELD);
        }
        // Checked after the access mask, as Windows does.
        if cr.file_attributes & !ATTRIBUTES_VALID != 0
            || (cr.file_attributes & attr::TEMPORARY != 0
                && cr.create_options & FILE_DIRECTORY_FILE != 0)
        {
            return Err(status::INVALID_PARAMETER);
        }
        if cr.create_options & OPTIONS_NOT_SUPPORTED != 0 {
            return Err(status::NOT_SUPPORTED);
        }
        // Context names are at least four bytes (smbtorture
        // smb2.create.blob).
        if contexts.iter().any(|c| c.name.len() < 4) {
            return Err(status::INVALID_PARAMETER);
        }
        // The time of a previous version asked for (MS-SMB2 2.2.13.2.7).
        let twrp = u64_context(&contexts, cc::TWRP)?;
        let allocation = u64_context(&contexts, cc::ALSI)?;
        // The descriptor a new object is to have (MS-SMB2 2.2.13.2.2); an
        // open of an existing one ignores it.
        let creator_sd = contexts
            .iter()
            .find(|c| c.name == cc::SECD)
            .map(|c| Descriptor::parse(c.data).map_err(|e| e.ntstatus()))
            .transpose()?;
        // The EAs a new or emptied file is to have (ExtA, MS-SMB2
        // 2.2.13.2.1) are checked before anything is made.
        if let Some(c) = contexts.iter().find(|c| c.name == cc::EXTA) {
            eas_to_set(c.data)?;
        }
        let lease = self.lease_asked(&cr, &contexts)?;
        let server = self.server.clone();
        let mut oplock = OplockRequest {
            level: if cr.oplock_level == OPLOCK_LEVEL_LEASE {
                0
            } else {
                cr.oplock_level
            },
            connection: self.id(),
            session: req.session_id,
            token: self.next_hold_token(),
            truncating: matches!(cr.create_disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF),
            created: false,
            granted: 0,
            breaks: Vec::new(),
            waited_on: None,
            lease,
            lease_granted: None,
            lease_breaks: Vec::new(),
            retry: self.retrying,
            purge: Vec::new(),
            watched_changed: false,
            dir_leasing: self.server_capabilities & CAP_DIRECTORY_LEASING != 0,
        };
        let connection_opens: usize = self.sessions.values().map(|s| s.opens.len()).sum();
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        let limits = server.limits();
        if session.opens.len() as u32 >= limits.max_open_files
            || connection_opens as u32 >= limits.max_open_files_per_connection
        {
            return Err(status::INSUFFICIENT_RESOURCES);
        }
        let slot = server
            .open_quota
            .acquire(&session.user)
            .ok_or(status::INSUFFICIENT_RESOURCES)?;
        let tree = session
            .trees
            .get(&req.tree_id)
            .ok_or(status::NETWORK_NAME_DELETED)?;
        let granted = map_generic(cr.desired_access, tree.maximal_access);
        let (index, share) = match &tree.kind {
            TreeKind::Ipc => {
                let name = utf16::decode(cr.name).map_err(|_| status::OBJECT_NAME_INVALID)?;
                if !copyless_rpc::is_known_pipe(&name) {
                    return Err(status::OBJECT_NAME_NOT_FOUND);
                }
                let pipe = copyless_rpc::Pipe::new(
                    &name,
                    &server.config.server_name,
                    share_list(&server, session),
                )
                .with_comment(&server.config.server_comment);
                let id = server.next_id();
                let file_id = FileId {
                    persistent: id,
                    volatile: id,
                };
                session.opens.insert(
                    id,
                    Open {
                        file_id,
                        tree_id: req.tree_id,
                        access: granted,
                        kind: OpenKind::Pipe(pipe),
                        _slot: slot,
                    },
                );
                compound.file_id = Some(file_id);
                let times = messages::FileTimes {
                    attributes: attr::NORMAL,
                    ..Default::default()
                };
                messages::write_create_response(w, 0, ACTION_OPENED, &times, file_id, &[]);
                return Ok(status::SUCCESS);
            }
            TreeKind::Disk { index, share } => (*index, share.clone()),
        };
        let crate::names::path::CreateName {
            path,
            stream,
            data_type,
        } = if quota_file {
            crate::names::path::CreateName {
                path: String::new(),
                stream: None,
                data_type: false,
            }
        } else {
            crate::names::path::from_smb_with_stream(cr.name)?
        };
        // A previous version, by its context or by an @GMT token in the
        // name (MS-SMB2 3.3.5.9.6): the share as it was then, read only.
        let (path, token) = crate::names::path::without_gmt_token(path);
        let when = twrp.or(token);
        let share = match when {
            Some(when) => at_snapshot(&share, when)?,
            None => share,
        };
        // A user may write to a read-only share (write_users): the tree
        // says.
        let read_only = tree.read_only;
        let snapshot = when.is_some();
        share.names.check_path(&path)?;
        if !share.audit.is_empty() {
            let named = match &stream {
                Some(stream) => format!("{path}:{stream}"),
                None => path.clone(),
            };
            reply.audit = Some(Audited::new(AuditKind::Open, named));
        }
        // A lease key names one file: asked for with another, the open is
        // refused before anything is made (MS-SMB2 3.3.5.9.8; the table
        // checks again as it registers the open).
        if let Some(ask) = &lease {
            let stream = stream_id(stream.as_deref());
            if server
                .files()
                .lease_is_for_another(&ask.id, index, &path, stream)
            {
                return Err(status::INVALID_PARAMETER);
            }
        }
        let delete_on_close = cr.create_options & FILE_DELETE_ON_CLOSE != 0;
        if delete_on_close && granted & access::DELETE == 0 {
            return Err(status::INVALID_PARAMETER);
        }
        if read_only
            && (granted & access::MODIFYING != 0
                || matches!(cr.create_disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF))
        {
            return Err(status::ACCESS_DENIED);
        }
        // A snapshot is a write-protected volume: opened for writing as
        // one may be, but nothing is made, emptied, written or deleted
        // there (smbtorture smb2.twrp.write).
        if snapshot
            && (delete_on_close
                || matches!(
                    cr.create_disposition,
                    CREATE | SUPERSEDE | OVERWRITE | OVERWRITE_IF
                ))
        {
            return Err(status::MEDIA_WRITE_PROTECTED);
        }
        // What is not there is not made there either.
        let read_only = read_only || snapshot;
        // A data stream, even the unnamed one named as `dir::$DATA`, is
        // no directory (MS-FSA 2.1.5.1).
        let kind = if cr.create_options & FILE_DIRECTORY_FILE != 0 {
            if stream.is_some() || data_type {
                return Err(status::NOT_A_DIRECTORY);
            }
            Kind::Directory
        } else if cr.create_options & FILE_NON_DIRECTORY_FILE != 0 || data_type {
            Kind::NonDirectory
        } else {
            Kind::Any
        };
        let id = server.next_id();
        let caller = Caller {
            config: &server.config,
            anonymous: session.anonymous,
            who: &tree.who,
        };
        let vfs = share.vfs.as_ref();
        let rights = TreeRights {
            maximal: tree.maximal_access,
            maximal_wanted: contexts.iter().any(|c| c.name == cc::MXAC),
        };
        let first = match made {
            Some(m) => First::Made(m),
            None if opens_by_call(&cr, &contexts, &path, &stream, read_only) => First::Call,
            None => First::Make,
        };
        // Whatever the open creates, truncates or stamps there is the
        // server's own change (local.rs).
        let own = server.own_changes().begin(index, &[&path]);
        let outcome = match &stream {
            None => open_or_create(
                &server,
                index,
                vfs,
                &path,
                &cr,
                creator_sd.as_ref(),
                allocation.unwrap_or(0),
                kind,
                &rights,
                &caller,
                read_only,
                id,
                &mut oplock,
                first,
            ),
            Some(name) => open_or_create_stream(
                &server,
                index,
                vfs,
                &path,
                name,
                &cr,
                creator_sd.as_ref(),
                &rights,
                &caller,
                read_only,
                id,
                &mut oplock,
                first,
            ),
        };
        let outcome = match (outcome, oplock.waited_on) {
            // Oplocks of other opens are being broken: the request runs
            // again once their holders answered (or closed).
            (Err(status::PENDING), Some(key)) => {
                self.send_breaks(oplock.breaks);
                self.send_lease_breaks(oplock.lease_breaks);
                reply.hold = Some(Hold {
                    token: oplock.token,
                    key,
                    awaited: Awaited::Breaks,
                });
                return Ok(status::PENDING);
            }
            // Disconnected durable opens stood in the way: they are
            // closed, and the open runs again as if they never were.
            (Err(e), _) if !oplock.purge.is_empty() => {
                if self.purge_parked(&oplock.purge) {
                    return self.create(req, compound, reply, w, _env, None);
                }
                return Err(e);
            }
            (outcome, _) => outcome?,
        };
        let (outcome, overwrite) = match outcome {
            Opening::Done(outcome) => (outcome, None),
            Opening::Overwrite(outcome, attrs, allocation) => (outcome, Some((attrs, allocation))),
            Opening::Call(op) => {
                reply.wait = Some(Wait::Call {
                    vfs: share.vfs.clone(),
                    op,
                    then: Then::Create {
                        msg: req.msg.to_vec(),
                        retrying: self.retrying,
                    },
                    mark: Some(own),
                });
                return Ok(status::SUCCESS);
            }
        };
        drop(own);
        let Outcome {
            opened,
            action,
            granted,
            maximal,
        } = outcome;
        let finishing = Finishing {
            index,
            share: share.clone(),
            snapshot,
            quota_file,
            id,
            slot,
            oplock,
            durable_asked,
            app_instance,
            stream,
            action,
            granted,
            maximal,
            key: file_key(index, &opened),
        };
        if let Some((attrs, allocation)) = overwrite {
            let overwrite = Overwrite {
                opened,
                attrs,
                allocation,
            };
            reply.wait = Some(Wait::Call {
                vfs: share.vfs.clone(),
                op: CallOp::Overwrite(Box::new(overwrite)),
                then: Then::Overwrite {
                    msg: req.msg.to_vec(),
                    finishing: Box::new(finishing),
                },
                mark: Some(server.own_changes().begin(index, &[&path])),
            });
            return Ok(status::SUCCESS);
        }
        self.finish_create(req, compound, reply, w, &cr, &contexts, opened, finishing)
    }

    /// The rest of a CREATE once its open is made and registered (and
    /// what it opened emptied, if it overwrites): the open is kept, and
    /// the reply made. A folder leased for the first time is watched for
    /// local changes before the reply goes, by a call.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_create(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        cr: &CreateRequest<'_>,
        contexts: &[CreateContext<'_>],
        opened: Opened,
        finishing: Finishing,
    ) -> Result<NtStatus, NtStatus> {
        let Finishing {
            index,
            share,
            snapshot,
            quota_file,
            id,
            slot,
            oplock,
            durable_asked,
            app_instance,
            stream,
            action,
            granted,
            maximal,
            key,
        } = finishing;
        let server = self.server.clone();
        // A file made or emptied gets the EAs the request gives; an open
        // of what is there ignores them (MS-FSA 2.1.5.1.2.1). A CREATE
        // with them is never one made in place (`may_block`).
        let made_anew = matches!(
            action,
            ACTION_CREATED | ACTION_OVERWRITTEN | ACTION_SUPERSEDED
        );
        if let (true, None, Some(c)) = (
            made_anew,
            &stream,
            contexts.iter().find(|c| c.name == cc::EXTA),
        ) {
            let set = eas_to_set(c.data).and_then(|eas| {
                share
                    .vfs
                    .set_eas(&opened.handle, &eas)
                    .map_err(|e| vfs_status(&e))
            });
            if let Err(e) = set {
                server.files().unregister(&key, id, false);
                return Err(e);
            }
        }
        // What is made in a compressed folder is compressed, unless the
        // request says not (FILE_NO_COMPRESSION); only then is there
        // anything to do (a flag of the new inode, in memory).
        if action == ACTION_CREATED
            && cr.create_options & FILE_NO_COMPRESSION != 0
            && opened.stat.attributes & attr::COMPRESSED != 0
        {
            let _ = share.vfs.set_compression(&opened.handle, false);
        }
        let client_guid = self.client_guid;
        let delete_on_close = cr.create_options & FILE_DELETE_ON_CLOSE != 0;
        let Some(session) = self.sessions.get_mut(&req.session_id) else {
            // The session ended while the open was made.
            server.files().unregister(&key, id, false);
            return Err(status::USER_SESSION_DELETED);
        };
        let created = (action == ACTION_CREATED).then(|| (opened.path.clone(), opened.stat.is_dir));
        if let Some(audited) = &mut reply.audit {
            audited.kind = match action {
                ACTION_CREATED => AuditKind::Create,
                ACTION_OVERWRITTEN | ACTION_SUPERSEDED => AuditKind::Write,
                _ => AuditKind::Open,
            };
            // The name as it is on disk, whatever case the client used.
            if stream.is_none() {
                audited.path.clone_from(&opened.path);
            }
        }
        let file_id = FileId {
            persistent: id,
            volatile: id,
        };
        let mut reply_contexts: Vec<(&[u8], Vec<u8>)> = Vec::new();
        for CreateContext { name, .. } in contexts {
            if *name == cc::MXAC {
                let mut d = Vec::with_capacity(8);
                d.extend_from_slice(&0u32.to_le_bytes());
                d.extend_from_slice(&maximal.to_le_bytes());
                reply_contexts.push((cc::MXAC, d));
            } else if *name == cc::QFID {
                let mut d = Vec::with_capacity(32);
                d.extend_from_slice(&opened.stat.ino.to_le_bytes());
                d.extend_from_slice(&opened.stat.dev.to_le_bytes());
                d.extend_from_slice(&[0u8; 16]);
                reply_contexts.push((cc::QFID, d));
            }
        }
        let mut oplock_level = oplock.granted;
        if let (Some(ask), Some(g)) = (oplock.lease, oplock.lease_granted) {
            oplock_level = OPLOCK_LEVEL_LEASE;
            reply_contexts.push((cc::RQLS, leases::response_context(ask.id.1, g)));
        }
        let is_dir = opened.stat.is_dir;
        let durable = durable::grant(
            &durable_asked,
            !is_dir && stream.is_none(),
            oplock.granted,
            oplock.lease_granted.map(|g| g.state),
        )
        .map(|(d, context)| {
            reply_contexts.push(context);
            Box::new(d)
        });
        if durable.is_some() {
            server.durable.attach(id, key, oplock.connection);
        }
        if let Some(app) = app_instance {
            let open = AppOpen {
                open: id,
                key,
                connection: oplock.connection,
                client_guid,
            };
            server.files().add_app_instance(app, open);
        }
        let ctx_bytes = cc::build_chain(&reply_contexts);
        let times = if quota_file {
            messages::FileTimes {
                attributes: quota::QUOTA_FILE_ATTRIBUTES,
                ..Default::default()
            }
        } else {
            let mut times = file_times(&opened.stat);
            let name = crate::names::path::file_name(&opened.path);
            times.attributes = share.names.shown(name, times.attributes);
            times
        };
        let mut mode = 0;
        if cr.create_options & FILE_WRITE_THROUGH != 0 {
            mode |= FILE_WRITE_THROUGH;
        }
        if cr.create_options & FILE_SEQUENTIAL_ONLY != 0 {
            mode |= FILE_SEQUENTIAL_ONLY;
        }
        if cr.create_options & FILE_NO_INTERMEDIATE_BUFFERING != 0 {
            mode |= FILE_NO_INTERMEDIATE_BUFFERING;
        }
        if delete_on_close {
            mode |= FILE_DELETE_ON_CLOSE;
        }
        session.opens.insert(
            id,
            Open {
                file_id,
                tree_id: req.tree_id,
                access: granted,
                _slot: slot,
                kind: OpenKind::File(FileOpen {
                    vfs: share.vfs.clone(),
                    names: share.names.clone(),
                    audit: share.audit,
                    handle: Arc::new(opened.handle),
                    key,
                    is_dir,
                    share_access: cr.share_access,
                    delete_on_close,
                    write_through: cr.create_options & FILE_WRITE_THROUGH != 0,
                    position: 0,
                    mode,
                    ea_index: 0,
                    dir: None,
                    dir_away: false,
                    watch: None,
                    written: false,
                    durable,
                    lock_sequences: None,
                    resume_key: None,
                    snapshot,
                    quota_scan: 0,
                    recycle: share.recycle.clone().map(|bin| crate::recycle::Recycling {
                        bin,
                        user: session.user.as_str().into(),
                    }),
                }),
            },
        );
        compound.file_id = Some(file_id);
        let body_at = w.len();
        messages::write_create_response(w, oplock_level, action, &times, file_id, &ctx_bytes);
        if oplock.watched_changed && server.sees_local_changes() {
            // Local changes in a leased directory break its lease too:
            // it is watched before the client hears of the lease.
            reply.wait = Some(Wait::Call {
                vfs: share.vfs.clone(),
                op: CallOp::Watch(WatchCall {
                    server: server.clone(),
                }),
                then: Then::Reply {
                    body: w.buf.split_off(body_at),
                },
                mark: None,
            });
        }
        self.send_breaks(oplock.breaks);
        self.send_lease_breaks(oplock.lease_breaks);
        if let (Some((path, is_dir)), None) = (created, &stream) {
            self.report_name(index, &path, notify::action::ADDED, is_dir);
            let parent = oplock
                .lease
                .and_then(|l| l.v2)
                .filter(|(p, _)| *p != [0; 16])
                .map(|(p, _)| (client_guid, p));
            self.break_parent_leases(index, &path, parent);
        }
        Ok(status::SUCCESS)
    }

    /// An OVERWRITE_IF or SUPERSEDE whose truncation was a call goes on
    /// from its result.
    pub(crate) fn overwritten(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        finishing: Finishing,
        (mut opened, result): (Opened, VfsResult<FileStat>),
    ) -> Result<NtStatus, NtStatus> {
        match result {
            Ok(st) => opened.stat = st,
            Err(e) => {
                self.server
                    .files()
                    .unregister(&finishing.key, finishing.id, false);
                return Err(vfs_status(&e));
            }
        }
        let cr = CreateRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let contexts = cc::parse_chain(cr.contexts).map_err(|_| status::INVALID_PARAMETER)?;
        self.finish_create(req, compound, reply, w, &cr, &contexts, opened, finishing)
    }

    /// What a CREATE whose truncation never completes leaves: its
    /// registration.
    pub(crate) fn abandon_overwrite(&mut self, finishing: Finishing) {
        self.server
            .files()
            .unregister(&finishing.key, finishing.id, false);
    }
}

/// The shares `session` is shown: every share but other users' home
/// shares and those it may not use that say so
/// (`access_based_share_enum`), and its user's own home share before it
/// is first made.
fn share_list(
    server: &Server,
    session: &crate::conn::session::Session,
) -> Vec<copyless_rpc::ShareInfo> {
    let viewer = (!session.anonymous && !session.guest).then_some(session.user.as_str());
    let shown = |owner: &Option<String>| {
        owner
            .as_deref()
            .is_none_or(|o| viewer.is_some_and(|v| v.eq_ignore_ascii_case(o)))
    };
    let mut v: Vec<copyless_rpc::ShareInfo> = server
        .shares
        .all()
        .into_iter()
        .filter(|(_, s)| shown(&s.owner))
        .filter(|(_, s)| {
            !s.access.access_based_share_enum || crate::conn::tree::may_connect(server, s, session)
        })
        .map(|(_, s)| copyless_rpc::ShareInfo {
            browseable: s.access.browseable,
            name: s.name.clone(),
            kind: copyless_rpc::ShareKind::Disk,
            comment: s.comment.clone(),
            path: s.path.clone(),
        })
        .collect();
    if let (Some(homes), Some(user)) = (server.homes(), viewer) {
        let listed = v.iter().any(|s| s.name.eq_ignore_ascii_case(user));
        if !listed && homes.offered_to(user, &session.who) {
            v.push(copyless_rpc::ShareInfo {
                browseable: true,
                name: user.to_owned(),
                kind: copyless_rpc::ShareKind::Disk,
                comment: homes.comment(),
                path: String::new(),
            });
        }
    }
    v.push(copyless_rpc::ShareInfo {
        browseable: true,
        name: "IPC$".into(),
        kind: copyless_rpc::ShareKind::Ipc,
        comment: match server.config.server_comment.as_str() {
            "" => "IPC Service".into(),
            comment => format!("IPC Service ({comment})"),
        },
        path: String::new(),
    });
    v
}

/// Opens an existing object after checking share modes, or creates it, as
/// the disposition says. The share-mode entry for `id` is registered before
/// anything is truncated, so a conflicting open never damages data.
#[allow(clippy::too_many_arguments)]
fn open_or_create(
    server: &Arc<Server>,
    index: usize,
    vfs: &dyn Vfs,
    path: &str,
    cr: &CreateRequest<'_>,
    creator_sd: Option<&Descriptor>,
    allocation: u64,
    kind: Kind,
    tree: &TreeRights,
    caller: &Caller<'_>,
    read_only: bool,
    id: u64,
    oplock: &mut OplockRequest,
    mut first: First,
) -> Result<Opening, NtStatus> {
    let disposition = cr.create_disposition;
    let by_call = matches!(first, First::Call | First::Made(_));
    let granted = map_generic(cr.desired_access, tree.maximal);
    let wants_read = granted & (access::FILE_READ_DATA | access::FILE_EXECUTE) != 0;
    let truncating = matches!(disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF);
    let data_write = access::FILE_WRITE_DATA | access::FILE_APPEND_DATA;
    let needs_write = map_generic(cr.desired_access & !access::MAXIMUM_ALLOWED, 0) & data_write
        != 0
        || truncating;
    let mut write = granted & data_write != 0 || truncating;
    let mut write_refused = false;
    // A name that may be made is looked up and made in one walk to its
    // folder when nothing decided before making it depends on that folder
    // (no stored descriptors to inherit or check) or on the creator's
    // descriptor; else it is looked up first, and made only once its
    // folder allows it. Either way what is there is opened as it is: it
    // is overwritten below, once the caller's rights allow it.
    let mut one_walk = matches!(disposition, SUPERSEDE | CREATE | OPEN_IF | OVERWRITE_IF)
        && may_create(cr, path, read_only).is_ok()
        && creator_sd.is_none()
        && !vfs.descriptors_stored();
    for _attempt in 0..3 {
        let req = OpenRequest {
            who: caller.who,
            path,
            disposition: match (one_walk, disposition) {
                (true, CREATE) => Disposition::Create,
                (true, _) => Disposition::OpenIf,
                (false, _) => Disposition::Open,
            },
            kind,
            read: wants_read,
            write,
            attributes: cr.file_attributes,
            // What is made is made with it; what is there ignores it.
            allocation_size: allocation,
            unlink_asked: rights::may_ask_unlink(
                cr.desired_access,
                disposition,
                tree.maximal_wanted,
            ),
        };
        let (made, judged) = match std::mem::replace(&mut first, First::Make) {
            First::Make => (vfs.open(&req), None),
            First::Made(Made::Opened {
                opened,
                judged,
                write: asked,
            }) => {
                // Only a write the kernel refused is not asked again
                // (below): this run goes on from there.
                if write && !asked {
                    write = false;
                    write_refused = true;
                    one_walk = false;
                }
                (opened, judged)
            }
            First::Made(Made::Inherited(made)) => match made? {
                Some(opened) => {
                    return created(server, index, opened, id, granted, cr, tree, oplock)
                        .map(Opening::Done);
                }
                // Someone created it meanwhile: open it instead.
                None => {
                    first = First::Call;
                    continue;
                }
            },
            // What the caller may do is read from the filesystem too.
            First::Call if vfs.descriptors_stored() => {
                return Ok(Opening::Call(CallOp::OpenJudged(Box::new(Judging {
                    open: OpenCall::new(&req),
                    caller: OwnedCaller::new(server, caller),
                    desired: cr.desired_access,
                    disposition,
                    tree: *tree,
                }))))
            }
            First::Call => return Ok(Opening::Call(CallOp::Open(OpenCall::new(&req)))),
            // A stream's result: an engine bug.
            First::Made(Made::Stream(_)) => return Err(status::INTERNAL_ERROR),
        };
        let opened = match made {
            // MAXIMUM_ALLOWED asks for write only if the caller may.
            Err(VfsError::AccessDenied) if write && !needs_write => {
                write = false;
                write_refused = true;
                one_walk = false;
                if by_call {
                    first = First::Call;
                }
                continue;
            }
            r => r,
        };
        match opened {
            Ok(opened) if opened.action == CreateAction::Created => {
                return created(server, index, opened, id, granted, cr, tree, oplock)
                    .map(Opening::Done);
            }
            Err(VfsError::Collision) if one_walk => return Err(status::OBJECT_NAME_COLLISION),
            Ok(opened) => {
                if disposition == CREATE {
                    return Err(status::OBJECT_NAME_COLLISION);
                }
                if opened.stat.is_dir && truncating {
                    return Err(status::INVALID_PARAMETER);
                }
                let mut g = match judged {
                    Some(judged) => judged?,
                    None => judge(vfs, caller, &opened, cr.desired_access, disposition, tree)?,
                };
                if write_refused {
                    // What the kernel refused, whatever the mode said.
                    let data = access::FILE_WRITE_DATA | access::FILE_APPEND_DATA;
                    g.granted &= !data;
                    g.maximal &= !data;
                }
                if read_only_file(&opened.stat) && cr.create_options & FILE_DELETE_ON_CLOSE != 0 {
                    return Err(status::CANNOT_DELETE);
                }
                if truncating {
                    no_encryption(cr)?;
                    keeps_hidden_and_system(&opened.stat, cr.file_attributes)?;
                }
                register(
                    server,
                    index,
                    &opened,
                    id,
                    g.granted,
                    cr.share_access,
                    oplock,
                )?;
                let action = match (truncating, disposition) {
                    (false, _) => ACTION_OPENED,
                    (true, SUPERSEDE) => ACTION_SUPERSEDED,
                    (true, _) => ACTION_OVERWRITTEN,
                };
                let mut outcome = Outcome {
                    opened,
                    action,
                    granted: g.granted,
                    maximal: g.maximal,
                };
                if truncating {
                    let attrs = (cr.file_attributes & attr::SETTABLE) | attr::ARCHIVE;
                    // On the engine's loop, the truncation is a call too,
                    // unless the data is memory.
                    if by_call && !vfs.data_in_memory() {
                        return Ok(Opening::Overwrite(outcome, Some(attrs), allocation));
                    }
                    match overwrite(vfs, &outcome.opened.handle, Some(attrs), allocation) {
                        Ok(st) => outcome.opened.stat = st,
                        Err(e) => {
                            unregister(server, index, &outcome.opened, id);
                            return Err(vfs_status(&e));
                        }
                    }
                }
                return Ok(Opening::Done(outcome));
            }
            Err(VfsError::NameNotFound) => {
                if matches!(disposition, OPEN | OVERWRITE) {
                    return Err(status::OBJECT_NAME_NOT_FOUND);
                }
                may_create(cr, path, read_only)?;
                let req = OpenRequest {
                    disposition: Disposition::Create,
                    attributes: cr.file_attributes & attr::SETTABLE,
                    ..req
                };
                if by_call {
                    return Ok(Opening::Call(CallOp::Inherit(Box::new(Inheriting {
                        open: OpenCall::new(&req),
                        caller: OwnedCaller::new(server, caller),
                        creator_sd: creator_sd.cloned(),
                    }))));
                }
                match create_inheriting(vfs, &req, caller, creator_sd)? {
                    Some(opened) => {
                        return created(server, index, opened, id, granted, cr, tree, oplock)
                            .map(Opening::Done);
                    }
                    // Someone created it meanwhile: open it instead.
                    None => continue,
                }
            }
            Err(e) => return Err(vfs_status(&e)),
        }
    }
    Err(status::SHARING_VIOLATION)
}

/// What `caller` may do with `opened`, an object that was there, asking
/// for `desired` with `disposition`: what its stored descriptor (or its
/// mode) and its folder's grant (see [`rights::open`]).
fn judge(
    vfs: &dyn Vfs,
    caller: &Caller<'_>,
    opened: &Opened,
    desired: u32,
    disposition: u32,
    tree: &TreeRights,
) -> Result<rights::Granted, NtStatus> {
    let ask = rights::Ask {
        desired,
        implied: rights::implied(disposition, false, opened.stat.is_dir),
        tree_maximal: tree.maximal,
        is_root: opened.path.is_empty(),
        is_dir: opened.stat.is_dir,
        read_only_file: read_only_file(&opened.stat),
        maximal_wanted: tree.maximal_wanted,
    };
    let mut facts = security::OpenedFacts::new(vfs, caller, opened);
    rights::open(&mut facts, &ask)
}

/// A file that is hidden or a system file is overwritten or superseded
/// only by a CREATE that keeps it so (MS-FSA 2.1.5.1.2; CreateFile's
/// CREATE_ALWAYS fails the same way), lest a program that writes a new
/// file over it unhide it unawares.
fn keeps_hidden_and_system(st: &FileStat, asked: u32) -> Result<(), NtStatus> {
    let kept = st.attributes & (attr::HIDDEN | attr::SYSTEM);
    if kept & !asked != 0 {
        return Err(status::ACCESS_DENIED);
    }
    Ok(())
}

/// A file with FILE_ATTRIBUTE_READONLY, whose data is not written.
fn read_only_file(st: &FileStat) -> bool {
    !st.is_dir && st.attributes & attr::READONLY != 0
}

/// Why a name that is not there may not be made by this request, if it
/// may not.
fn may_create(cr: &CreateRequest<'_>, path: &str, read_only: bool) -> Result<(), NtStatus> {
    if read_only {
        return Err(status::ACCESS_DENIED);
    }
    if path.is_empty() {
        return Err(status::OBJECT_NAME_INVALID);
    }
    // MS-FSA 2.1.5.1.1: a new read-only file cannot be made
    // delete-on-close.
    if cr.create_options & FILE_DELETE_ON_CLOSE != 0 && cr.file_attributes & attr::READONLY != 0 {
        return Err(status::CANNOT_DELETE);
    }
    no_encryption(cr)
}

/// The outcome of making `opened`: its creator gets what it asked for.
#[allow(clippy::too_many_arguments)]
fn created(
    server: &Arc<Server>,
    index: usize,
    opened: Opened,
    id: u64,
    granted: u32,
    cr: &CreateRequest<'_>,
    tree: &TreeRights,
    oplock: &mut OplockRequest,
) -> Result<Outcome, NtStatus> {
    oplock.created = true;
    register(server, index, &opened, id, granted, cr.share_access, oplock)?;
    Ok(Outcome {
        opened,
        action: ACTION_CREATED,
        granted,
        maximal: tree.maximal,
    })
}

/// A file written as FILE_ATTRIBUTE_ENCRYPTED asks for EFS, which this
/// server has not: Windows without a certificate for the user refuses it
/// with ACCESS_DENIED (MS-SMB 3.3.5.5), rather than store it in clear.
fn no_encryption(cr: &CreateRequest<'_>) -> Result<(), NtStatus> {
    if cr.file_attributes & copyless_fscc::attr::FILE_ATTRIBUTE_ENCRYPTED != 0 {
        return Err(status::ACCESS_DENIED);
    }
    Ok(())
}

/// Adds the open to the shared table after checking delete-pending and
/// share modes against every other open of the same file.
fn register(
    server: &Server,
    index: usize,
    opened: &Opened,
    id: u64,
    access: u32,
    share_access: u32,
    oplock: &mut OplockRequest,
) -> Result<(), NtStatus> {
    server.files().register(
        file_key(index, opened),
        &opened.path,
        opened.stat.is_dir,
        OpenRef {
            id,
            access,
            share_access,
            lease: None,
            session: oplock.session,
        },
        oplock,
    )
}

fn unregister(server: &Server, index: usize, opened: &Opened, id: u64) {
    server
        .files()
        .unregister(&file_key(index, opened), id, false);
}

/// Creates what `req` names (its disposition is Create) and stores on it
/// what it inherits from its parent's descriptor and the descriptor its
/// creator sent; None when the name was taken meanwhile.
fn create_inheriting(
    vfs: &dyn Vfs,
    req: &OpenRequest<'_>,
    caller: &Caller<'_>,
    creator_sd: Option<&Descriptor>,
) -> Result<Option<Opened>, NtStatus> {
    let inherited = security::check_create(vfs, req.path, req.kind == Kind::Directory, caller)?;
    let opened = match vfs.open(req) {
        Ok(opened) => opened,
        Err(VfsError::Collision) => return Ok(None),
        Err(e) => return Err(vfs_status(&e)),
    };
    if inherited.is_some() || creator_sd.is_some() {
        let assigned = security::assign(
            vfs,
            &opened.handle,
            &opened.stat,
            inherited.as_ref(),
            creator_sd,
        );
        if let Err(e) = assigned {
            // Never leave an object with less protection than it was
            // meant to have.
            let _ = vfs.unlink(req.who, &opened.path, opened.stat.is_dir);
            return Err(e);
        }
    }
    Ok(Some(opened))
}

fn file_key(index: usize, opened: &Opened) -> FileKey {
    (
        index,
        opened.stat.dev,
        opened.stat.ino,
        stream_id(opened.handle.stream.as_deref()),
    )
}

/// Opens or creates the alternate data stream `name` of `path`, creating
/// the file too when the disposition allows, as NTFS does (see
/// [`make_stream`]), or has the engine do so as a call (`first`); then
/// registers the open, and empties what is there if the disposition says
/// so. Share modes are the stream's own.
#[allow(clippy::too_many_arguments)]
fn open_or_create_stream(
    server: &Arc<Server>,
    index: usize,
    vfs: &dyn Vfs,
    path: &str,
    name: &str,
    cr: &CreateRequest<'_>,
    creator_sd: Option<&Descriptor>,
    tree: &TreeRights,
    caller: &Caller<'_>,
    read_only: bool,
    id: u64,
    oplock: &mut OplockRequest,
    first: First,
) -> Result<Opening, NtStatus> {
    let base = OpenRequest {
        attributes: cr.file_attributes,
        ..OpenRequest::look(caller.who, path, Kind::Any)
    };
    let by_call = matches!(first, First::Call | First::Made(_));
    let made = match first {
        First::Make => make_stream(
            vfs,
            &base,
            name,
            cr.create_disposition,
            cr.desired_access,
            creator_sd,
            tree,
            caller,
            read_only,
        ),
        First::Call => {
            return Ok(Opening::Call(CallOp::OpenStream(Box::new(StreamOpening {
                base: OpenCall::new(&base),
                name: name.to_owned(),
                disposition: cr.create_disposition,
                desired: cr.desired_access,
                caller: OwnedCaller::new(server, caller),
                creator_sd: creator_sd.cloned(),
                tree: *tree,
                read_only,
            }))))
        }
        First::Made(Made::Stream(made)) => made,
        // Another call's result: an engine bug.
        First::Made(_) => return Err(status::INTERNAL_ERROR),
    };
    let StreamMade {
        opened,
        granted,
        maximal,
    } = made?;
    oplock.created = matches!(opened.action, CreateAction::Created);
    register(server, index, &opened, id, granted, cr.share_access, oplock)?;
    // What is there is emptied only once the open is registered: an
    // open that share modes refuse leaves the stream as it was.
    let empties = matches!(cr.create_disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF)
        && opened.action == CreateAction::Opened;
    let action = match (empties, opened.action) {
        (true, _) if cr.create_disposition == SUPERSEDE => ACTION_SUPERSEDED,
        (true, _) => ACTION_OVERWRITTEN,
        (false, CreateAction::Created) => ACTION_CREATED,
        (false, _) => ACTION_OPENED,
    };
    let mut outcome = Outcome {
        opened,
        action,
        granted,
        maximal,
    };
    if empties {
        // On the engine's loop, the emptying is a call too, unless the
        // data is memory.
        if by_call && !vfs.data_in_memory() {
            return Ok(Opening::Overwrite(outcome, None, 0));
        }
        match overwrite(vfs, &outcome.opened.handle, None, 0) {
            Ok(st) => outcome.opened.stat = st,
            Err(e) => {
                unregister(server, index, &outcome.opened, id);
                return Err(vfs_status(&e));
            }
        }
    }
    Ok(Opening::Done(outcome))
}

/// Opens the alternate data stream `name` of the file `base` names, or
/// makes it (and the file, with what it inherits) where `disposition`
/// allows, as NTFS does; rights come from the file's descriptor. What is
/// there is opened as it is, to be emptied once registered. A file made
/// for a stream that cannot then be opened is removed again.
#[allow(clippy::too_many_arguments)]
fn make_stream(
    vfs: &dyn Vfs,
    base: &OpenRequest<'_>,
    name: &str,
    disposition: u32,
    desired: u32,
    creator_sd: Option<&Descriptor>,
    tree: &TreeRights,
    caller: &Caller<'_>,
    read_only: bool,
) -> Result<StreamMade, NtStatus> {
    let may_create = !matches!(disposition, OPEN | OVERWRITE);
    let (file, base_created, granted, maximal) = match vfs.open(base) {
        Ok(file) => {
            // Opening a stream that is not there yet writes to its file.
            let new_stream = may_create
                && match vfs.open_stream(&file.handle, name, Disposition::Open) {
                    Ok(_) => false,
                    Err(VfsError::NameNotFound) => true,
                    Err(e) => return Err(vfs_status(&e)),
                };
            let implied = rights::implied(disposition, new_stream, file.stat.is_dir);
            // A stream holds data: its writes are the kernel's to allow
            // even on a folder, whose xattrs hold its streams.
            let ask = rights::Ask {
                desired,
                implied,
                tree_maximal: tree.maximal,
                is_root: file.path.is_empty(),
                is_dir: false,
                read_only_file: read_only_file(&file.stat),
                maximal_wanted: tree.maximal_wanted,
            };
            let g = rights::open(&mut security::OpenedFacts::new(vfs, caller, &file), &ask)?;
            (file, false, g.granted, g.maximal)
        }
        Err(VfsError::NameNotFound) if may_create => {
            if read_only {
                return Err(status::ACCESS_DENIED);
            }
            let req = OpenRequest {
                disposition: Disposition::Create,
                attributes: base.attributes & attr::SETTABLE,
                ..base.clone()
            };
            let file = create_inheriting(vfs, &req, caller, creator_sd)?
                .ok_or(status::OBJECT_NAME_COLLISION)?;
            let granted = map_generic(desired, tree.maximal);
            (file, true, granted, tree.maximal)
        }
        Err(e) => return Err(vfs_status(&e)),
    };
    let open_as = match disposition {
        SUPERSEDE | OVERWRITE_IF | OPEN_IF => Disposition::OpenIf,
        OVERWRITE | OPEN => Disposition::Open,
        _ => Disposition::Create,
    };
    let opened = vfs
        .open_stream(&file.handle, name, open_as)
        .and_then(|(handle, action)| {
            let stat = vfs.stat(&handle)?;
            Ok(Opened {
                handle,
                action,
                stat,
                path: file.path.clone(),
                // A stream goes with its file's rights.
                may_unlink: file.may_unlink,
            })
        });
    match opened {
        Ok(opened) => Ok(StreamMade {
            opened,
            granted,
            maximal,
        }),
        Err(e) => {
            if base_created {
                let _ = vfs.unlink(caller.who, &file.path, false);
            }
            Err(vfs_status(&e))
        }
    }
}
