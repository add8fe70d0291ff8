//! Watches the shares' directories with inotify for changes local
//! processes make, and hands them to the core (`copyless_core::local`
//! describes the split) as letters for the watching connections. Shared by
//! both engines: one thread reads the inotify descriptor and posts through
//! the engine's post office, which both engines' connections read.
//!
//! - The core calls [`Inner::watched_changed`] (before it answers the
//!   CHANGE_NOTIFY that made a directory watched): the directories it
//!   lists get a kernel watch; for a WATCH_TREE watcher, so does every
//!   directory beneath (inotify is not recursive), and every one that
//!   appears later. Watches are added while the table of watches is
//!   locked, so the reader never sees a descriptor it cannot name.
//!   Folders watched no more ([`LocalWatch::unwatched`], at a close) have
//!   their kernel watches let go of by the reader, so that a close never
//!   waits for the table while a tree is walked.
//! - Directories are opened beneath the share root with
//!   `RESOLVE_BENEATH` and watched through `/proc/self/fd`, so a symbolic
//!   link swapped in by a local user cannot point a watch outside the
//!   share.
//! - At most `limit` directories are watched (and the kernel's own
//!   `fs.inotify.max_user_watches`): beyond, changes beneath are reported
//!   only when made through the server, and a line is logged.
//! - A lost queue (`IN_Q_OVERFLOW`) answers every watcher
//!   STATUS_NOTIFY_ENUM_DIR, and recursive watches look for the
//!   directories they may have missed.

use std::collections::{HashMap, HashSet};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use copyless_core::file_table::FileKey;
use copyless_core::local::{LocalChange, LocalWatch, What};
use copyless_core::Server;
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{openat2, Dir, FileType, Mode, OFlags, ResolveFlags, CWD};
use rustix::io::Errno;

use crate::log_limit::RateLimit;
use crate::post::PostOffice;
use crate::LiveLimits;

static FULL: RateLimit = RateLimit::new(Duration::from_secs(60));
static FAILED: RateLimit = RateLimit::new(Duration::from_secs(60));

/// What the kernel is asked to report of each watched directory's
/// entries. `EXCL_UNLINK`: nothing of files already unlinked.
fn mask() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

/// Bytes read from the descriptor at once: room for hundreds of events.
const READ_BUFFER: usize = 64 * 1024;

/// Events handled at once: a local process that changes files faster
/// than they are read does not make the reader's memory grow.
const MAX_BATCH: usize = 16 * 1024;

/// How long the reader waits for the second half of a rename that the
/// kernel queued while a read was under way.
const RENAME_PAIR_WAIT: Duration = Duration::from_millis(10);

/// How often the reader wakes without events, to retire the marks of the
/// server's own changes in directories no kernel watch sees.
const IDLE_WAKE: Duration = Duration::from_secs(1);

/// The running watcher: stops its thread when dropped.
pub(crate) struct Local {
    thread: Option<JoinHandle<()>>,
    stop: Arc<OwnedFd>,
}

/// Starts watching for `server`, posting through `post`; None (and a
/// line logged) when the kernel has no inotify instance to give, or
/// `max_local_watches` is 0 at start: changes are then reported only when
/// made through the server.
pub(crate) fn start(
    server: &Arc<Server>,
    post: Arc<PostOffice>,
    limits: &Arc<LiveLimits>,
) -> Option<Local> {
    if limits.get().max_local_watches == 0 {
        return None;
    }
    let started = (|| -> io::Result<Local> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        let resync = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        let mut shares = Vec::new();
        for (index, share) in server.shares.all() {
            shares.resize_with(index + 1, || None);
            shares[index] = open_root(&share.path);
        }
        let inner = Arc::new(Inner {
            fd,
            resync,
            shares: RwLock::new(shares),
            limits: limits.clone(),
            state: Mutex::default(),
        });
        server.set_local_watch(inner.clone());
        let (server, stop_fd) = (server.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("local-changes".into())
            .spawn(move || read_loop(&inner, &server, &post, &stop_fd))?;
        Ok(Local {
            thread: Some(thread),
            stop,
        })
    })();
    match started {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!(
                "copyless: cannot watch shares for local changes ({e}); \
                 change notifications report only changes made through the server"
            );
            None
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = rustix::io::write(self.stop.as_fd(), &1u64.to_ne_bytes());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The inotify descriptor and what its watches stand for.
pub(crate) struct Inner {
    fd: OwnedFd,
    /// Rung when folders are watched no more: the reader, not the closer,
    /// then lets their kernel watches go.
    resync: OwnedFd,
    /// Each share's root, by index; None for one that is no local
    /// directory.
    shares: RwLock<Vec<Option<OwnedFd>>>,
    /// `max_local_watches` as a reload leaves it: lowered, no new watch is
    /// added until enough are gone.
    limits: Arc<LiveLimits>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The directories the core says are watched, by key.
    roots: HashMap<FileKey, Root>,
    /// Every kernel watch: the directory it is on.
    dirs: HashMap<i32, Watched>,
}

struct Root {
    share: usize,
    path: String,
    recursive: bool,
    /// The kernel watches it holds: its own and, when recursive, those of
    /// the directories beneath.
    wds: HashSet<i32>,
}

struct Watched {
    share: usize,
    /// Beneath the share root, `/`-separated.
    path: String,
    /// How many roots hold it.
    holders: usize,
}

/// A share's root directory, to open what is watched beneath it.
fn open_root(path: &str) -> Option<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    openat2(CWD, path, flags, Mode::empty(), ResolveFlags::empty()).ok()
}

impl LocalWatch for Inner {
    fn unwatched(&self, _server: &Server) {
        let _ = rustix::io::write(self.resync.as_fd(), &1u64.to_ne_bytes());
    }

    fn share_changed(&self, index: usize, path: Option<&str>) {
        let mut shares = self.shares.write().unwrap_or_else(|e| e.into_inner());
        if shares.len() <= index {
            shares.resize_with(index + 1, || None);
        }
        shares[index] = path.and_then(open_root);
    }

    fn watched_changed(&self, server: &Server) {
        // The set is read under the lock, so that of two connections that
        // change it at once, the later reading is applied last.
        let mut st = self.lock();
        let want = server.watched_dirs();
        // Marks are kept from before the first kernel watch exists.
        if !want.is_empty() {
            server.own_changes().set_active(true);
        }
        let wanted: HashSet<FileKey> = want.iter().map(|w| w.key).collect();
        let gone: Vec<FileKey> = st
            .roots
            .keys()
            .filter(|k| !wanted.contains(k))
            .copied()
            .collect();
        for key in gone {
            if let Some(root) = st.roots.remove(&key) {
                self.release(&mut st, root.wds);
            }
        }
        for w in want {
            let share = w.key.0;
            match st.roots.get(&w.key).map(|r| (r.path.clone(), r.recursive)) {
                Some((path, was)) => {
                    // Renamed through the server: the kernel watches stay
                    // on the same directories, under their new names.
                    if path != w.path {
                        st.moved(share, &path, &w.path);
                    }
                    if w.recursive && !was {
                        if let Some(r) = st.roots.get_mut(&w.key) {
                            r.recursive = true;
                        }
                        self.grow(&mut st, w.key, &w.path);
                    } else if !w.recursive && was {
                        self.shrink(&mut st, w.key);
                    }
                }
                None => {
                    st.roots.insert(
                        w.key,
                        Root {
                            share,
                            path: w.path.clone(),
                            recursive: w.recursive,
                            wds: HashSet::new(),
                        },
                    );
                    if w.recursive {
                        self.grow(&mut st, w.key, &w.path);
                    } else {
                        let _ = self.watch(&mut st, w.key, share, &w.path);
                    }
                }
            }
        }
        if st.dirs.is_empty() {
            server.own_changes().set_active(false);
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts a kernel watch on the directory at `path` for root `key`, and
    /// returns it with the directory open for reading; None when it is
    /// gone, no directory, or beyond a limit (logged).
    fn watch(
        &self,
        st: &mut State,
        key: FileKey,
        share: usize,
        path: &str,
    ) -> Option<(i32, OwnedFd)> {
        if !st.roots.contains_key(&key) {
            return None;
        }
        let shares = self.shares.read().unwrap_or_else(|e| e.into_inner());
        let root = shares.get(share)?.as_ref()?;
        let rel = if path.is_empty() { "." } else { path };
        // As the server, not as whichever user's request runs on this
        // thread: a folder only some may read is watched for all of them,
        // and the core tells each watcher only what it may list.
        copyless_vfs::posix::act_as_server().ok()?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        // No symbolic link is followed: a local `loop -> .` would make
        // a recursive watch walk its own tree again and again.
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_SYMLINKS;
        let dir = openat2(root, rel, flags, Mode::empty(), resolve).ok()?;
        let proc_path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let wd = match inotify::add_watch(&self.fd, proc_path, mask()) {
            Ok(wd) => wd,
            Err(e) => {
                FAILED.log(|| {
                    let why = if e == Errno::NOSPC {
                        "the kernel's limit fs.inotify.max_user_watches is reached".to_owned()
                    } else {
                        e.to_string()
                    };
                    format!(
                        "copyless: cannot watch {path:?} for local changes ({why}); \
                         changes there are reported only when made through the server"
                    )
                });
                return None;
            }
        };
        // Past the limit a directory another root already watches is
        // still shared; only a new kernel watch is refused.
        let limit = self.limits.get().max_local_watches;
        if !st.dirs.contains_key(&wd) && st.dirs.len() >= limit {
            let _ = inotify::remove_watch(&self.fd, wd);
            FULL.log(|| {
                format!(
                    "copyless: {} directories are watched for local changes, and \
                     limits.max_local_watches is {limit}; changes on disk beneath others \
                     are reported only when made through the server",
                    st.dirs.len()
                )
            });
            return None;
        }
        let root = st.roots.get_mut(&key)?;
        if root.wds.insert(wd) {
            st.dirs
                .entry(wd)
                .or_insert_with(|| Watched {
                    share,
                    path: path.to_owned(),
                    holders: 0,
                })
                .holders += 1;
        }
        Some((wd, dir))
    }

    /// Watches `path` and every directory beneath it for the recursive
    /// root `key`, as far as the limit allows.
    fn grow(&self, st: &mut State, key: FileKey, path: &str) {
        let share = key.0;
        let mut todo = vec![path.to_owned()];
        // A directory reached twice in one walk (a bind mount of an
        // ancestor) is not walked again.
        let mut walked = HashSet::new();
        while let Some(dir_path) = todo.pop() {
            let Some((wd, fd)) = self.watch(st, key, share, &dir_path) else {
                continue;
            };
            if !walked.insert(wd) {
                continue;
            }
            let Ok(dir) = Dir::new(fd) else { continue };
            for entry in dir.flatten() {
                // A filesystem that does not say is asked by the open.
                let is_dir = matches!(entry.file_type(), FileType::Directory | FileType::Unknown);
                let Ok(name) = entry.file_name().to_str() else {
                    continue;
                };
                if !is_dir || name == "." || name == ".." {
                    continue;
                }
                todo.push(join(&dir_path, name));
            }
        }
    }

    /// Gives up the watches of recursive root `key` beneath its own.
    fn shrink(&self, st: &mut State, key: FileKey) {
        let Some(root) = st.roots.get_mut(&key) else {
            return;
        };
        root.recursive = false;
        let (share, path) = (root.share, root.path.clone());
        let own: Option<i32> = root.wds.iter().copied().find(|wd| {
            st.dirs
                .get(wd)
                .is_some_and(|d| d.share == share && d.path == path)
        });
        let others: Vec<i32> = root
            .wds
            .iter()
            .copied()
            .filter(|w| Some(*w) != own)
            .collect();
        root.wds.retain(|w| Some(*w) == own);
        self.release(st, others);
    }

    /// Drops one hold on each of `wds`; a watch no root holds goes.
    fn release(&self, st: &mut State, wds: impl IntoIterator<Item = i32>) {
        for wd in wds {
            let Some(d) = st.dirs.get_mut(&wd) else {
                continue;
            };
            d.holders = d.holders.saturating_sub(1);
            if d.holders == 0 {
                st.dirs.remove(&wd);
                let _ = inotify::remove_watch(&self.fd, wd);
            }
        }
    }

    /// A new directory at `path`: recursive roots above it watch it and
    /// what it already holds.
    fn appeared(&self, st: &mut State, share: usize, path: &str) {
        let above: Vec<FileKey> = st
            .roots
            .iter()
            .filter(|(_, r)| r.recursive && r.share == share && is_beneath(path, &r.path))
            .map(|(k, _)| *k)
            .collect();
        for key in above {
            self.grow(st, key, path);
        }
    }

    /// A directory at `path` left the watched part of the share: its
    /// watches and those beneath go (their names would be wrong).
    fn left(&self, st: &mut State, share: usize, path: &str) {
        let gone: Vec<i32> = st
            .dirs
            .iter()
            .filter(|(_, d)| d.share == share && (d.path == path || is_beneath(&d.path, path)))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in gone {
            st.forget(wd);
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }
}

impl State {
    /// The kernel dropped watch `wd` (its directory was deleted).
    fn forget(&mut self, wd: i32) {
        self.dirs.remove(&wd);
        for r in self.roots.values_mut() {
            r.wds.remove(&wd);
        }
    }

    /// The directory at `from` is now at `to`: so is everything beneath.
    fn moved(&mut self, share: usize, from: &str, to: &str) {
        let renamed = |p: &mut String| {
            if p == from {
                *p = to.to_owned();
            } else if is_beneath(p, from) {
                *p = format!("{to}{}", &p[from.len()..]);
            }
        };
        for d in self.dirs.values_mut().filter(|d| d.share == share) {
            renamed(&mut d.path);
        }
        for r in self.roots.values_mut().filter(|r| r.share == share) {
            renamed(&mut r.path);
        }
    }
}

/// Whether `path` lies strictly beneath the directory `dir` ("" is the
/// share root).
fn is_beneath(path: &str, dir: &str) -> bool {
    if dir.is_empty() {
        return !path.is_empty();
    }
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// An event as read, before it is named.
struct Raw {
    wd: i32,
    mask: ReadFlags,
    cookie: u32,
    name: Option<Vec<u8>>,
}

/// Reads events until `stop`, and posts what they mean.
fn read_loop(inner: &Inner, server: &Server, post: &PostOffice, stop: &OwnedFd) {
    let mut buf = vec![MaybeUninit::<u8>::uninit(); READ_BUFFER];
    let idle = Timespec::try_from(IDLE_WAKE).ok();
    // Whether the last batch emptied the queue: only then does a new
    // drain begin (marks of the server's own changes rely on every drain
    // reading all that was queued when it began).
    let mut emptied = true;
    loop {
        let mut fds = [
            PollFd::new(&inner.fd, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
            PollFd::new(&inner.resync, PollFlags::IN),
        ];
        match poll(&mut fds, idle.as_ref()) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => {
                eprintln!("copyless: local change watch stopped ({e})");
                return;
            }
        }
        if !fds[1].revents().is_empty() {
            return;
        }
        if !fds[2].revents().is_empty() {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(&inner.resync, &mut count);
            inner.watched_changed(server);
        }
        // Every event of a change the server finished before this point
        // is in the queue now, and is read below (core local.rs).
        if emptied {
            server.own_changes().drain_begins();
        }
        let raw;
        (raw, emptied) = drain(&inner.fd, &mut buf);
        if raw.is_empty() {
            continue;
        }
        let (changes, overflowed) = name_events(inner, raw);
        post.send(server.local_changes(&changes));
        if overflowed {
            post.send(server.local_overflow());
            let mut st = inner.lock();
            let recursive: Vec<(FileKey, String)> = st
                .roots
                .iter()
                .filter(|(_, r)| r.recursive)
                .map(|(k, r)| (*k, r.path.clone()))
                .collect();
            for (key, path) in recursive {
                inner.grow(&mut st, key, &path);
            }
        }
    }
}

/// Every event queued now, up to [`MAX_BATCH`], and whether that was
/// all; a rename cut in two by the read gets its second half.
/// How long the reader rests after the kernel refused a read: the queue
/// stays readable, and reading again at once would only spin.
const READ_ERROR_REST: Duration = Duration::from_millis(100);

fn drain(fd: &OwnedFd, buf: &mut [MaybeUninit<u8>]) -> (Vec<Raw>, bool) {
    let mut out = Vec::new();
    loop {
        let mut reader = inotify::Reader::new(fd, buf);
        loop {
            match reader.next() {
                Ok(e) => out.push(Raw {
                    wd: e.wd(),
                    mask: e.events(),
                    cookie: e.cookie(),
                    name: e.file_name().map(|n| n.to_bytes().to_vec()),
                }),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                Err(e) => {
                    FAILED.log(|| format!("copyless: reading local changes: {e}"));
                    std::thread::sleep(READ_ERROR_REST);
                    return (out, false);
                }
            }
            if out.len() >= MAX_BATCH && reader.is_buffer_empty() {
                return (out, false);
            }
        }
        let half_rename = out
            .last()
            .is_some_and(|e| e.mask.contains(ReadFlags::MOVED_FROM));
        if !half_rename {
            return (out, true);
        }
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        let wait = Timespec::try_from(RENAME_PAIR_WAIT).ok();
        if !matches!(poll(&mut fds, wait.as_ref()), Ok(n) if n > 0) {
            return (out, true);
        }
    }
}

/// Turns events into changes beneath share roots, and keeps the watches
/// in step with directories that come, go and move.
fn name_events(inner: &Inner, raw: Vec<Raw>) -> (Vec<LocalChange>, bool) {
    let mut st = inner.lock();
    let mut changes = Vec::new();
    let mut overflowed = false;
    // A rename's first half, until the next event says whether the name
    // stayed in sight: (cookie, share, path, is_dir).
    let mut from: Option<(u32, usize, String, bool)> = None;
    for e in raw {
        if e.mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            overflowed = true;
            continue;
        }
        if e.mask.contains(ReadFlags::IGNORED) {
            st.forget(e.wd);
            continue;
        }
        let Some(dir) = st.dirs.get(&e.wd) else {
            continue;
        };
        // A name the server could not show a client is left out, and so
        // is one with a backslash, which a client would read as a path.
        let Some(name) = e.name.as_deref().and_then(|n| std::str::from_utf8(n).ok()) else {
            continue;
        };
        if name.contains('\\') {
            continue;
        }
        let share = dir.share;
        let path = join(&dir.path, name);
        let is_dir = e.mask.contains(ReadFlags::ISDIR);
        if e.mask.contains(ReadFlags::MOVED_TO) {
            match from.take() {
                Some((cookie, s, old, _)) if cookie == e.cookie && s == share => {
                    changes.push(LocalChange {
                        share,
                        path: old.clone(),
                        what: What::RenamedFrom { is_dir },
                    });
                    changes.push(LocalChange {
                        share,
                        path: path.clone(),
                        what: What::RenamedTo { is_dir },
                    });
                    if is_dir {
                        st.moved(share, &old, &path);
                    }
                }
                other => {
                    if let Some((_, s, old, was_dir)) = other {
                        moved_away(inner, &mut st, &mut changes, s, old, was_dir);
                    }
                    changes.push(LocalChange {
                        share,
                        path: path.clone(),
                        what: What::Added { is_dir },
                    });
                }
            }
            if is_dir {
                inner.appeared(&mut st, share, &path);
            }
            continue;
        }
        if let Some((_, s, old, was_dir)) = from.take() {
            moved_away(inner, &mut st, &mut changes, s, old, was_dir);
        }
        let what = if e.mask.contains(ReadFlags::MOVED_FROM) {
            from = Some((e.cookie, share, path, is_dir));
            continue;
        } else if e.mask.contains(ReadFlags::CREATE) {
            What::Added { is_dir }
        } else if e.mask.contains(ReadFlags::DELETE) {
            What::Removed { is_dir }
        } else if e.mask.contains(ReadFlags::MODIFY) {
            What::Written
        } else if e.mask.contains(ReadFlags::ATTRIB) {
            What::Attributes
        } else {
            continue;
        };
        if what == (What::Added { is_dir: true }) {
            inner.appeared(&mut st, share, &path);
        }
        changes.push(LocalChange { share, path, what });
    }
    if let Some((_, s, old, was_dir)) = from.take() {
        moved_away(inner, &mut st, &mut changes, s, old, was_dir);
    }
    (changes, overflowed)
}

/// A name renamed to somewhere no watch sees: it is gone.
fn moved_away(
    inner: &Inner,
    st: &mut State,
    changes: &mut Vec<LocalChange>,
    share: usize,
    path: String,
    is_dir: bool,
) {
    if is_dir {
        inner.left(st, share, &path);
    }
    changes.push(LocalChange {
        share,
        path,
        what: What::Removed { is_dir },
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_proto::status;
    use copyless_scripted::{config, notify_request, server, Client, Users};

    #[test]
    fn beneath_is_by_whole_components() {
        assert!(is_beneath("a/b", "a"));
        assert!(is_beneath("a", ""));
        assert!(!is_beneath("ab", "a"));
        assert!(!is_beneath("a", "a"));
        assert!(!is_beneath("", ""));
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("a/b", "x"), "a/b/x");
    }

    #[test]
    fn a_move_renames_the_subtree_only() {
        let mut st = State::default();
        for (wd, path) in [(1, "a"), (2, "a/b"), (3, "ab"), (4, "a/b/c")] {
            st.dirs.insert(
                wd,
                Watched {
                    share: 0,
                    path: path.into(),
                    holders: 1,
                },
            );
        }
        st.moved(0, "a", "z");
        let mut paths: Vec<&str> = st.dirs.values().map(|d| d.path.as_str()).collect();
        paths.sort();
        assert_eq!(paths, ["ab", "z", "z/b", "z/b/c"]);
    }

    /// At the limit, a directory that another root already watches is
    /// still watched for the second root: no new kernel watch is needed.
    #[test]
    fn at_the_limit_a_watched_directory_is_still_shared() {
        let dir = std::env::temp_dir().join(format!("copyless-local-limit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        let users = Arc::new(Users::default());
        users.add("u", "pw");
        let server = server(&dir, config(), users);
        let mut c = Client::login(server.clone(), "u", "pw");
        let a = c.create("a", true).unwrap();
        let b = c.create("a\\b", true).unwrap();
        // "a" with everything beneath it, then "a\b" on its own.
        assert_eq!(
            c.call(notify_request(a, 1, true, 4096)).status(),
            status::PENDING
        );
        assert_eq!(
            c.call(notify_request(b, 1, false, 4096)).status(),
            status::PENDING
        );

        let share = openat2(
            CWD,
            &dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::empty(),
        )
        .unwrap();
        let inner = Inner {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap(),
            resync: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap(),
            shares: RwLock::new(vec![Some(share)]),
            limits: crate::LiveLimits::new(crate::EngineLimits {
                admission: crate::AdmissionLimits {
                    max_connections: 1,
                    max_unauthenticated: 1,
                    max_unauthenticated_per_address: 1,
                },
                preauth_timeout: Duration::from_secs(1),
                max_local_watches: 2,
            }),
            state: Mutex::default(),
        };
        inner.watched_changed(&server);
        let st = inner.lock();
        assert_eq!(st.dirs.len(), 2, "a and a/b, each watched once");
        let held: usize = st.roots.values().map(|r| r.wds.len()).sum();
        assert_eq!(held, 3, "a's root holds a and a/b, b's root a/b too");
        drop(st);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A close that ends a watch does not wait for the watcher: its
    /// reader lets the kernel watch go soon after.
    #[test]
    fn a_folder_watched_no_more_is_let_go_of_by_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let users = Arc::new(Users::default());
        users.add("u", "pw");
        let server = server(dir.path(), config(), users);
        let limits = crate::LiveLimits::new(crate::EngineLimits {
            admission: crate::AdmissionLimits {
                max_connections: 1,
                max_unauthenticated: 1,
                max_unauthenticated_per_address: 1,
            },
            preauth_timeout: Duration::from_secs(1),
            max_local_watches: 8,
        });
        let share = openat2(
            CWD,
            dir.path(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::empty(),
        )
        .unwrap();
        let inner = Arc::new(Inner {
            fd: inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).unwrap(),
            resync: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap(),
            shares: RwLock::new(vec![Some(share)]),
            limits,
            state: Mutex::default(),
        });
        server.set_local_watch(inner.clone());
        let stop = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).unwrap());
        let reader = {
            let (inner, server, stop) = (inner.clone(), server.clone(), stop.clone());
            let post = Arc::new(PostOffice::default());
            std::thread::spawn(move || read_loop(&inner, &server, &post, &stop))
        };
        let mut c = Client::login(server.clone(), "u", "pw");
        let a = c.create("a", true).unwrap();
        assert_eq!(
            c.call(notify_request(a, 1, false, 4096)).status(),
            status::PENDING
        );
        assert_eq!(inner.lock().dirs.len(), 1, "watched before it pends");
        let closed: Vec<u32> = c
            .send(vec![copyless_scripted::close_request(a)])
            .iter()
            .map(|r| r.status())
            .collect();
        assert_eq!(closed, [status::SUCCESS, status::NOTIFY_CLEANUP]);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !inner.lock().dirs.is_empty() {
            assert!(std::time::Instant::now() < deadline, "never let go of");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = rustix::io::write(stop.as_fd(), &1u64.to_ne_bytes());
        reader.join().unwrap();
    }
}
