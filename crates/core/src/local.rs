//! Changes made on a share's filesystem by local processes, for
//! CHANGE_NOTIFY (issue 12): the core decides who is told, the engine
//! watches the kernel.
//!
//! The layering, in three steps:
//!
//! 1. **Which directories.** When the set of watched directories changes
//!    (an open's first CHANGE_NOTIFY, or a watching open closes), the core
//!    calls [`LocalWatch::watched_changed`] on the engine's watcher, if one
//!    was installed with [`Server::set_local_watch`]. The engine then reads
//!    the whole set with [`Server::watched_dirs`] and brings its kernel
//!    watches in line. Reading the set instead of being told the
//!    difference makes the call idempotent: two connections that change
//!    the set at once cannot apply their news out of order. The call comes
//!    before the CHANGE_NOTIFY is answered, so a client that saw its
//!    request pending sees every local change made after.
//! 2. **What changed.** The engine reads its kernel events and hands them
//!    to [`Server::local_changes`] as share-relative paths with an action
//!    and a filter class; the core finds their watchers exactly as for the
//!    server's own changes and returns letters for the engine to post. A
//!    lost event queue becomes [`Server::local_overflow`]: every watcher is
//!    answered STATUS_NOTIFY_ENUM_DIR, as Windows answers when its buffer
//!    overflows.
//! 3. **Not twice.** The kernel also reports what copyless itself did, and
//!    the server has reported that already (with the pairing and classes
//!    Windows uses). Kernel events carry no process id (fanotify's would,
//!    but needs CAP_SYS_ADMIN for directory events), so the core keeps
//!    [`OwnChanges`]: a path is marked *before* the server changes a name
//!    there (create, rename, delete) and stays marked until the engine has
//!    drained its event queue once after the change ended. The kernel
//!    queues an event before the system call that caused it returns, so
//!    every event of the server's own change is read while its mark
//!    stands, whatever the threads' timing: no window guessed in
//!    milliseconds. Content and metadata changes (writes, times,
//!    attributes, descriptors) are made through open handles; events of
//!    those kinds are taken as the server's own while it has the file open
//!    with modifying access, and for one more drain after it closes.
//!
//! The price of step 3: a local change to the same path in the same
//! instant as the server's own, or a local write to a file a client holds
//! open for writing, is not reported on its own. It is never reported
//! twice, and the watcher has heard of that path already.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use copyless_fscc::notify::{action, filter};

use crate::conn::post::{ConnectionId, Kind, Letter, Message};
use crate::file_table::Seen;
pub use crate::file_table::WatchedDir;
use crate::file_table::OVERFLOWED;
use crate::leases::LeaseBreak;

/// The most changes of one batch of local events reported to one
/// watching open.
const MAX_REPORTS_PER_OPEN: usize = 256;
use crate::server::Server;

/// The engine's side: keeps kernel watches on the directories the core
/// says are watched.
pub trait LocalWatch: Send + Sync {
    /// The set of watched directories changed: read it again with
    /// [`Server::watched_dirs`] and watch accordingly.
    fn watched_changed(&self, server: &Server);

    /// Folders are watched no more: as [`LocalWatch::watched_changed`],
    /// but the caller need not wait for their kernel watches to go
    /// (what those would report reaches no one now), so that a close
    /// never waits for the watcher.
    fn unwatched(&self, server: &Server) {
        self.watched_changed(server);
    }

    /// The share at `index` is now at `path`, or gone (a reload).
    fn share_changed(&self, index: usize, path: Option<&str>);
}

/// What a local process changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalChange {
    pub share: usize,
    /// The changed entry beneath the share root, `/`-separated.
    pub path: String,
    pub what: What,
}

/// The kinds of change the kernel tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Added {
        is_dir: bool,
    },
    Removed {
        is_dir: bool,
    },
    /// Renamed from this path (the next change says where to).
    RenamedFrom {
        is_dir: bool,
    },
    RenamedTo {
        is_dir: bool,
    },
    /// Data written or size changed.
    Written,
    /// Times, mode, owner or extended attributes changed.
    Attributes,
}

impl What {
    fn action(self) -> u32 {
        match self {
            What::Added { .. } => action::ADDED,
            What::Removed { .. } => action::REMOVED,
            What::RenamedFrom { .. } => action::RENAMED_OLD_NAME,
            What::RenamedTo { .. } => action::RENAMED_NEW_NAME,
            What::Written | What::Attributes => action::MODIFIED,
        }
    }

    /// The filter bits that take it.
    fn class(self) -> u32 {
        match self {
            What::Added { is_dir }
            | What::Removed { is_dir }
            | What::RenamedFrom { is_dir }
            | What::RenamedTo { is_dir } => {
                if is_dir {
                    filter::DIR_NAME
                } else {
                    filter::FILE_NAME
                }
            }
            What::Written => filter::LAST_WRITE | filter::SIZE,
            // One kernel event stands for all of these: which one moved
            // is not said.
            What::Attributes => {
                filter::ATTRIBUTES
                    | filter::LAST_WRITE
                    | filter::LAST_ACCESS
                    | filter::CREATION
                    | filter::EA
                    | filter::SECURITY
            }
        }
    }

    /// A change of an entry's content or metadata, made through a handle.
    fn through_handle(self) -> bool {
        matches!(self, What::Written | What::Attributes)
    }
}

/// Marks beyond this many are not kept: a flood of the server's own
/// changes with no drain in between then risks a change reported twice,
/// never unbounded memory.
const MAX_MARKS: usize = 1 << 16;

/// Paths the server is changing or has just changed (see the module
/// docs, step 3).
#[derive(Default)]
pub struct OwnChanges {
    /// The engine watches something: only then are marks kept, since
    /// only its drains retire them.
    active: AtomicBool,
    /// Shared with the guards, which may outlive a borrow of the server:
    /// a change made by a call ends when the call completes.
    marks: Arc<Mutex<Marks>>,
}

#[derive(Default)]
struct Marks {
    /// How many drains of the kernel's queue have begun.
    epoch: u64,
    /// By share and case-folded path: the server's request names a path
    /// in the client's case, the kernel in the disk's.
    by_path: HashMap<(usize, String), Mark>,
}

#[derive(Debug, Clone, Copy)]
struct Mark {
    /// Changes under way.
    busy: u32,
    /// The epoch when the last of them ended.
    ended: u64,
}

impl OwnChanges {
    fn lock(&self) -> MutexGuard<'_, Marks> {
        lock_marks(&self.marks)
    }

    /// Whether marks are kept (the engine watches some directory).
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Release);
        if !active {
            self.lock().by_path.clear();
        }
    }

    /// Whether marks are kept.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Marks `paths` of `share` until the guard goes and one drain more.
    pub(crate) fn begin(&self, share: usize, paths: &[&str]) -> OwnGuard {
        let mut keys = Vec::new();
        if self.active.load(Ordering::Acquire) {
            let mut marks = self.lock();
            for p in paths {
                let key = (share, p.to_lowercase());
                if marks.by_path.len() >= MAX_MARKS && !marks.by_path.contains_key(&key) {
                    continue;
                }
                marks
                    .by_path
                    .entry(key.clone())
                    .or_insert(Mark { busy: 0, ended: 0 })
                    .busy += 1;
                keys.push(key);
            }
        }
        let marks = (!keys.is_empty()).then(|| self.marks.clone());
        OwnGuard { marks, keys }
    }

    /// A drain of the kernel's queue begins: marks whose changes ended
    /// before the previous drain began have had all their events read.
    pub fn drain_begins(&self) {
        let mut marks = self.lock();
        marks.epoch += 1;
        let epoch = marks.epoch;
        marks
            .by_path
            .retain(|_, m| m.busy > 0 || m.ended + 1 >= epoch);
    }

    fn is_marked(&self, share: usize, path: &str) -> bool {
        let marks = self.lock();
        !marks.by_path.is_empty() && marks.by_path.contains_key(&(share, path.to_lowercase()))
    }

    /// Marks kept now (for tests and limits).
    pub fn len(&self) -> usize {
        self.lock().by_path.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn lock_marks(marks: &Mutex<Marks>) -> MutexGuard<'_, Marks> {
    marks.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends its marks when dropped.
pub(crate) struct OwnGuard {
    /// None when nothing was marked.
    marks: Option<Arc<Mutex<Marks>>>,
    keys: Vec<(usize, String)>,
}

impl Drop for OwnGuard {
    fn drop(&mut self) {
        let Some(marks) = self.marks.take() else {
            return;
        };
        let mut marks = lock_marks(&marks);
        let epoch = marks.epoch;
        for key in self.keys.drain(..) {
            if let Some(m) = marks.by_path.get_mut(&key) {
                m.busy = m.busy.saturating_sub(1);
                m.ended = epoch;
            }
        }
    }
}

impl Server {
    /// Installs the engine's watcher of local changes, once.
    pub fn set_local_watch(&self, watch: Arc<dyn LocalWatch>) {
        let _ = self.local_watch.set(watch);
    }

    /// Whether changes local processes make are seen (the engine watches
    /// for them): only then are directory leases offered, since a lease
    /// that nothing local breaks would keep a client's listing stale.
    pub fn sees_local_changes(&self) -> bool {
        self.local_watch.get().is_some()
    }

    /// Tells the engine's watcher that the watched set changed.
    pub(crate) fn watched_changed(&self) {
        if let Some(w) = self.local_watch.get() {
            w.watched_changed(self);
        }
    }

    /// Tells the engine's watcher that folders are watched no more (see
    /// [`LocalWatch::unwatched`]).
    pub(crate) fn unwatched(&self) {
        if let Some(w) = self.local_watch.get() {
            w.unwatched(self);
        }
    }

    /// Every directory watched now.
    pub fn watched_dirs(&self) -> Vec<WatchedDir> {
        self.files().watched_dirs()
    }

    /// Paths the server itself is changing.
    pub fn own_changes(&self) -> &OwnChanges {
        &self.own
    }

    /// Letters for the watchers of what local processes changed, in
    /// order, one per connection so that a rename's two names travel
    /// together. Changes the server made itself are left out.
    pub fn local_changes(&self, changes: &[LocalChange]) -> Vec<Message> {
        // Leases are held while any directory lease is.
        if !self.has_watchers() && !self.has_oplocks() {
            return Vec::new();
        }
        let mut seen = Vec::new();
        let mut breaks = Vec::new();
        let mut per_open: HashMap<(ConnectionId, u64), usize> = HashMap::new();
        for c in changes {
            if self.own.is_marked(c.share, &c.path) {
                continue;
            }
            let mut files = self.files();
            if c.what.through_handle() && files.open_for_change_at(c.share, &c.path) {
                continue;
            }
            for s in files.watchers_of(c.share, &c.path, c.what.action(), c.what.class(), 0) {
                // Past its share of a busy disk's changes, a watcher is
                // told it missed some (NOTIFY_ENUM_DIR), once: what the
                // server holds for it stays bounded.
                let n = per_open.entry((s.connection, s.open)).or_default();
                *n += 1;
                if *n <= MAX_REPORTS_PER_OPEN {
                    seen.push(s);
                } else if *n == MAX_REPORTS_PER_OPEN + 1 {
                    seen.push(Seen {
                        action: OVERFLOWED,
                        name: String::new(),
                        ..s
                    });
                }
            }
            // The entry of a leased directory changed: its lease breaks,
            // as for another client's change.
            let dir = crate::names::path::parent(&c.path);
            breaks.extend(files.break_dir_leases(c.share, dir, None));
        }
        let mut out = letters(seen);
        out.extend(self.lease_break_letters(breaks));
        out
    }

    /// The kernel lost events: every watcher is to list its directory
    /// again (STATUS_NOTIFY_ENUM_DIR), every directory lease breaks.
    pub fn local_overflow(&self) -> Vec<Message> {
        let mut files = self.files();
        let seen = files.all_watchers(OVERFLOWED);
        let breaks = files.break_all_dir_leases();
        drop(files);
        let mut out = letters(seen);
        out.extend(self.lease_break_letters(breaks));
        out
    }

    fn lease_break_letters(&self, breaks: Vec<LeaseBreak>) -> Vec<Message> {
        breaks
            .into_iter()
            .map(|b| self.lease_break_letter(b))
            .collect()
    }
}

/// One letter per connection, each with its changes in order.
fn letters(mut seen: Vec<Seen>) -> Vec<Message> {
    // Stable: each connection's changes keep their order.
    seen.sort_by_key(|s| s.connection);
    seen.chunk_by(|a, b| a.connection == b.connection)
        .map(|batch| Message {
            to: batch[0].connection,
            letter: Letter(Kind::Changed(batch.to_vec())),
        })
        .collect()
}
