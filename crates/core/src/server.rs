//! State shared by every connection: configuration, shares, users, and the
//! table of open files that share modes and delete-on-close act on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use copyless_auth::Credentials;
use copyless_vfs::{Identity, Vfs};

use crate::conn::post::{ClientTable, SessionTable};
use crate::conn::post::{Kind, Letter, Message};
use crate::durable::DurableTable;
use crate::file_table::FileTable;
use crate::hosts::HostFilter;
use crate::leases::LeaseBreak;
use crate::limits::Limits;
use crate::listing_ledger::ListingLedger;
use crate::local::{LocalWatch, OwnChanges};
use crate::names::hiding::NameRules;
use crate::quota::OpenQuota;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// NetBIOS name of the server (upper case, at most 15 characters).
    pub server_name: String,
    /// What clients show of the server beside its name (Samba's `server
    /// string`): NetrServerGetInfo's comment, and IPC$'s.
    pub server_comment: String,
    /// The dialects offered: the lowest and highest a client may get
    /// (`[security] min_protocol` and `max_protocol`).
    pub min_dialect: u16,
    pub max_dialect: u16,
    pub signing_required: bool,
    /// Ask clients to encrypt every session (SESSION_FLAG_ENCRYPT_DATA).
    /// Encryption is offered to clients that ask for it either way.
    pub encrypt_data: bool,
    /// Refuse sessions of clients that cannot encrypt.
    pub reject_unencrypted: bool,
    pub allow_guest: bool,
    /// A logon with a user name nobody has is made a guest's, where
    /// guests are allowed (`[security] map_to_guest = "bad user"`).
    pub unknown_users_as_guests: bool,
    /// Offer SMB 3 multichannel: a client may bind more connections to a
    /// session (channels.rs).
    pub multichannel: bool,
    /// Serve CHANGE_NOTIFY; when off, it is answered
    /// STATUS_NOT_IMPLEMENTED (Samba's `change notify = no`).
    pub change_notify: bool,
    /// Accept Kerberos logons with this service's keys (the `[kerberos]`
    /// config); NTLM only when None.
    pub kerberos: Option<Arc<copyless_auth::kerberos::KerberosService>>,
    /// Their values at start; `Server::set_limits` changes them.
    pub limits: Limits,
    pub server_guid: [u8; 16],
    /// FILETIME the server started.
    pub start_time: u64,
    /// The server's own ids, which its tokens carry (see security.rs).
    pub unix_uid: u32,
    pub unix_gid: u32,
    /// Sessions act on disk as their users' Unix accounts. False when the
    /// server cannot take on another identity (it does not run as root):
    /// every session then acts as the server itself.
    pub act_as_users: bool,
    /// Who guest and anonymous sessions act as on disk when
    /// `act_as_users`: an unprivileged account, never the server.
    pub guest_identity: Identity,
    /// The sub-authorities of the server's machine SID, S-1-5-21-a-b-c,
    /// under which each user has a SID of its own.
    pub machine_sid: [u32; 3],
    /// Who may list every user's disk quota and set limits (quota.rs).
    pub quota_admins: Vec<Principal>,
}

pub struct Share {
    pub name: String,
    pub vfs: Arc<dyn Vfs>,
    pub read_only: bool,
    /// The local path, shown by NetrShareGetInfo.
    pub path: String,
    /// What clients show beside the share's name (Explorer's "Comment",
    /// `smbclient -L`'s last column).
    pub comment: String,
    /// The names it hides and vetoes.
    pub names: Arc<NameRules>,
    /// A user's home share (`[homes]`): listed to that user alone.
    pub owner: Option<String>,
    pub access: ShareAccess,
    /// What its audit trail keeps.
    pub audit: crate::audit::AuditKinds,
    /// Its earlier states, opened read-only through an @GMT token or a
    /// TWrp create context (Previous Versions).
    pub snapshots: Option<Arc<copyless_vfs::snapshots::Snapshots>>,
    /// Where deleted files go instead of away (recycle.rs).
    pub recycle: Option<Arc<crate::recycle::RecycleBin>>,
}

/// A user by name, or every member of a Unix group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    User(String),
    Group(u32),
}

/// Who may use a share, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareAccess {
    /// Only these may connect; None lets every authenticated user in.
    pub valid_users: Option<Vec<Principal>>,
    /// Read only for these, on a share others may write to.
    pub read_only_users: Vec<Principal>,
    /// May write, on a read-only share.
    pub write_users: Vec<Principal>,
    /// Guests and anonymous sessions may connect.
    pub guest_ok: bool,
    /// Listed when a client enumerates the server's shares.
    pub browseable: bool,
    /// A folder's listing leaves out what the reader may not read.
    pub access_based_enumeration: bool,
    /// The list of shares leaves this one out for those it would refuse.
    pub access_based_share_enum: bool,
    /// Every file operation on the share is done as this account...
    pub force_user: Option<Identity>,
    /// ...and with this primary group.
    pub force_group: Option<u32>,
    /// Which client addresses may connect (hosts.rs); others get
    /// STATUS_ACCESS_DENIED at tree connect.
    pub hosts: HostFilter,
}

impl Default for ShareAccess {
    fn default() -> ShareAccess {
        ShareAccess {
            valid_users: None,
            read_only_users: Vec::new(),
            write_users: Vec::new(),
            guest_ok: false,
            browseable: true,
            access_based_enumeration: false,
            access_based_share_enum: false,
            force_user: None,
            force_group: None,
            hosts: HostFilter::default(),
        }
    }
}

/// Whether `user`, in `groups`, is one of `list`.
pub fn includes(list: &[Principal], user: &str, groups: &[u32]) -> bool {
    list.iter().any(|p| match p {
        Principal::User(name) => name.eq_ignore_ascii_case(user),
        Principal::Group(gid) => groups.contains(gid),
    })
}

/// The shares, each at a fixed index (the file table, the tracer and the
/// local watch know shares by it). A reload puts a changed share at its
/// index and empties a removed one's; tree connects made before notice
/// by the generation, which every change raises.
pub struct Shares {
    slots: RwLock<Vec<Option<Arc<Share>>>>,
    generation: AtomicU64,
}

impl Shares {
    fn new(shares: Vec<Share>) -> Shares {
        Shares {
            slots: RwLock::new(shares.into_iter().map(|s| Some(Arc::new(s))).collect()),
            generation: AtomicU64::new(0),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Option<Arc<Share>>>> {
        self.slots.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get(&self, index: usize) -> Option<Arc<Share>> {
        self.read().get(index).cloned().flatten()
    }

    /// The share of this name (case-insensitive, as on Windows).
    pub fn find(&self, name: &str) -> Option<(usize, Arc<Share>)> {
        self.read().iter().enumerate().find_map(|(i, s)| {
            s.as_ref()
                .filter(|s| s.name.eq_ignore_ascii_case(name))
                .map(|s| (i, s.clone()))
        })
    }

    /// Every share, with its index.
    pub fn all(&self) -> Vec<(usize, Arc<Share>)> {
        self.read()
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.clone().map(|s| (i, s)))
            .collect()
    }

    /// The index a share added now gets.
    pub fn next_index(&self) -> usize {
        self.read().len()
    }

    /// Puts `share` at `index`, or empties it: tree connects to what was
    /// there end at their next request.
    pub fn put(&self, index: usize, share: Option<Share>) {
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        if slots.len() <= index {
            slots.resize(index + 1, None);
        }
        slots[index] = share.map(Arc::new);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Adds the share `make` makes for the index it is to have, if it
    /// makes one: the index is held meanwhile, so that a share added at
    /// once (a reload, another home share) takes the next.
    pub fn add(&self, make: impl FnOnce(usize) -> Option<Share>) -> Option<(usize, Arc<Share>)> {
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        let index = slots.len();
        let share = Arc::new(make(index)?);
        slots.push(Some(share.clone()));
        self.generation.fetch_add(1, Ordering::Release);
        Some((index, share))
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether `share` is still the one at `index`.
    pub fn holds(&self, index: usize, share: &Arc<Share>) -> bool {
        self.read()
            .get(index)
            .and_then(Option::as_ref)
            .is_some_and(|s| Arc::ptr_eq(s, share))
    }
}

/// Keeps the shares in line with their folders (the server's owner
/// installs one, since only it knows how a share is made from its
/// configuration): a share whose folder is gone is set aside, and served
/// again once its folder is back.
pub trait ShareKeeper: Send + Sync {
    /// Looks at the folder of every share, and of every share set aside,
    /// and puts [`Server::shares`] in line.
    fn check(&self, server: &Server);
}

/// Makes each user's home share (`[homes]`); the server's owner installs
/// one, since only it knows how a share is made from its configuration.
pub trait HomeShares: Send + Sync {
    /// What clients are shown beside a home share's name.
    fn comment(&self) -> String;
    /// Whether `user`, who acts on disk as `who`, gets a home share.
    fn offered_to(&self, user: &str, who: &Identity) -> bool;
    /// The home share of `user`, who acts on disk as `who`, put in
    /// [`Server::shares`] and its folder made (the user's, mode 0700)
    /// the first time; None when there can be none (said in the log).
    fn home(&self, server: &Server, user: &str, who: &Identity) -> Option<(usize, Arc<Share>)>;
}

pub struct Server {
    /// `config.limits` are those at start: read [`Server::limits`].
    pub config: ServerConfig,
    limits: RwLock<Limits>,
    pub shares: Shares,
    pub credentials: Arc<dyn Credentials>,
    pub open_quota: Arc<OpenQuota>,
    /// Authenticated sessions and the connections that hold them.
    pub sessions: SessionTable,
    /// Each client's connections, by ClientGuid.
    pub clients: ClientTable,
    /// Durable opens whose connection went.
    pub durable: DurableTable,
    /// What `copyless status` shows of each connection.
    pub(crate) status_board: crate::status::StatusBoard,
    files: Mutex<FileTable>,
    /// The table says here whether any file has a byte-range lock...
    any_byte_locks: Arc<AtomicBool>,
    /// ...or an oplock, and whether any directory is watched.
    any_oplocks: Arc<AtomicBool>,
    any_watchers: Arc<AtomicBool>,
    /// Bytes of directory listings kept, per user and in all.
    pub listing_ledger: Arc<ListingLedger>,
    /// The engine's watcher of changes local processes make (local.rs).
    pub(crate) local_watch: OnceLock<Arc<dyn LocalWatch>>,
    share_keeper: OnceLock<Arc<dyn ShareKeeper>>,
    homes: OnceLock<Arc<dyn HomeShares>>,
    /// Paths the server itself is changing, whose kernel events are not
    /// reported again.
    pub(crate) own: OwnChanges,
    next_id: AtomicU64,
}

impl Server {
    pub fn new(
        config: ServerConfig,
        shares: Vec<Share>,
        credentials: Arc<dyn Credentials>,
    ) -> Arc<Server> {
        let files = FileTable::default();
        Arc::new(Server {
            open_quota: OpenQuota::new(
                config.limits.max_open_files_total,
                config.limits.max_open_files_per_user,
            ),
            limits: RwLock::new(config.limits),
            config,
            shares: Shares::new(shares),
            credentials,
            sessions: SessionTable::default(),
            clients: ClientTable::default(),
            durable: DurableTable::default(),
            status_board: crate::status::StatusBoard::default(),
            any_byte_locks: files.any_locks_flag(),
            any_oplocks: files.any_oplocks_flag(),
            any_watchers: files.any_watchers_flag(),
            files: Mutex::new(files),
            listing_ledger: ListingLedger::new(),
            local_watch: OnceLock::new(),
            share_keeper: OnceLock::new(),
            homes: OnceLock::new(),
            own: OwnChanges::default(),
            next_id: AtomicU64::new(1),
        })
    }

    /// The limits in force now.
    pub fn limits(&self) -> Limits {
        *self.limits.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A reload changed the limits: counts are checked against the new
    /// ones from now on, and connections made from now on get its sizes
    /// and credits (limits.rs).
    pub fn set_limits(&self, limits: Limits) {
        self.open_quota
            .set_caps(limits.max_open_files_total, limits.max_open_files_per_user);
        *self.limits.write().unwrap_or_else(|e| e.into_inner()) = limits;
    }

    /// A reload put the share at `index` at `path`, or removed it: the
    /// engine's watch of local changes follows.
    pub fn share_changed(&self, index: usize, path: Option<&str>) {
        if let Some(watch) = self.local_watch.get() {
            watch.share_changed(index, path);
        }
    }

    /// Installs the keeper of the shares' folders, once.
    pub fn set_share_keeper(&self, keeper: Arc<dyn ShareKeeper>) {
        let _ = self.share_keeper.set(keeper);
    }

    /// Installs the maker of home shares, once.
    pub fn set_homes(&self, homes: Arc<dyn HomeShares>) {
        let _ = self.homes.set(homes);
    }

    /// The maker of home shares, where the config has `[homes]`.
    pub fn homes(&self) -> Option<&Arc<dyn HomeShares>> {
        self.homes.get()
    }

    /// Has the keeper look at the shares' folders now, if there is one.
    pub fn check_shares(&self) {
        if let Some(k) = self.share_keeper.get() {
            k.check(self);
        }
    }

    /// A process-wide unique id for sessions, file ids and the like.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The table is only ever held for short, non-blocking updates; a
    /// poisoned lock (a panic in another connection) does not stop others.
    /// Whether any file has a byte-range lock; while none has, reads and
    /// writes need not ask the table.
    pub fn has_byte_locks(&self) -> bool {
        self.any_byte_locks.load(Ordering::Acquire)
    }

    /// Whether any file has an oplock; while none has, writes need not
    /// ask the table for level II oplocks to break.
    pub fn has_oplocks(&self) -> bool {
        self.any_oplocks.load(Ordering::Acquire)
    }

    /// Whether any directory is watched (CHANGE_NOTIFY); while none is,
    /// changes need not be looked up.
    pub fn has_watchers(&self) -> bool {
        self.any_watchers.load(Ordering::Acquire)
    }

    pub fn files(&self) -> MutexGuard<'_, FileTable> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A lease break goes to the client's oldest connection, as Windows
    /// and Samba send it, whichever connection opened the lease.
    pub(crate) fn lease_break_letter(&self, b: LeaseBreak) -> Message {
        Message {
            to: self.clients.oldest(&b.client).unwrap_or(b.connection),
            letter: Letter(Kind::LeaseBreak(b)),
        }
    }
}
