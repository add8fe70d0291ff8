//! Durable handles (MS-SMB2 3.3.5.9.6-.12, 3.3.7.1): an open with a batch
//! oplock or a handle-caching lease outlives its connection for a while,
//! so that a client whose network failed can reclaim it, with its
//! position, locks, caching and delete-on-close, from a new connection.
//!
//! While disconnected, an open stays registered in the file table (its
//! share modes, oplock or lease and byte-range locks stand) and the open
//! itself, file handle and all, waits in the [`DurableTable`]. That table
//! is the one place holding what a server restart would have to keep to
//! offer persistent handles later: the open's path and share, its access
//! and share modes, its lease or oplock, its locks, position and
//! delete-on-close, the CreateGuid and the owner.

use copyless_proto::create_context::{self as cc, CreateContext};
use copyless_proto::durable::{self as wire, ReconnectV2, RequestV2};
use copyless_proto::lease::{LeaseContext, HANDLE_CACHING};
use copyless_proto::messages::{self, FileId, OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_LEASE};
use copyless_proto::negotiate::DIALECT_300;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::post::Kind;
use crate::conn::removals::RemoveBy;
use crate::conn::tree::TreeKind;
use crate::conn::waiting::{Awaited, Hold};
use crate::file_table::FileKey;
use crate::handlers::file_times;
use crate::intent::Token;
use crate::leases;
use crate::open::{current_path, Open};

/// The server's durable opens, parked and live (copyless_state).
pub type DurableTable = copyless_state::durable_table::DurableTable<Open>;
type Parked = copyless_state::durable_table::Parked<Open>;

/// How long a version 1 handle is kept (Windows leaves it to the server;
/// Samba keeps 16 minutes).
const V1_TIMEOUT_MS: u32 = 16 * 60 * 1000;
/// Version 2: what a client that asks for 0 gets, and the most any gets
/// (Windows Server 2012's values, which smbtorture expects).
const V2_DEFAULT_TIMEOUT_MS: u32 = 60_000;
const V2_MAX_TIMEOUT_MS: u32 = 300_000;

/// FILETIME units per millisecond.
const TICKS_PER_MS: u64 = 10_000;

/// The most a client may ask FSCTL_LMR_REQUEST_RESILIENCY to keep an
/// open for.
pub(crate) const MAX_RESILIENT_TIMEOUT_MS: u32 = V2_MAX_TIMEOUT_MS;

/// No lock has succeeded with the LockSequenceIndex.
const NO_SEQUENCE: u8 = 0xFF;

/// What makes an open durable, kept on it.
#[derive(Debug, Clone)]
pub struct Durable {
    pub timeout_ms: u32,
    /// DH2Q's CreateGuid; zeros for version 1.
    pub create_guid: [u8; 16],
    /// Kept whatever it caches (FSCTL_LMR_REQUEST_RESILIENCY), where a
    /// durable open is kept only with a batch oplock or handle lease.
    pub resilient: bool,
}

impl Durable {
    fn new(timeout_ms: u32, create_guid: [u8; 16]) -> Durable {
        Durable {
            timeout_ms,
            create_guid,
            resilient: false,
        }
    }

    /// A plain open made resilient (MS-SMB2 3.3.5.15.9).
    pub(crate) fn resilient(timeout_ms: u32) -> Durable {
        Durable {
            resilient: true,
            ..Durable::new(timeout_ms, [0; 16])
        }
    }
}

/// The LockSequenceNumber each LockSequenceIndex last succeeded with
/// (MS-SMB2 3.3.5.14), so that a LOCK the client sends again after a
/// network failure, or on another channel, does not act twice.
#[derive(Debug, Clone)]
pub struct LockSequences([u8; 64]);

impl Default for LockSequences {
    fn default() -> Self {
        LockSequences([NO_SEQUENCE; 64])
    }
}

impl LockSequences {
    /// Whether a LOCK repeats one that succeeded: it then succeeds again
    /// and does nothing. Otherwise its index counts as unused until it
    /// succeeds ([`LockSequences::succeeded`]).
    pub(crate) fn replayed(&mut self, sequence: u32) -> bool {
        let Some((index, number)) = lock_bucket(sequence) else {
            return false;
        };
        if self.0[index] == number {
            return true;
        }
        self.0[index] = NO_SEQUENCE;
        false
    }

    pub(crate) fn succeeded(&mut self, sequence: u32) {
        if let Some((index, number)) = lock_bucket(sequence) {
            self.0[index] = number;
        }
    }
}

/// LockSequenceIndex 1 to 64 names a bucket; 0 and the rest name none.
fn lock_bucket(sequence: u32) -> Option<(usize, u8)> {
    let index = (sequence >> 4) as usize;
    let number = (sequence & 0xF) as u8;
    (1..=64).contains(&index).then(|| (index - 1, number))
}

/// The durable-handle contexts of a CREATE.
pub(crate) enum Asked {
    Nothing,
    V1,
    V2(RequestV2),
    ReconnectV1(FileId),
    ReconnectV2(ReconnectV2),
}

/// Reads the durable-handle contexts; combinations that make no sense are
/// INVALID_PARAMETER (MS-SMB2 3.3.5.9.6-.12), a request beside a
/// reconnect of the same version is ignored (3.3.5.9.6). Version 2 needs
/// SMB 3.
pub(crate) fn asked(contexts: &[CreateContext<'_>], dialect: u16) -> Result<Asked, NtStatus> {
    let find = |name: &[u8]| contexts.iter().find(|c| c.name == name).map(|c| c.data);
    let v2 = dialect >= DIALECT_300;
    let (dhnq, dhnc) = (find(cc::DHNQ), find(cc::DHNC));
    let (dh2q, dh2c) = if v2 {
        (find(cc::DH2Q), find(cc::DH2C))
    } else {
        (None, None)
    };
    let bad = |_| status::INVALID_PARAMETER;
    match (dhnq, dhnc, dh2q, dh2c) {
        (None, None, None, None) => Ok(Asked::Nothing),
        (_, Some(c), None, None) => Ok(Asked::ReconnectV1(
            wire::parse_reconnect_v1(c).map_err(bad)?,
        )),
        (None, None, None, Some(c)) => Ok(Asked::ReconnectV2(
            wire::parse_reconnect_v2(c).map_err(bad)?,
        )),
        (None, None, Some(q), None) => Ok(Asked::V2(wire::parse_request_v2(q).map_err(bad)?)),
        (Some(q), None, None, None) => {
            wire::parse_request_v1(q).map_err(bad)?;
            Ok(Asked::V1)
        }
        _ => Err(status::INVALID_PARAMETER),
    }
}

/// What a CREATE that reclaims a durable open names.
pub(crate) struct Reclaim<'a> {
    persistent: u64,
    /// DH2C's CreateGuid, which must be the open's.
    create_guid: Option<[u8; 16]>,
    /// The lease key of its RqLs context, which must be the open's.
    lease_key: Option<[u8; 16]>,
    /// Its name, which must be the open's when it has a lease.
    name: &'a [u8],
}

/// The reclaim a CREATE asks for, if it does.
pub(crate) fn reclaim<'a>(
    asked: &Asked,
    contexts: &[CreateContext<'_>],
    name: &'a [u8],
) -> Result<Option<Reclaim<'a>>, NtStatus> {
    let (persistent, create_guid) = match asked {
        Asked::ReconnectV1(id) => (id.persistent, None),
        Asked::ReconnectV2(r) => (r.file_id.persistent, Some(r.create_guid)),
        _ => return Ok(None),
    };
    let lease_key = contexts
        .iter()
        .find(|c| c.name == cc::RQLS)
        .map(|c| LeaseContext::parse(c.data).map(|l| l.key))
        .transpose()
        .map_err(|_| status::INVALID_PARAMETER)?;
    Ok(Some(Reclaim {
        persistent,
        create_guid,
        lease_key,
        name,
    }))
}

/// A create response context: its name and data.
pub(crate) type ResponseContext = (&'static [u8], Vec<u8>);

/// The durability a new open gets, if any, and the response context that
/// says so: only a file with a batch oplock or a lease with handle
/// caching is kept (MS-SMB2 3.3.5.9.6, .10).
pub(crate) fn grant(
    asked: &Asked,
    is_file: bool,
    oplock: u8,
    lease: Option<u32>,
) -> Option<(Durable, ResponseContext)> {
    let caches = oplock == OPLOCK_LEVEL_BATCH || lease.is_some_and(|s| s & HANDLE_CACHING != 0);
    if !(is_file && caches) {
        return None;
    }
    match asked {
        Asked::V1 => Some((
            Durable::new(V1_TIMEOUT_MS, [0; 16]),
            (cc::DHNQ, wire::response_v1()),
        )),
        Asked::V2(q) => {
            let timeout_ms = match q.timeout {
                0 => V2_DEFAULT_TIMEOUT_MS,
                t => t.min(V2_MAX_TIMEOUT_MS),
            };
            // Persistence needs a continuously available share, which
            // no share here is: the flag is not granted.
            Some((
                Durable::new(timeout_ms, q.create_guid),
                (cc::DH2Q, wire::response_v2(timeout_ms, 0)),
            ))
        }
        _ => None,
    }
}

impl Connection {
    /// Closes the opens of a session that ends without closing them: a
    /// durable open that still caches its handle is kept instead
    /// (MS-SMB2 3.3.7.1), for its user to reclaim.
    pub(crate) fn park_or_release(
        &mut self,
        session_id: u64,
        user: &str,
        opens: Vec<Open>,
        how: RemoveBy,
    ) {
        for open in opens {
            let keep = open.file().and_then(|f| {
                let durable = f.durable.as_ref()?;
                (durable.resilient
                    || self
                        .server
                        .files()
                        .keeps_handle(&f.key, open.file_id.volatile))
                .then_some((durable.timeout_ms, f.key.0))
            });
            match keep {
                Some((timeout_ms, share)) => {
                    let id = open.file_id.volatile;
                    self.end_pending_of(session_id, id);
                    // A reclaim may be waiting for this connection to go.
                    let key = open.file().map(|f| f.key);
                    let woken = key.map(|k| self.server.files().park(&k, id));
                    self.wake_held(woken.unwrap_or_default());
                    self.server.durable.park(
                        open.file_id.persistent,
                        Parked {
                            open,
                            user: user.to_owned(),
                            share,
                            expires: self.clock + u64::from(timeout_ms) * TICKS_PER_MS,
                        },
                    );
                }
                None => self.release(session_id, open, how),
            }
        }
    }

    /// Closes the disconnected opens whose time is up.
    pub(crate) fn expire_parked(&mut self, now: u64, how: RemoveBy) {
        if self.server.durable.is_empty() {
            return;
        }
        for parked in self.server.durable.take_expired(now) {
            self.release(0, parked.open, how);
        }
    }

    /// A new open under application instance `app` closes the other
    /// clients' opens of the same file made under it, without breaking
    /// their oplocks (MS-SMB2 3.3.5.9.13: the application failed over).
    /// Returns the file to wait on when such an open lives on another
    /// connection, which is asked to close it and wakes `token` when it
    /// has.
    pub(crate) fn end_app_instance(
        &mut self,
        req: &Req<'_>,
        name: &[u8],
        app: [u8; 16],
        token: Token,
    ) -> Result<Option<FileKey>, NtStatus> {
        let Ok(index) = self.disk_share(req) else {
            return Ok(None);
        };
        let path = crate::names::path::from_smb_with_stream(name)?.path;
        let opens = self
            .server
            .files()
            .app_instance_opens(&app, self.client_guid, index, &path);
        let mut wait = None;
        for o in opens {
            if self.purge_parked(&[o.open]) {
                continue;
            }
            if o.connection == self.id() {
                self.close_open_here(o.open, RemoveBy::Here);
                continue;
            }
            // Waiting first: the letter goes out only with this
            // request's output, so the close cannot come before.
            self.server.files().await_close(&o.key, (self.id(), token));
            self.post(o.connection, Kind::CloseOpen { open: o.open });
            wait = Some(o.key);
        }
        Ok(wait)
    }

    /// The share the request's tree connects to: durable handles and
    /// application instances live on disk shares only.
    fn disk_share(&self, req: &Req<'_>) -> Result<usize, NtStatus> {
        let session = self
            .sessions
            .get(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        let tree = session
            .trees
            .get(&req.tree_id)
            .ok_or(status::NETWORK_NAME_DELETED)?;
        match tree.kind {
            TreeKind::Disk { index, .. } => Ok(index),
            TreeKind::Ipc => Err(status::OBJECT_NAME_NOT_FOUND),
        }
    }

    /// Closes open `id` of whichever session here holds it.
    pub(crate) fn close_open_here(&mut self, id: u64, how: RemoveBy) {
        let held = self
            .sessions
            .iter_mut()
            .find_map(|(sid, s)| Some((*sid, s.opens.remove(&id)?)));
        if let Some((session_id, open)) = held {
            self.release(session_id, open, how);
        }
    }

    /// Closes disconnected opens that stand in a new open's way; false
    /// when none was left to close.
    pub(crate) fn purge_parked(&mut self, ids: &[u64]) -> bool {
        let parked = self.server.durable.take(ids);
        let any = !parked.is_empty();
        for p in parked {
            self.release_here(0, p.open);
        }
        any
    }

    /// A CREATE with DHnC or DH2C: the client reclaims a durable open
    /// (MS-SMB2 3.3.5.9.7, .12). Nothing else of the request counts (not
    /// its access or disposition); a refusal leaves the open kept.
    pub(crate) fn reconnect(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        reclaim: Reclaim<'_>,
    ) -> Result<NtStatus, NtStatus> {
        let Reclaim {
            persistent,
            create_guid,
            lease_key,
            name,
        } = reclaim;
        let index = self.disk_share(req)?;
        let user = self
            .sessions
            .get(&req.session_id)
            .map(|s| s.user.clone())
            .unwrap_or_default();
        let client_guid = self.client_guid;
        let server = self.server.clone();
        // One whose time is up is gone, even if no timer closed it yet.
        self.expire_parked(self.clock, RemoveBy::Here);
        let taken = server.durable.take_if(persistent, |p| {
            let Some(f) = p.open.file() else {
                return Err(status::OBJECT_NAME_NOT_FOUND);
            };
            let durable = f.durable.as_ref().ok_or(status::OBJECT_NAME_NOT_FOUND)?;
            if p.share != index || create_guid.is_some_and(|g| g != durable.create_guid) {
                return Err(status::OBJECT_NAME_NOT_FOUND);
            }
            let (_, lease) = server.files().caching_of(&f.key, p.open.file_id.volatile);
            // A lease is its client's: only that client, naming the key,
            // reclaims the open; an oplock open any client may.
            let lease_id = lease.map(|(id, _)| id);
            if lease_id != lease_key.map(|k| (client_guid, k)) {
                return Err(status::OBJECT_NAME_NOT_FOUND);
            }
            if lease_id.is_some() {
                // With a lease the name must be the open's own.
                let path = current_path(&server, &f.key).unwrap_or_default();
                let asked_path = crate::names::path::from_smb_with_stream(name)
                    .map_err(|_| status::INVALID_PARAMETER)?
                    .path;
                if !asked_path.eq_ignore_ascii_case(&path) {
                    return Err(status::INVALID_PARAMETER);
                }
            }
            if !p.user.eq_ignore_ascii_case(&user) {
                return Err(status::ACCESS_DENIED);
            }
            Ok(())
        });
        let parked = match taken {
            Ok(p) => p,
            // Still on another connection, which may be one the server
            // has not yet seen drop: wait a little for it to go.
            Err(status::OBJECT_NAME_NOT_FOUND) if !self.retrying => {
                let Some((key, owner)) = server.durable.live().get(&persistent).copied() else {
                    return Err(status::OBJECT_NAME_NOT_FOUND);
                };
                if owner == self.id() {
                    return Err(status::OBJECT_NAME_NOT_FOUND);
                }
                let token = self.next_hold_token();
                server.files().await_close(&key, (self.id(), token));
                reply.hold = Some(Hold {
                    token,
                    key,
                    awaited: Awaited::Departure,
                });
                return Ok(status::PENDING);
            }
            Err(e) => return Err(e),
        };
        let mut open = parked.open;
        open.tree_id = req.tree_id;
        let id = open.file_id.volatile;
        let f = open.file().ok_or(status::INTERNAL_ERROR)?;
        let key = f.key;
        let names = f.names.clone();
        let stat = f.vfs.stat(&f.handle);
        server.files().unpark(&key, id, self.id(), req.session_id);
        server.durable.attach(id, key, self.id());
        let (level, lease) = server.files().caching_of(&key, id);
        let stat = match stat {
            Ok(st) => st,
            Err(e) => {
                self.release_here(req.session_id, open);
                return Err(crate::handlers::vfs_status(&e));
            }
        };
        let mut reply_contexts = Vec::new();
        let mut oplock_level = level;
        if let Some(((_, key), g)) = lease {
            oplock_level = OPLOCK_LEVEL_LEASE;
            reply_contexts.push((cc::RQLS, leases::response_context(key, g)));
        }
        let file_id = open.file_id;
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        session.opens.insert(id, open);
        compound.file_id = Some(file_id);
        let mut times = file_times(&stat);
        if names.hides_any() {
            let path = crate::open::current_path(&server, &key).unwrap_or_default();
            times.attributes = names.shown(crate::names::path::file_name(&path), times.attributes);
        }
        messages::write_create_response(
            w,
            oplock_level,
            crate::handlers::create::ACTION_OPENED,
            &times,
            file_id,
            &cc::build_chain(&reply_contexts),
        );
        Ok(status::SUCCESS)
    }
}

/// The application instance id of a CREATE, if it names one.
pub(crate) fn app_instance(contexts: &[CreateContext<'_>]) -> Result<Option<[u8; 16]>, NtStatus> {
    contexts
        .iter()
        .find(|c| c.name == wire::APP_INSTANCE_ID)
        .map(|c| wire::parse_app_instance_id(c.data).map_err(|_| status::INVALID_PARAMETER))
        .transpose()
}
