//! The table of open files shared by every connection: share modes,
//! delete-on-close, and the paths renames move.
//!
//! Every question a request asks of it costs a lookup, not a scan of all
//! open files or of all opens of one file: a client may hold many thousands
//! of opens, and the table's lock is everyone's. Share modes are kept as
//! counts (as Windows' IoCheckShareAccess keeps them), files by key in
//! order (a file's streams are neighbours), and a second index by path.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use copyless_proto::status::{self, NtStatus};

use crate::access::{self, SHARE_CHECKED};
use crate::intent::Token;
use crate::locks::{self, ByteLock};
use crate::oplocks::{self, Ask, Break, OnOpen, Oplock};
use crate::post::ConnectionId;

/// (share index, device, inode, stream): the last is 0 for a file's main
/// data and [`stream_id`] for an alternate data stream, so each stream
/// has share modes of its own, as on NTFS.
pub type FileKey = (usize, u64, u64, u64);

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
    break_waiters: Vec<(ConnectionId, Token)>,
}

/// An open's oplock request, and what came of it.
#[derive(Debug)]
pub struct OplockRequest {
    /// The level asked for (SMB2_OPLOCK_LEVEL_*).
    pub level: u8,
    pub connection: ConnectionId,
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
    pub wake_held: Vec<(ConnectionId, Token)>,
}

impl FileState {
    pub fn path(&self) -> &str {
        &self.path
    }
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
}

#[derive(Default)]
pub struct FileTable {
    files: BTreeMap<FileKey, FileState>,
    /// Every file of `files` by (share, path).
    by_path: BTreeSet<(usize, String, FileKey)>,
    /// Oplocks held on all files, and whether any file has one.
    oplocks: usize,
    any_oplocks: Arc<AtomicBool>,
    /// Byte-range locks held on all files...
    byte_locks: usize,
    /// ...and whether there are any, for readers without the table's lock.
    any_locks: Arc<AtomicBool>,
}

impl FileTable {
    pub fn get(&self, key: &FileKey) -> Option<&FileState> {
        self.files.get(key)
    }

    pub fn set_delete_pending(&mut self, key: &FileKey, pending: bool) {
        if let Some(state) = self.files.get_mut(key) {
            state.delete_pending = pending;
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
        // A stream open without FILE_SHARE_DELETE keeps its file from
        // being opened for DELETE (smb2.streams.delete).
        if key.3 == 0 && open.access & access::DELETE != 0 && self.a_stream_denies_delete(key) {
            return Err(status::SHARING_VIOLATION);
        }
        if let Some(state) = self.files.get_mut(&key) {
            if state.delete_pending {
                return Err(status::DELETE_PENDING);
            }
            let conflict = state.counts.conflicts(open.access, open.share_access);
            let ask = Ask {
                access: open.access,
                truncating: oplock.truncating,
                sharing_conflict: conflict,
            };
            let before = state.oplocks.len();
            let decision = oplocks::on_open(&mut state.oplocks, ask);
            let after = state.oplocks.len();
            match decision {
                OnOpen::Wait(breaks) => {
                    state.break_waiters.push((oplock.connection, oplock.token));
                    oplock.breaks = breaks;
                    oplock.waited_on = Some(key);
                    return Err(status::PENDING);
                }
                OnOpen::Go(breaks) => oplock.breaks = breaks,
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
        state.counts.add(&open, 1);
        state.opens.insert(open.id, open);
        let stat_open = oplocks::is_stat_open(Ask {
            access: open.access,
            truncating: oplock.truncating,
            sharing_conflict: false,
        });
        // A stat open of an existing file gets no oplock.
        oplock.granted = if stat_open && !oplock.created {
            0
        } else {
            oplocks::grant(&state.oplocks, oplock.level, others, is_dir)
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
        self.any_oplocks.store(self.oplocks > 0, Ordering::Release);
    }

    /// Says, without the table's lock, whether any file has an oplock:
    /// writes look no further when none has.
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
    ) -> Result<(u8, Vec<(ConnectionId, Token)>), NtStatus> {
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
    pub fn end_breaks(&mut self, key: &FileKey) -> Vec<(ConnectionId, Token)> {
        let Some(state) = self.files.get_mut(key) else {
            return Vec::new();
        };
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

    /// The file is written, resized or locked: level II oplocks on it go
    /// to none, and their holders are to be told.
    pub fn break_level2(&mut self, key: &FileKey) -> Vec<Break> {
        let Some(state) = self.files.get_mut(key) else {
            return Vec::new();
        };
        let before = state.oplocks.len();
        let breaks = oplocks::break_level2(&mut state.oplocks);
        let after = state.oplocks.len();
        self.count_oplocks(before, after);
        breaks
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
        };
        let Some(state) = self.files.get_mut(key) else {
            return closed;
        };
        if let Some(open) = state.opens.remove(&id) {
            state.counts.add(&open, -1);
        }
        state.lock_waiters.retain(|w| w.open != id);
        let oplocks = state.oplocks.len();
        state.oplocks.retain(|o| o.open != id);
        if oplocks != state.oplocks.len() {
            // Closing instead of acknowledging ends a break too.
            closed.wake_held = std::mem::take(&mut state.break_waiters);
            self.oplocks -= oplocks - state.oplocks.len();
            self.any_oplocks.store(self.oplocks > 0, Ordering::Release);
        }
        let locks = state.locks.len();
        state.locks.retain(|l| l.open != id);
        if locks != state.locks.len() {
            self.byte_locks -= locks - state.locks.len();
            self.any_locks.store(self.byte_locks > 0, Ordering::Release);
            closed.wake = std::mem::take(&mut state.lock_waiters);
        }
        if delete_on_close {
            state.delete_pending = true;
        }
        if !state.opens.is_empty() {
            return closed;
        }
        if let Some(state) = self.files.remove(key) {
            self.by_path.remove(&(key.0, state.path.clone(), *key));
            closed.last = Some(LastClose {
                path: state.path,
                is_dir: state.is_dir,
                delete_pending: state.delete_pending,
            });
        }
        closed
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

    /// Whether the directory at `path` is open with DELETE access, which
    /// pins the names of its entries.
    pub fn dir_open_for_delete(&self, share: usize, path: &str) -> bool {
        self.at_path(share, path)
            .any(|(_, s)| s.is_dir && s.counts.delete_access > 0)
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
                            },
                            OpenRef {
                                id: 2,
                                access: a2,
                                share_access: s2,
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
            token: 0,
            truncating: false,
            created: false,
            granted: 0,
            breaks: Vec::new(),
            waited_on: None,
        }
    }

    fn open(id: u64, access: u32, share_access: u32) -> OpenRef {
        OpenRef {
            id,
            access,
            share_access,
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
        assert!(t.dir_open_for_delete(0, "a"));
        assert!(!t.dir_open_for_delete(0, "a/f"));
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
