//! The table of open files shared by every connection: share modes,
//! delete-on-close, and the paths renames move.
//!
//! Every question a request asks of it costs a lookup, not a scan of all
//! open files or of all opens of one file: a client may hold many thousands
//! of opens, and the table's lock is everyone's. Share modes are kept as
//! counts (as Windows' IoCheckShareAccess keeps them), files by key in
//! order (a file's streams are neighbours), and a second index by path.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use copyless_proto::status::{self, NtStatus};

use crate::access::{self, SHARE_CHECKED};
use crate::leases::{self, Lease, LeaseBreak, LeaseId};
use crate::locks::{self, ByteLock};
use crate::oplocks::{self, Ask, Break, OnOpen, Oplock};
use crate::{ConnectionId, Token};
use copyless_proto::lease::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};
use copyless_proto::messages::{OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_II};

/// (share index, device, inode, stream): the last is 0 for a file's main
/// data and [`stream_id`] for an alternate data stream, so each stream
/// has share modes of its own, as on NTFS.
pub type FileKey = (usize, u64, u64, u64);

/// The key of the main data of the file `key` is of.
fn main_data(key: FileKey) -> FileKey {
    (key.0, key.1, key.2, 0)
}

/// A nonzero id for a stream name, the same for every case of it.
pub fn stream_id(name: Option<&str>) -> u64 {
    let Some(name) = name else { return 0 };
    // FNV-1a over the case-folded name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in name.chars().flat_map(char::to_lowercase) {
        let mut buf = [0u8; 4];
        for b in c.encode_utf8(&mut buf).bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h | 1
}

/// One open of a file as the share-mode checks see it.
#[derive(Debug, Clone, Copy)]
pub struct OpenRef {
    pub id: u64,
    pub access: u32,
    pub share_access: u32,
    /// The lease it shares, if it named one.
    pub lease: Option<LeaseId>,
    /// The session that holds it, for `copyless status`.
    pub session: u64,
}

/// Everything known about an open file across all its opens.
#[derive(Debug, Default)]
pub struct FileState {
    /// The file's current path (renames through one open move all opens).
    path: String,
    pub is_dir: bool,
    opens: HashMap<u64, OpenRef>,
    counts: ShareCounts,
    /// Set by FileDispositionInformation, or by closing an open made with
    /// FILE_DELETE_ON_CLOSE: the file goes away when the last open closes.
    pub delete_pending: bool,
    /// Byte-range locks of its opens.
    locks: Vec<ByteLock>,
    /// Lock requests waiting for some of them to go.
    lock_waiters: Vec<LockWaiter>,
    /// Oplocks its opens hold.
    oplocks: Vec<Oplock>,
    /// Held requests (a connection and its token) waiting for oplock
    /// breaks to be acknowledged.
    break_waiters: Vec<Held>,
    /// Opens of this directory that watch it for changes.
    watchers: Vec<Watcher>,
    /// Leases on the file (kept in the table's `leases`).
    leases: Vec<LeaseId>,
}

/// A lease an open asks for: its name, the caching it wants, and for
/// version 2 the parent's key and the epoch.
#[derive(Debug, Clone, Copy)]
pub struct LeaseAsk {
    pub id: LeaseId,
    pub state: u32,
    pub v2: Option<([u8; 16], u16)>,
}

/// The lease an open has, as its CREATE response tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    pub state: u32,
    pub breaking: bool,
    pub epoch: u16,
    pub v2: Option<[u8; 16]>,
}

/// A held request: its connection and token (waiting.rs).
pub type Held = (ConnectionId, Token);

/// An open of a directory that CHANGE_NOTIFY made watch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watcher {
    pub connection: ConnectionId,
    /// The open (its volatile file id).
    pub open: u64,
    /// The completion filter of its last request.
    pub filter: u32,
    /// Its subtree too, not only its entries.
    pub recursive: bool,
}

/// A change a watcher is to be told of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub connection: ConnectionId,
    pub open: u64,
    pub action: u32,
    /// The changed entry's name beneath the watched directory, with `\`
    /// between components.
    pub name: String,
}

/// An open's oplock request, and what came of it.
#[derive(Debug)]
pub struct OplockRequest {
    /// The level asked for (SMB2_OPLOCK_LEVEL_*).
    pub level: u8,
    pub connection: ConnectionId,
    /// The session opening the file.
    pub session: u64,
    /// Woken when the open must wait for breaks.
    pub token: Token,
    /// The open overwrites or supersedes the file...
    pub truncating: bool,
    /// ...or creates it.
    pub created: bool,
    /// The level granted.
    pub granted: u8,
    /// Breaks to send to their holders.
    pub breaks: Vec<Break>,
    /// The file whose breaks the open waits for.
    pub waited_on: Option<FileKey>,
    /// A lease asked for instead of an oplock...
    pub lease: Option<LeaseAsk>,
    /// ...and the lease the open has.
    pub lease_granted: Option<LeaseGrant>,
    /// Lease breaks to send.
    pub lease_breaks: Vec<LeaseBreak>,
    /// The request runs again after waiting for breaks.
    pub retry: bool,
    /// Disconnected durable opens in the open's way: they are to be
    /// closed, and the open tried again.
    pub purge: Vec<u64>,
    /// The open's lease made its directory one whose local changes are
    /// to be looked for.
    pub watched_changed: bool,
    /// Directory leases are offered on the connection.
    pub dir_leasing: bool,
}

/// A LOCK request that waits, pending, for locks in its way to go: its
/// connection retries it when they do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockWaiter {
    pub connection: ConnectionId,
    pub async_id: u64,
    /// The open it would lock for (its volatile file id).
    pub open: u64,
}

/// What became of a lock request.
#[derive(Debug, PartialEq, Eq)]
pub enum Locked {
    Granted,
    /// Not now: the waiter was added, to be woken when locks go.
    Waiting,
}

/// Breaks the leases of other keys on a file that an open is about to
/// join (Samba's delay_for_oplock, MS-FSA 2.1.4.12): write caching goes
/// (handle caching too when the open would fail its share-mode check; all
/// of it when the open overwrites). Returns whether the open must wait
/// for the acknowledgements.
fn break_leases_on_open(
    all: &mut HashMap<LeaseId, Lease>,
    state: &FileState,
    own: Option<LeaseId>,
    ask: Ask,
    oplock: &mut OplockRequest,
) -> bool {
    let delay = if ask.sharing_conflict {
        HANDLE_CACHING
    } else {
        WRITE_CACHING
    };
    let overwrite = ask.truncating && !ask.sharing_conflict;
    if leases::is_lease_stat_open(ask.access) {
        return false;
    }
    let mut hold = false;
    for id in state.leases.iter().filter(|id| Some(**id) != own) {
        let Some(l) = all.get_mut(id) else { continue };
        let current = l.state;
        let target = if overwrite { 0 } else { current & !delay };
        if current & !target == 0 {
            hold |= l.breaking && oplock.retry;
            continue;
        }
        let was_breaking = l.breaking;
        if let Some(b) = l.break_to(id, target) {
            oplock.lease_breaks.push(b);
        }
        hold |= current & delay != 0 || (was_breaking && oplock.retry);
    }
    hold
}

/// The disconnected durable opens of a file that a new open would have to
/// break, or would fail its share-mode check against: Windows closes them
/// at once rather than wait for a client that is gone (MS-SMB2 3.3.4.6,
/// smbtorture durable-open.oplock, lease, open2-*).
fn parked_in_the_way(
    state: &FileState,
    parked: &HashSet<u64>,
    leases: &HashMap<LeaseId, Lease>,
    new: &OpenRef,
    own: Option<LeaseId>,
    oplock: &OplockRequest,
) -> Vec<u64> {
    if parked.is_empty() {
        return Vec::new();
    }
    let stat = oplocks::is_stat_open(new.access, oplock.truncating);
    state
        .opens
        .values()
        .filter(|p| parked.contains(&p.id))
        .filter(|p| {
            if access::share_conflict(new.access, new.share_access, p.access, p.share_access) {
                return true;
            }
            if stat {
                return false;
            }
            let oplocked = state.oplocks.iter().any(|o| o.open == p.id);
            let lease = p
                .lease
                .filter(|id| Some(*id) != own)
                .and_then(|id| leases.get(&id));
            oplocked || lease.is_some_and(|l| l.state & WRITE_CACHING != 0 || oplock.truncating)
        })
        .map(|p| p.id)
        .collect()
}

/// The paths beneath directory `path` are those from "path/" up to (not
/// including) "path0", '0' being the character after '/'.
fn beneath(path: &str) -> (String, String) {
    (format!("{path}/"), format!("{path}0"))
}

/// What closing an open leaves to do.
#[derive(Default)]
pub struct Closed {
    /// It was the file's last open.
    pub last: Option<LastClose>,
    /// Lock requests that may be granted now that its locks are gone.
    pub wake: Vec<LockWaiter>,
    /// Held requests that waited for its oplock break.
    pub wake_held: Vec<Held>,
    /// Watchers of a directory whose deletion became pending.
    pub doomed: Vec<Seen>,
    /// The open watched its directory: the set of watched directories
    /// may have changed.
    pub unwatched: bool,
}

impl FileState {
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Word for the watchers of a directory about to be deleted.
    fn doomed(&self) -> Vec<Seen> {
        self.watchers
            .iter()
            .map(|w| Seen {
                connection: w.connection,
                open: w.open,
                action: DIRECTORY_DELETED,
                name: String::new(),
            })
            .collect()
    }
}

/// The action of a [`Seen`] that says the watched directory itself is to
/// be deleted: waiting requests end with STATUS_DELETE_PENDING.
pub const DIRECTORY_DELETED: u32 = 0;

/// The action of a [`Seen`] that says changes were lost (the kernel's
/// queue of local changes overflowed): the next answer is
/// STATUS_NOTIFY_ENUM_DIR.
pub const OVERFLOWED: u32 = u32::MAX;

/// A directory some open watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedDir {
    pub key: FileKey,
    /// Its path beneath the share root, `/`-separated, empty for the root.
    pub path: String,
    /// Some watcher wants its whole subtree (WATCH_TREE).
    pub recursive: bool,
}

/// How many opens of a file hold and share each kind of access.
#[derive(Debug, Default, Clone, Copy)]
struct ShareCounts {
    /// Opens whose access takes part in share modes, and of those, how
    /// many read, write or delete, and how many let others do so.
    checked: u32,
    readers: u32,
    writers: u32,
    deleters: u32,
    sharing_read: u32,
    sharing_write: u32,
    sharing_delete: u32,
    /// Every open, checked or not: those with DELETE access, and those
    /// that do not share delete.
    delete_access: u32,
    not_sharing_delete: u32,
}

impl ShareCounts {
    fn add(&mut self, o: &OpenRef, sign: i32) {
        let bump = |n: &mut u32, yes: bool| {
            if yes {
                *n = n.wrapping_add_signed(sign);
            }
        };
        if o.access & SHARE_CHECKED != 0 {
            bump(&mut self.checked, true);
            bump(&mut self.readers, access::reads(o.access));
            bump(&mut self.writers, access::writes(o.access));
            bump(&mut self.deleters, access::deletes(o.access));
            bump(
                &mut self.sharing_read,
                o.share_access & access::SHARE_READ != 0,
            );
            bump(
                &mut self.sharing_write,
                o.share_access & access::SHARE_WRITE != 0,
            );
            bump(
                &mut self.sharing_delete,
                o.share_access & access::SHARE_DELETE != 0,
            );
        }
        bump(&mut self.delete_access, o.access & access::DELETE != 0);
        bump(
            &mut self.not_sharing_delete,
            o.share_access & access::SHARE_DELETE == 0,
        );
    }

    /// Whether a new open conflicts with any open counted here: exactly
    /// [`access::share_conflict`] against each of them.
    fn conflicts(&self, new_access: u32, new_share: u32) -> bool {
        if new_access & SHARE_CHECKED == 0 || self.checked == 0 {
            return false;
        }
        (access::reads(new_access) && self.sharing_read < self.checked)
            || (access::writes(new_access) && self.sharing_write < self.checked)
            || (access::deletes(new_access) && self.sharing_delete < self.checked)
            || (self.readers > 0 && new_share & access::SHARE_READ == 0)
            || (self.writers > 0 && new_share & access::SHARE_WRITE == 0)
            || (self.deleters > 0 && new_share & access::SHARE_DELETE == 0)
    }
}

/// What closing the last open of a file leaves to do.
pub struct LastClose {
    pub path: String,
    pub is_dir: bool,
    pub delete_pending: bool,
    /// The file itself goes, not only the stream this open was of: its
    /// deletion waited for the last open of its streams.
    pub deletes_file: bool,
}

#[derive(Default)]
pub struct FileTable {
    files: BTreeMap<FileKey, FileState>,
    /// Every file of `files` by (share, path).
    by_path: BTreeSet<(usize, String, FileKey)>,
    /// Watching opens on all directories, and whether there are any.
    watchers: usize,
    any_watchers: Arc<AtomicBool>,
    /// The directories that have watchers...
    watched: BTreeSet<FileKey>,
    /// ...and those that have leases: local changes in both are looked
    /// for.
    leased_dirs: BTreeSet<FileKey>,
    /// Every lease, by client and key.
    leases: HashMap<LeaseId, Lease>,
    /// Oplocks held on all files, and whether any file has one.
    oplocks: usize,
    any_oplocks: Arc<AtomicBool>,
    /// Byte-range locks held on all files...
    byte_locks: usize,
    /// ...and whether there are any, for readers without the table's lock.
    any_locks: Arc<AtomicBool>,
    /// Opens whose connection went, kept as durable handles.
    parked: HashSet<u64>,
    /// Opens made under an application instance id, by it (MS-SMB2
    /// 3.3.5.9.13): a failed-over instance's new open closes them.
    app_instances: HashMap<[u8; 16], Vec<AppOpen>>,
}

/// An open made under an application instance id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppOpen {
    pub open: u64,
    pub key: FileKey,
    pub connection: ConnectionId,
    pub client_guid: [u8; 16],
}

impl FileTable {
    pub fn get(&self, key: &FileKey) -> Option<&FileState> {
        self.files.get(key)
    }

    /// Whether closing an open of `key` may delete something: the stream
    /// or the file it belongs to is marked for deletion.
    pub fn deletes_at_close(&self, key: &FileKey) -> bool {
        [*key, main_data(*key)]
            .iter()
            .any(|k| self.files.get(k).is_some_and(|s| s.delete_pending))
    }

    /// Marks the file for deletion at its last close, or no longer; a
    /// directory's watchers come back when it is, to be told.
    pub fn set_delete_pending(&mut self, key: &FileKey, pending: bool) -> Vec<Seen> {
        let Some(state) = self.files.get_mut(key) else {
            return Vec::new();
        };
        state.delete_pending = pending;
        if pending {
            state.doomed()
        } else {
            Vec::new()
        }
    }

    /// Adds an open of the file at `path` after checking delete-pending,
    /// oplocks and share modes against every other open of it. When
    /// oplocks must be broken first, the request's token joins the file's
    /// waiters and the answer is PENDING: the open is to be tried again
    /// once it is woken.
    pub fn register(
        &mut self,
        key: FileKey,
        path: &str,
        is_dir: bool,
        open: OpenRef,
        oplock: &mut OplockRequest,
    ) -> Result<(), NtStatus> {
        // A file marked for deletion takes no new opens, of its main data
        // or of its streams, even while its deletion waits for open
        // streams (smb2.streams.delete).
        if self
            .files
            .get(&main_data(key))
            .is_some_and(|s| s.delete_pending)
        {
            return Err(status::DELETE_PENDING);
        }
        // A stream open without FILE_SHARE_DELETE keeps its file from
        // being opened for DELETE (smb2.streams.delete).
        if key.3 == 0 && open.access & access::DELETE != 0 && self.a_stream_denies_delete(key) {
            return Err(status::SHARING_VIOLATION);
        }
        // A lease belongs to one file: its key names no other.
        let own = oplock.lease.map(|l| l.id);
        if let Some(l) = own.and_then(|id| self.leases.get(&id)) {
            if l.file != key {
                return Err(status::INVALID_PARAMETER);
            }
        }
        if let Some(state) = self.files.get_mut(&key) {
            if state.delete_pending {
                return Err(status::DELETE_PENDING);
            }
            let purge = parked_in_the_way(state, &self.parked, &self.leases, &open, own, oplock);
            if !purge.is_empty() {
                oplock.purge = purge;
                return Err(status::SHARING_VIOLATION);
            }
            // Emptying a file writes it, whatever access the open asked
            // for: another open that shares no writing keeps it whole.
            let as_writer = if oplock.truncating {
                open.access | access::FILE_WRITE_DATA
            } else {
                open.access
            };
            let conflict = state.counts.conflicts(as_writer, open.share_access);
            let ask = Ask {
                access: open.access,
                truncating: oplock.truncating,
                sharing_conflict: conflict,
            };
            let before = state.oplocks.len();
            let decision = oplocks::on_open(&mut state.oplocks, ask);
            let after = state.oplocks.len();
            let (mut hold, breaks) = match decision {
                OnOpen::Wait(breaks) => (true, breaks),
                OnOpen::Go(breaks) => (false, breaks),
            };
            oplock.breaks = breaks;
            if !oplocks::is_stat_open(ask.access, ask.truncating) {
                hold |= break_leases_on_open(&mut self.leases, state, own, ask, oplock);
            }
            if hold {
                state.break_waiters.push((oplock.connection, oplock.token));
                oplock.waited_on = Some(key);
                return Err(status::PENDING);
            }
            self.count_oplocks(before, after);
            if conflict {
                return Err(status::SHARING_VIOLATION);
            }
        } else {
            self.by_path.insert((key.0, path.to_owned(), key));
        }
        let state = self.files.entry(key).or_insert_with(|| FileState {
            path: path.to_owned(),
            is_dir,
            ..Default::default()
        });
        let others = state.opens.len();
        let stat_open = oplocks::is_stat_open(open.access, oplock.truncating);
        // A directory's lease is a version 2 one, and caches no writes
        // (MS-SMB2 3.3.5.9.11).
        let leased = oplock
            .lease
            .filter(|l| !is_dir || (l.v2.is_some() && oplock.dir_leasing));
        let open = OpenRef {
            lease: leased.map(|l| l.id),
            ..open
        };
        if let Some(ask) = leased {
            let requested = if is_dir {
                ask.state & !WRITE_CACHING
            } else {
                ask.state
            };
            // Others: leases of other keys, oplocks, and opens that are
            // not stat opens and not of this lease.
            let other_leases = state.leases.iter().any(|id| *id != ask.id);
            let other_opens = state
                .opens
                .values()
                .any(|o| o.lease != Some(ask.id) && !oplocks::is_stat_open(o.access, false));
            let oplocked = !state.oplocks.is_empty();
            let granted =
                leases::grantable(requested, other_leases || other_opens || oplocked, oplocked);
            if is_dir && state.leases.is_empty() && !self.leased_dirs.contains(&key) {
                self.leased_dirs.insert(key);
                oplock.watched_changed = true;
            }
            let lease = self.leases.entry(ask.id).or_insert_with(|| {
                state.leases.push(ask.id);
                Lease {
                    file: key,
                    state: granted,
                    breaking: false,
                    break_to_requested: 0,
                    break_to_required: 0,
                    epoch: ask.v2.map_or(0, |(_, e)| e.wrapping_add(1)),
                    v2: ask.v2.map(|(parent, _)| parent),
                    opens: Vec::new(),
                }
            });
            if !lease.opens.is_empty() {
                leases::upgrade(lease, requested, granted);
            }
            lease.opens.push((open.id, oplock.connection));
            self.any_oplocks.store(true, Ordering::Release);
            oplock.lease_granted = Some(LeaseGrant {
                state: lease.state,
                breaking: lease.breaking,
                epoch: lease.epoch,
                v2: lease.v2,
            });
        }
        state.counts.add(&open, 1);
        state.opens.insert(open.id, open);
        if oplock.lease.is_some() {
            return Ok(());
        }
        // A stat open of an existing file gets no oplock; while another
        // client caches handles under a lease, no open gets one.
        let leased_handles = state
            .leases
            .iter()
            .filter_map(|id| self.leases.get(id))
            .any(|l| l.state & HANDLE_CACHING != 0);
        oplock.granted = if (stat_open && !oplock.created) || leased_handles {
            0
        } else {
            let others = others.max(usize::from(!state.leases.is_empty()));
            let granted = oplocks::grant(&state.oplocks, oplock.level, others, is_dir);
            if state.leases.is_empty() {
                granted
            } else {
                granted.min(OPLOCK_LEVEL_II)
            }
        };
        if oplock.granted != 0 {
            state.oplocks.push(Oplock {
                open: open.id,
                holder: oplock.connection,
                level: oplock.granted,
                breaking_to: None,
            });
            self.count_oplocks(0, 1);
        }
        Ok(())
    }

    /// Keeps the count of oplocks after a file's went from `before` to
    /// `after`.
    fn count_oplocks(&mut self, before: usize, after: usize) {
        self.oplocks = self.oplocks + after - before;
        self.note_caching();
    }

    /// Keeps the flag that says whether any oplock or lease is held.
    fn note_caching(&self) {
        let any = self.oplocks > 0 || !self.leases.is_empty();
        self.any_oplocks.store(any, Ordering::Release);
    }

    /// Says, without the table's lock, whether any file has an oplock or
    /// a lease: writes look no further when none has.
    /// Whether the open caches what makes it worth keeping when its
    /// connection goes (MS-SMB2 3.3.7.1): a batch oplock or a lease with
    /// handle caching, and no break of it under way.
    pub fn keeps_handle(&self, key: &FileKey, id: u64) -> bool {
        let Some(state) = self.files.get(key) else {
            return false;
        };
        let batch = state
            .oplocks
            .iter()
            .any(|o| o.open == id && o.level == OPLOCK_LEVEL_BATCH && o.breaking_to.is_none());
        batch
            || state
                .opens
                .get(&id)
                .and_then(|o| o.lease)
                .and_then(|l| self.leases.get(&l))
                .is_some_and(|l| l.state & HANDLE_CACHING != 0 && !l.breaking)
    }

    /// The open's connection went; it stays, as a durable handle.
    /// Returns the held requests that waited for it to go.
    pub fn park(&mut self, key: &FileKey, id: u64) -> Vec<Held> {
        self.parked.insert(id);
        self.files
            .get_mut(key)
            .map(|f| std::mem::take(&mut f.break_waiters))
            .unwrap_or_default()
    }

    /// The entries of directory `dir` changed: its leases break to
    /// nothing (listings cached under them are stale), but `except`, the
    /// lease the change was made under named as its parent: its client
    /// knows.
    pub fn break_dir_leases(
        &mut self,
        share: usize,
        dir: &str,
        except: Option<LeaseId>,
    ) -> Vec<LeaseBreak> {
        let leased: Vec<LeaseId> = self
            .at_path(share, dir)
            .filter(|(key, f)| key.3 == 0 && f.is_dir)
            .flat_map(|(_, f)| f.leases.iter().copied())
            .filter(|id| Some(*id) != except)
            .collect();
        leased
            .into_iter()
            .filter_map(|id| self.leases.get_mut(&id)?.break_to(&id, 0))
            .collect()
    }

    /// Every directory lease breaks to nothing: changes in the
    /// directories went unseen (the kernel lost events).
    pub fn break_all_dir_leases(&mut self) -> Vec<LeaseBreak> {
        let leased: Vec<LeaseId> = self
            .leased_dirs
            .iter()
            .filter_map(|key| self.files.get(key))
            .flat_map(|f| f.leases.iter().copied())
            .collect();
        leased
            .into_iter()
            .filter_map(|id| self.leases.get_mut(&id)?.break_to(&id, 0))
            .collect()
    }

    /// Whether lease `id` is held on a file other than the one at `path`
    /// (and stream) of `share`.
    pub fn lease_is_for_another(
        &self,
        id: &LeaseId,
        share: usize,
        path: &str,
        stream: u64,
    ) -> bool {
        let Some(lease) = self.leases.get(id) else {
            return false;
        };
        let (s, _, _, st) = lease.file;
        s != share
            || st != stream
            || self
                .files
                .get(&lease.file)
                .is_some_and(|f| !f.path.eq_ignore_ascii_case(path))
    }

    /// Notes the application instance an open was made under.
    pub fn add_app_instance(&mut self, app: [u8; 16], open: AppOpen) {
        self.app_instances.entry(app).or_default().push(open);
    }

    fn forget_app_instance(&mut self, id: u64) -> bool {
        if self.app_instances.is_empty() {
            return false;
        }
        let mut found = false;
        self.app_instances.retain(|_, opens| {
            let before = opens.len();
            opens.retain(|o| o.open != id);
            found |= opens.len() != before;
            !opens.is_empty()
        });
        found
    }

    /// Opens of another client made under application instance `app`
    /// of the file at `path`: a new open under it closes them.
    pub fn app_instance_opens(
        &self,
        app: &[u8; 16],
        client_guid: [u8; 16],
        share: usize,
        path: &str,
    ) -> Vec<AppOpen> {
        let Some(opens) = self.app_instances.get(app) else {
            return Vec::new();
        };
        opens
            .iter()
            .filter(|o| o.client_guid != client_guid && o.key.0 == share)
            .filter(|o| {
                self.files
                    .get(&o.key)
                    .is_some_and(|f| f.path.eq_ignore_ascii_case(path))
            })
            .copied()
            .collect()
    }

    /// A held request waits for an open of the file to close.
    pub fn await_close(&mut self, key: &FileKey, held: Held) {
        if let Some(state) = self.files.get_mut(key) {
            state.break_waiters.push(held);
        }
    }

    /// The parked open is back, on `connection`: its breaks go there.
    pub fn unpark(&mut self, key: &FileKey, id: u64, connection: ConnectionId, session: u64) {
        self.parked.remove(&id);
        for o in self.app_instances.values_mut().flatten() {
            if o.open == id {
                o.connection = connection;
            }
        }
        let Some(state) = self.files.get_mut(key) else {
            return;
        };
        if let Some(open) = state.opens.get_mut(&id) {
            open.session = session;
        }
        for o in state.oplocks.iter_mut().filter(|o| o.open == id) {
            o.holder = connection;
        }
        let lease = state.opens.get(&id).and_then(|o| o.lease);
        if let Some(l) = lease.and_then(|l| self.leases.get_mut(&l)) {
            for (_, c) in l.opens.iter_mut().filter(|(o, _)| *o == id) {
                *c = connection;
            }
        }
    }

    /// Every open, with the index of its share (`copyless status`).
    pub fn open_files(&self) -> Vec<(usize, crate::status::OpenStatus)> {
        self.files
            .iter()
            .flat_map(|(key, state)| {
                state.opens.values().map(move |o| {
                    let open = crate::status::OpenStatus {
                        share: String::new(),
                        path: state.path.clone(),
                        is_dir: state.is_dir,
                        session: o.session,
                        access: o.access,
                        share_access: o.share_access,
                        delete_pending: state.delete_pending,
                        disconnected: self.parked.contains(&o.id),
                        oplock: state
                            .oplocks
                            .iter()
                            .find(|op| op.open == o.id)
                            .map_or(0, |op| op.level),
                        lease: o.lease.and_then(|id| self.leases.get(&id)).map(|l| l.state),
                        locks: state
                            .locks
                            .iter()
                            .filter(|l| l.open == o.id)
                            .map(|l| crate::status::LockStatus {
                                offset: l.offset,
                                length: l.length,
                                exclusive: l.exclusive,
                            })
                            .collect(),
                    };
                    (key.0, open)
                })
            })
            .collect()
    }

    /// What the open caches now: its oplock level, or its lease.
    pub fn caching_of(&self, key: &FileKey, id: u64) -> (u8, Option<(LeaseId, LeaseGrant)>) {
        let Some(state) = self.files.get(key) else {
            return (0, None);
        };
        let level = state
            .oplocks
            .iter()
            .find(|o| o.open == id)
            .map_or(0, |o| o.level);
        let lease = state
            .opens
            .get(&id)
            .and_then(|o| o.lease)
            .and_then(|id| Some((id, self.leases.get(&id)?)))
            .map(|(id, l)| {
                let grant = LeaseGrant {
                    state: l.state,
                    breaking: l.breaking,
                    epoch: l.epoch,
                    v2: l.v2,
                };
                (id, grant)
            });
        (level, lease)
    }

    pub fn any_oplocks_flag(&self) -> Arc<AtomicBool> {
        self.any_oplocks.clone()
    }

    /// The holder of `open` acknowledged a break of its oplock at
    /// `level`: the level it holds now, and the held requests to wake.
    pub fn acknowledge_break(
        &mut self,
        key: &FileKey,
        open: u64,
        level: u8,
    ) -> Result<(u8, Vec<Held>), NtStatus> {
        let state = self
            .files
            .get_mut(key)
            .ok_or(status::INVALID_OPLOCK_PROTOCOL)?;
        let before = state.oplocks.len();
        let level = oplocks::acknowledge(&mut state.oplocks, open, level)?;
        let after = state.oplocks.len();
        let wake = std::mem::take(&mut state.break_waiters);
        self.count_oplocks(before, after);
        Ok((level, wake))
    }

    /// Takes every break under way on the file as acknowledged (its timer
    /// ran out): the held requests to wake.
    pub fn end_breaks(&mut self, key: &FileKey) -> Vec<Held> {
        let Some(state) = self.files.get_mut(key) else {
            return Vec::new();
        };
        for id in &state.leases {
            if let Some(l) = self.leases.get_mut(id) {
                l.time_out();
            }
        }
        let before = state.oplocks.len();
        oplocks::end_breaks(&mut state.oplocks);
        let after = state.oplocks.len();
        let wake = std::mem::take(&mut state.break_waiters);
        self.count_oplocks(before, after);
        wake
    }

    /// A held request that ended another way (cancelled).
    pub fn forget_break_waiter(&mut self, key: &FileKey, connection: ConnectionId, token: Token) {
        if let Some(state) = self.files.get_mut(key) {
            state.break_waiters.retain(|w| *w != (connection, token));
        }
    }

    /// The file is written, resized or locked through open `by`: level
    /// II oplocks on it go to none, and the read caching of other
    /// clients' leases, unless `by`'s own lease caches writes (then no
    /// one else caches anything). Their holders are to be told; nobody
    /// waits.
    pub fn break_level2(&mut self, key: &FileKey, by: u64) -> (Vec<Break>, Vec<LeaseBreak>) {
        let Some(state) = self.files.get_mut(key) else {
            return (Vec::new(), Vec::new());
        };
        let own = state.opens.get(&by).and_then(|o| o.lease);
        if own
            .and_then(|id| self.leases.get(&id))
            .is_some_and(|l| l.state & WRITE_CACHING != 0)
        {
            return (Vec::new(), Vec::new());
        }
        let mut lease_breaks = Vec::new();
        for id in state.leases.iter().filter(|id| Some(**id) != own) {
            if let Some(l) = self.leases.get_mut(id) {
                if l.state & READ_CACHING != 0 {
                    lease_breaks.extend(l.break_to(id, 0));
                }
            }
        }
        let before = state.oplocks.len();
        let breaks = oplocks::break_level2(&mut state.oplocks);
        let after = state.oplocks.len();
        self.count_oplocks(before, after);
        (breaks, lease_breaks)
    }

    /// The file is about to be renamed or deleted through open `by`: the
    /// other clients' leases lose handle caching (their cached handles
    /// would stand in the way), and the request waits, as `waiter`, until
    /// they acknowledged (MS-FSA 2.1.5.14.1-2). Returns the breaks to
    /// send and whether to wait.
    pub fn break_handle_caching(
        &mut self,
        key: &FileKey,
        by: u64,
        waiter: (ConnectionId, Token),
    ) -> (Vec<LeaseBreak>, bool) {
        let Some(state) = self.files.get_mut(key) else {
            return (Vec::new(), false);
        };
        let own = state.opens.get(&by).and_then(|o| o.lease);
        let mut breaks = Vec::new();
        let mut wait = false;
        for id in state.leases.iter().filter(|id| Some(**id) != own) {
            if let Some(l) = self.leases.get_mut(id) {
                if l.state & HANDLE_CACHING != 0 {
                    breaks.extend(l.break_to(id, l.state & !HANDLE_CACHING));
                    wait = true;
                }
            }
        }
        if wait {
            state.break_waiters.push(waiter);
        }
        (breaks, wait)
    }

    /// The client acknowledged a break of its lease `id` with `state`:
    /// the break that follows, if any, and the held requests to wake.
    pub fn acknowledge_lease(
        &mut self,
        id: &LeaseId,
        state: u32,
    ) -> Result<(Option<LeaseBreak>, Vec<Held>), NtStatus> {
        let l = self
            .leases
            .get_mut(id)
            .ok_or(status::OBJECT_NAME_NOT_FOUND)?;
        let next = l.acknowledge(id, state)?;
        let file = l.file;
        let wake = self
            .files
            .get_mut(&file)
            .map(|s| std::mem::take(&mut s.break_waiters))
            .unwrap_or_default();
        Ok((next, wake))
    }

    /// Removes open `id`, its locks and its waiting lock requests;
    /// `delete_on_close` marks the file for deletion first. What is left
    /// to do comes back: the file's last close, and the lock requests its
    /// locks stood in the way of.
    pub fn unregister(&mut self, key: &FileKey, id: u64, delete_on_close: bool) -> Closed {
        let mut closed = Closed {
            last: None,
            wake: Vec::new(),
            wake_held: Vec::new(),
            doomed: Vec::new(),
            unwatched: false,
        };
        if !self.parked.is_empty() {
            self.parked.remove(&id);
        }
        let app_open = self.forget_app_instance(id);
        let Some(state) = self.files.get_mut(key) else {
            return closed;
        };
        if app_open {
            // A new open of the application's next instance may wait for
            // this one to go.
            closed.wake_held.append(&mut state.break_waiters);
        }
        if let Some(open) = state.opens.remove(&id) {
            state.counts.add(&open, -1);
            // The last open of a lease ends it, and any break of it.
            if let Some(lid) = open.lease {
                if let Some(l) = self.leases.get_mut(&lid) {
                    l.opens.retain(|(o, _)| *o != id);
                    if l.opens.is_empty() {
                        self.leases.remove(&lid);
                        state.leases.retain(|x| *x != lid);
                        if state.leases.is_empty() && self.leased_dirs.remove(key) {
                            closed.unwatched = true;
                        }
                        closed.wake_held.append(&mut state.break_waiters);
                        let any = self.oplocks > 0 || !self.leases.is_empty();
                        self.any_oplocks.store(any, Ordering::Release);
                    }
                }
            }
        }
        state.lock_waiters.retain(|w| w.open != id);
        let watchers = state.watchers.len();
        let deep = state.watchers.iter().any(|w| w.recursive);
        state.watchers.retain(|w| w.open != id);
        if watchers != state.watchers.len() {
            self.watchers -= watchers - state.watchers.len();
            self.any_watchers
                .store(self.watchers > 0, Ordering::Release);
            // The set changed: a directory no longer watched, or no
            // longer beneath.
            let shallower = deep && !state.watchers.iter().any(|w| w.recursive);
            if state.watchers.is_empty() {
                self.watched.remove(key);
                closed.unwatched = true;
            } else if shallower {
                closed.unwatched = true;
            }
        }
        let oplocks = state.oplocks.len();
        state.oplocks.retain(|o| o.open != id);
        if oplocks != state.oplocks.len() {
            // Closing instead of acknowledging ends a break too.
            closed.wake_held.append(&mut state.break_waiters);
            self.oplocks -= oplocks - state.oplocks.len();
            let any = self.oplocks > 0 || !self.leases.is_empty();
            self.any_oplocks.store(any, Ordering::Release);
        }
        let locks = state.locks.len();
        state.locks.retain(|l| l.open != id);
        if locks != state.locks.len() {
            self.byte_locks -= locks - state.locks.len();
            self.any_locks.store(self.byte_locks > 0, Ordering::Release);
            closed.wake = std::mem::take(&mut state.lock_waiters);
        }
        if delete_on_close {
            if !state.delete_pending {
                closed.doomed = state.doomed();
            }
            state.delete_pending = true;
        }
        if !state.opens.is_empty() {
            return closed;
        }
        // NTFS deletes a file when the last open of any of its streams
        // goes: until then its entry stays, without opens, to answer
        // DELETE_PENDING and to follow renames of what is above it.
        if key.3 == 0 && state.delete_pending && self.streams_open(key) {
            return closed;
        }
        if let Some(state) = self.files.remove(key) {
            self.by_path.remove(&(key.0, state.path.clone(), *key));
            closed.last = Some(LastClose {
                path: state.path,
                is_dir: state.is_dir,
                delete_pending: state.delete_pending,
                deletes_file: false,
            });
        }
        let main = main_data(*key);
        let waiting = self
            .files
            .get(&main)
            .is_some_and(|s| s.opens.is_empty() && s.delete_pending);
        if key.3 != 0 && waiting && !self.streams_open(key) {
            if let Some(state) = self.files.remove(&main) {
                self.by_path.remove(&(key.0, state.path.clone(), main));
                closed.last = Some(LastClose {
                    path: state.path,
                    is_dir: state.is_dir,
                    delete_pending: true,
                    deletes_file: true,
                });
            }
        }
        closed
    }

    /// Whether any stream of the file `key` belongs to is open.
    fn streams_open(&self, key: &FileKey) -> bool {
        let (share, dev, ino, _) = *key;
        self.files
            .range((share, dev, ino, 1)..=(share, dev, ino, u64::MAX))
            .next()
            .is_some()
    }

    /// Takes every lock of `new` on the file, or none: LOCK_NOT_GRANTED,
    /// or with a `waiter`, Waiting until locks of the file go.
    pub fn lock(
        &mut self,
        key: &FileKey,
        new: &[ByteLock],
        waiter: Option<LockWaiter>,
    ) -> Result<Locked, NtStatus> {
        let state = self.files.get_mut(key).ok_or(status::FILE_CLOSED)?;
        match (locks::lock_all(&mut state.locks, new), waiter) {
            (Ok(()), _) => {
                self.byte_locks += new.len();
                self.any_locks.store(self.byte_locks > 0, Ordering::Release);
                Ok(Locked::Granted)
            }
            (Err(status::LOCK_NOT_GRANTED), Some(w)) => {
                state.lock_waiters.push(w);
                Ok(Locked::Waiting)
            }
            (Err(e), _) => Err(e),
        }
    }

    /// A waiting lock request that ended another way (cancelled).
    pub fn forget_waiter(&mut self, key: &FileKey, connection: ConnectionId, async_id: u64) {
        if let Some(state) = self.files.get_mut(key) {
            state
                .lock_waiters
                .retain(|w| (w.connection, w.async_id) != (connection, async_id));
        }
    }

    /// Gives back the lock `open` holds on exactly this range; the lock
    /// requests waiting on the file come back, to be tried again.
    pub fn unlock(
        &mut self,
        key: &FileKey,
        open: u64,
        offset: u64,
        length: u64,
    ) -> Result<Vec<LockWaiter>, NtStatus> {
        let state = self.files.get_mut(key).ok_or(status::RANGE_NOT_LOCKED)?;
        locks::unlock(&mut state.locks, open, offset, length)?;
        self.byte_locks -= 1;
        self.any_locks.store(self.byte_locks > 0, Ordering::Release);
        Ok(std::mem::take(&mut state.lock_waiters))
    }

    /// Says, without the table's lock, whether any file has a byte-range
    /// lock: reads and writes look no further when none has.
    pub fn any_locks_flag(&self) -> Arc<AtomicBool> {
        self.any_locks.clone()
    }

    /// Whether `open` may read (or write) the range, as the file's locks
    /// say.
    pub fn may_access(
        &self,
        key: &FileKey,
        open: u64,
        offset: u64,
        length: u64,
        write: bool,
    ) -> bool {
        self.files
            .get(key)
            .is_none_or(|s| locks::may_access(&s.locks, open, offset, length, write))
    }

    fn a_stream_denies_delete(&self, key: FileKey) -> bool {
        let (share, dev, ino, _) = key;
        self.files
            .range((share, dev, ino, 1)..=(share, dev, ino, u64::MAX))
            .any(|(_, s)| s.counts.not_sharing_delete > 0)
    }

    /// Whether an open of the file other than `id` does not share delete
    /// (a rename needs every other open to).
    pub fn others_deny_delete(&self, key: &FileKey, id: u64) -> bool {
        let Some(state) = self.files.get(key) else {
            return false;
        };
        let mine = state
            .opens
            .get(&id)
            .is_some_and(|o| o.share_access & access::SHARE_DELETE == 0);
        state.counts.not_sharing_delete > u32::from(mine)
    }

    /// Whether `id` is the only open of the file `key`.
    pub fn sole_open(&self, key: &FileKey, id: u64) -> bool {
        self.files
            .get(key)
            .is_some_and(|s| s.opens.len() == 1 && s.opens.contains_key(&id))
    }

    /// After a rename of the stream `from` to `to` (another stream of the
    /// same file, or its main data), which nothing else has open: its
    /// entry, with its oplock, lease and locks, goes by the new key.
    pub fn rekey(&mut self, from: &FileKey, to: FileKey) {
        let Some(state) = self.files.remove(from) else {
            return;
        };
        self.by_path.remove(&(from.0, state.path.clone(), *from));
        self.by_path.insert((to.0, state.path.clone(), to));
        for id in &state.leases {
            if let Some(l) = self.leases.get_mut(id) {
                l.file = to;
            }
        }
        self.files.insert(to, state);
    }

    /// The files open at exactly `path` of share `share`.
    fn at_path<'a>(
        &'a self,
        share: usize,
        path: &'a str,
    ) -> impl Iterator<Item = (&'a FileKey, &'a FileState)> + 'a {
        let from = (share, path.to_owned(), (0, 0, 0, 0));
        self.by_path
            .range(from..)
            .take_while(move |(s, p, _)| *s == share && p == path)
            .filter_map(|(_, _, k)| Some((k, self.files.get(k)?)))
    }

    /// Whether a new open of the directory at `path` asking `access` and
    /// sharing `share_access` would meet a sharing violation: as the open
    /// of a rename's target folder does on Windows.
    pub fn dir_open_conflicts(
        &self,
        share: usize,
        path: &str,
        access: u32,
        share_access: u32,
    ) -> bool {
        self.at_path(share, path)
            .any(|(_, s)| s.is_dir && s.counts.conflicts(access, share_access))
    }

    /// Makes (or updates) `w` a watcher of the directory `key`. Returns
    /// whether the set of watched directories changed: a directory newly
    /// watched, or watched beneath for the first time.
    pub fn watch(&mut self, key: &FileKey, w: Watcher) -> bool {
        let Some(state) = self.files.get_mut(key) else {
            return false;
        };
        let deeper = w.recursive && !state.watchers.iter().any(|o| o.recursive);
        match state.watchers.iter_mut().find(|o| o.open == w.open) {
            Some(old) => *old = w,
            None => {
                state.watchers.push(w);
                self.watchers += 1;
                self.any_watchers.store(true, Ordering::Release);
            }
        }
        self.watched.insert(*key) || deeper
    }

    /// Every watched directory, with its path and whether some watcher
    /// wants its subtree.
    pub fn watched_dirs(&self) -> Vec<WatchedDir> {
        self.watched
            .union(&self.leased_dirs)
            .filter_map(|key| {
                let state = self.files.get(key)?;
                Some(WatchedDir {
                    key: *key,
                    path: state.path.clone(),
                    recursive: state.watchers.iter().any(|w| w.recursive),
                })
            })
            .collect()
    }

    /// Every watcher, to be told `action` (a word for all of them, such
    /// as [`OVERFLOWED`]).
    pub fn all_watchers(&self, action: u32) -> Vec<Seen> {
        self.watched
            .iter()
            .filter_map(|key| self.files.get(key))
            .flat_map(|state| &state.watchers)
            .map(|w| Seen {
                connection: w.connection,
                open: w.open,
                action,
                name: String::new(),
            })
            .collect()
    }

    /// Whether the file at `path` is open with a right that changes it:
    /// the server may be writing it, or setting its metadata, now.
    pub fn open_for_change_at(&self, share: usize, path: &str) -> bool {
        self.at_path(share, path)
            .any(|(_, s)| s.opens.values().any(|o| o.access & access::MODIFYING != 0))
    }

    /// Says, without the table's lock, whether any directory is watched:
    /// changes look no further when none is.
    pub fn any_watchers_flag(&self) -> Arc<AtomicBool> {
        self.any_watchers.clone()
    }

    /// Who is to be told that the entry at `path` of `share` changed:
    /// watchers of its directory, and recursive watchers of the
    /// directories above, whose filters take `class` and none of
    /// `except`.
    pub fn watchers_of(
        &self,
        share: usize,
        path: &str,
        action: u32,
        class: u32,
        except: u32,
    ) -> Vec<Seen> {
        let mut seen = Vec::new();
        let mut dir = path;
        let mut direct = true;
        loop {
            let parent = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
            let name = if parent.is_empty() {
                path
            } else {
                &path[parent.len() + 1..]
            };
            for (_, state) in self.at_path(share, parent) {
                for w in &state.watchers {
                    if w.filter & class != 0 && w.filter & except == 0 && (direct || w.recursive) {
                        seen.push(Seen {
                            connection: w.connection,
                            open: w.open,
                            action,
                            name: name.replace('/', "\\"),
                        });
                    }
                }
            }
            if parent.is_empty() {
                return seen;
            }
            dir = parent;
            direct = false;
        }
    }

    /// Whether anything is open beneath the directory at `path`.
    pub fn is_open_beneath(&self, share: usize, path: &str) -> bool {
        let (from, to) = beneath(path);
        self.by_path
            .range((
                Bound::Included((share, from, (0, 0, 0, 0))),
                Bound::Excluded((share, to, (0, 0, 0, 0))),
            ))
            .next()
            .is_some()
    }

    /// Whether anything is open at `path`.
    pub fn is_open_at(&self, share: usize, path: &str) -> bool {
        self.at_path(share, path).next().is_some()
    }

    /// After a rename of the file `key` from `from` to `to`: it and its
    /// streams, and everything open beneath it, are at their new paths.
    pub fn moved(&mut self, key: &FileKey, from: &str, to: &str) {
        let share = key.0;
        let (prefix, beneath_end) = beneath(from);
        let mut moves: Vec<(String, FileKey)> = self
            .by_path
            .range((
                Bound::Included((share, prefix.clone(), (0, 0, 0, 0))),
                Bound::Excluded((share, beneath_end, (0, 0, 0, 0))),
            ))
            .map(|(_, p, k)| (p.clone(), *k))
            .collect();
        moves.extend(
            self.at_path(share, from)
                .filter(|(k, _)| (k.1, k.2) == (key.1, key.2))
                .map(|(k, _)| (from.to_owned(), *k)),
        );
        for (old, k) in moves {
            let new = match old.strip_prefix(&prefix) {
                Some(rest) => format!("{to}/{rest}"),
                None => to.to_owned(),
            };
            self.by_path.remove(&(share, old, k));
            self.by_path.insert((share, new.clone(), k));
            if let Some(state) = self.files.get_mut(&k) {
                state.path = new;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{share_conflict, FILE_READ_DATA, FILE_WRITE_DATA};

    const KINDS: [u32; 6] = [
        FILE_READ_DATA,
        FILE_WRITE_DATA,
        access::DELETE,
        FILE_READ_DATA | FILE_WRITE_DATA,
        access::READ_CONTROL,
        0x0080, // FILE_READ_ATTRIBUTES: not checked
    ];

    /// The counts answer as share_conflict against every open would, for
    /// every mix of two earlier opens and a new one.
    #[test]
    fn counts_agree_with_checking_each_open() {
        for a1 in KINDS {
            for s1 in 0..8 {
                for a2 in KINDS {
                    for s2 in 0..8 {
                        let old = [
                            OpenRef {
                                id: 1,
                                access: a1,
                                share_access: s1,
                                lease: None,
                                session: 0,
                            },
                            OpenRef {
                                id: 2,
                                access: a2,
                                share_access: s2,
                                lease: None,
                                session: 0,
                            },
                        ];
                        let mut counts = ShareCounts::default();
                        old.iter().for_each(|o| counts.add(o, 1));
                        for a in KINDS {
                            for s in 0..8 {
                                let each = old
                                    .iter()
                                    .any(|o| share_conflict(a, s, o.access, o.share_access));
                                assert_eq!(counts.conflicts(a, s), each, "{old:?} {a:#x} {s}");
                            }
                        }
                        old.iter().for_each(|o| counts.add(o, -1));
                        assert!(!counts.conflicts(FILE_WRITE_DATA, 0));
                        assert_eq!(counts.not_sharing_delete, 0);
                    }
                }
            }
        }
    }

    fn no_oplock() -> OplockRequest {
        OplockRequest {
            level: 0,
            connection: 1,
            session: 0,
            token: 0,
            truncating: false,
            created: false,
            granted: 0,
            breaks: Vec::new(),
            waited_on: None,
            lease: None,
            lease_granted: None,
            lease_breaks: Vec::new(),
            retry: false,
            purge: Vec::new(),
            watched_changed: false,
            dir_leasing: false,
        }
    }

    fn open(id: u64, access: u32, share_access: u32) -> OpenRef {
        OpenRef {
            id,
            access,
            share_access,
            lease: None,
            session: 0,
        }
    }

    #[test]
    fn renames_move_what_is_beneath_and_the_streams() {
        let mut t = FileTable::default();
        let dir = (0, 1, 10, 0);
        let file = (0, 1, 11, 0);
        let stream = (0, 1, 11, stream_id(Some("s")));
        let sibling = (0, 1, 12, 0);
        let other_share = (1, 1, 13, 0);
        t.register(dir, "a", true, open(1, access::DELETE, 7), &mut no_oplock())
            .unwrap();
        t.register(
            file,
            "a/f",
            false,
            open(2, FILE_READ_DATA, 7),
            &mut no_oplock(),
        )
        .unwrap();
        t.register(
            stream,
            "a/f",
            false,
            open(3, FILE_READ_DATA, 3),
            &mut no_oplock(),
        )
        .unwrap();
        t.register(
            sibling,
            "a0",
            false,
            open(4, FILE_READ_DATA, 7),
            &mut no_oplock(),
        )
        .unwrap();
        t.register(
            other_share,
            "a/f",
            false,
            open(5, FILE_READ_DATA, 7),
            &mut no_oplock(),
        )
        .unwrap();
        let renaming = (
            access::FILE_WRITE_DATA,
            access::SHARE_READ | access::SHARE_WRITE,
        );
        assert!(t.dir_open_conflicts(0, "a", renaming.0, renaming.1));
        assert!(!t.dir_open_conflicts(0, "a/f", renaming.0, renaming.1));
        // The stream does not share delete: the file cannot be opened
        // for DELETE.
        assert_eq!(
            t.register(
                file,
                "a/f",
                false,
                open(6, access::DELETE, 7),
                &mut no_oplock()
            ),
            Err(status::SHARING_VIOLATION)
        );
        t.moved(&dir, "a", "b");
        assert_eq!(t.get(&dir).unwrap().path(), "b");
        assert_eq!(t.get(&file).unwrap().path(), "b/f");
        assert_eq!(t.get(&stream).unwrap().path(), "b/f");
        assert_eq!(t.get(&sibling).unwrap().path(), "a0");
        assert_eq!(t.get(&other_share).unwrap().path(), "a/f");
        assert!(t.is_open_at(0, "b/f") && !t.is_open_at(0, "a/f"));
        t.moved(&file, "b/f", "b/g");
        assert_eq!(t.get(&stream).unwrap().path(), "b/g");
        let last = t.unregister(&stream, 3, true).last.unwrap();
        assert!(last.delete_pending);
        assert!(t.unregister(&file, 2, false).last.is_some());
        assert!(!t.is_open_at(0, "b/g"));
    }

    #[test]
    fn a_deleted_file_waits_for_its_open_streams() {
        let mut t = FileTable::default();
        let file = (0, 1, 11, 0);
        let stream = (0, 1, 11, stream_id(Some("s")));
        let reopen = |t: &mut FileTable, key, id| {
            t.register(
                key,
                "d/f",
                false,
                open(id, FILE_READ_DATA, 7),
                &mut no_oplock(),
            )
        };
        reopen(&mut t, stream, 1).unwrap();
        t.register(
            file,
            "d/f",
            false,
            open(2, access::DELETE, 7),
            &mut no_oplock(),
        )
        .unwrap();
        // The file's last open goes with delete-on-close: nothing to
        // delete yet, but no new open of it or of its streams.
        let closed = t.unregister(&file, 2, true);
        assert!(closed.last.is_none());
        assert_eq!(reopen(&mut t, file, 3), Err(status::DELETE_PENDING));
        assert_eq!(reopen(&mut t, stream, 4), Err(status::DELETE_PENDING));
        // A rename above it still moves it.
        t.moved(&(0, 1, 10, 0), "d", "e");
        // The stream's last close deletes the file, at its new path.
        let last = t.unregister(&stream, 1, false).last.unwrap();
        assert!(last.delete_pending && last.deletes_file);
        assert_eq!(last.path, "e/f");
        assert!(t.get(&file).is_none() && !t.is_open_at(0, "e/f"));
        reopen(&mut t, file, 5).unwrap();
    }

    #[test]
    fn a_rename_needs_the_others_to_share_delete() {
        let mut t = FileTable::default();
        let f = (0, 1, 2, 0);
        t.register(f, "f", false, open(1, access::DELETE, 0), &mut no_oplock())
            .unwrap();
        assert!(!t.others_deny_delete(&f, 1));
        t.register(f, "f", false, open(2, 0x0080, 0), &mut no_oplock())
            .unwrap();
        assert!(t.others_deny_delete(&f, 1));
        assert!(t.unregister(&f, 2, false).last.is_none());
        assert!(!t.others_deny_delete(&f, 1));
    }
}
