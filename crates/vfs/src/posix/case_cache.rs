//! Per-directory maps from case-folded name to real name, so that a
//! case-insensitive lookup that misses the exact name does not have to read
//! the whole directory each time.
//!
//! An entry belongs to a directory's (dev, ino) and remembers the
//! directory's mtime and ctime when it was built. Our own creates, renames
//! and unlinks update the entry and its stamp; any other change to the
//! directory moves its mtime/ctime, the stamps no longer match, and the entry
//! is rebuilt on the next miss.
//!
//! Several of our own changes may be made in one directory at once (many
//! clients copying into one folder). Each is announced before it is made
//! ([`CaseCache::changing`]): while one is under way, a lookup that finds
//! the directory's stamp moved takes the move for it and answers from the
//! entry, which the change updates once made. A listing read while our
//! own changes were made has them replayed on it from a short log, since
//! it may or may not hold them. Otherwise every change in a busy folder
//! would drop its entry, and every lookup there read the whole folder.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use crate::names::fold;

/// (st_dev, st_ino) of a directory.
pub type DirKey = (u64, u64);

/// A directory's modification and change times, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub mtime: (i64, u32),
    pub ctime: (i64, u32),
}

#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The real name of an entry that matches case-insensitively.
    Found(String),
    /// The directory is cached and holds no such name.
    Absent,
    /// Nothing valid is cached for the directory.
    Unknown,
}

struct DirNames {
    stamp: Stamp,
    /// folded name -> real name.
    names: HashMap<String, String>,
    /// Two real names fold to the same key (possible on a case-sensitive
    /// filesystem). Only one is kept, so removing either drops the entry.
    dupes: bool,
    last_used: u64,
}

impl DirNames {
    /// `name` was made: whether the entry holds one name more.
    fn add(&mut self, name: &str) -> bool {
        match self.names.entry(fold(name)) {
            Entry::Occupied(e) => {
                if e.get() != name {
                    self.dupes = true;
                }
                false
            }
            Entry::Vacant(e) => {
                e.insert(name.to_owned());
                true
            }
        }
    }

    /// `name` went: whether the entry holds one name less; None when the
    /// entry can no longer be trusted (a duplicate went).
    fn remove(&mut self, name: &str) -> Option<bool> {
        if self.dupes {
            return None;
        }
        let folded = fold(name);
        let shrank = self.names.get(&folded).is_some_and(|real| real == name)
            && self.names.remove(&folded).is_some();
        Some(shrank)
    }
}

/// One of our own changes, as the log keeps it.
struct Logged {
    key: DirKey,
    /// The name made (`made`) or removed.
    name: String,
    made: bool,
    /// The directory's stamp once it was made.
    stamp: Stamp,
}

/// How many of our latest changes are kept for listings that raced with
/// them: a listing that more changes raced with is not kept.
const LOG_LEN: usize = 1024;

#[derive(Default)]
struct Inner {
    dirs: HashMap<DirKey, DirNames>,
    total_names: usize,
    clock: u64,
    /// Bumped by every change we make anywhere. A listing taken while it
    /// moved may or may not hold that change, and directory timestamps
    /// are too coarse to tell (several changes share one clock tick).
    generation: u64,
    /// Our latest changes, the last one made at `generation`.
    log: VecDeque<Logged>,
    /// Directories with changes of ours under way, and how many.
    changing: HashMap<DirKey, u32>,
}

impl Inner {
    fn log(&mut self, key: DirKey, stamp: Stamp, name: &str, made: bool) {
        self.generation += 1;
        if self.log.len() == LOG_LEN {
            self.log.pop_front();
        }
        self.log.push_back(Logged {
            key,
            name: name.to_owned(),
            made,
            stamp,
        });
    }

    fn drop_dir(&mut self, key: DirKey) {
        if let Some(d) = self.dirs.remove(&key) {
            self.total_names -= d.names.len();
        }
    }

    fn evict_one(&mut self) {
        let oldest = self
            .dirs
            .iter()
            .min_by_key(|(_, d)| d.last_used)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.drop_dir(k);
        }
    }
}

pub struct CaseCache {
    inner: Mutex<Inner>,
    max_dirs: usize,
    max_names: usize,
}

impl CaseCache {
    /// A cache holding at most `max_dirs` directories and, beyond the most
    /// recent one, at most `max_names` names in all.
    pub fn new(max_dirs: usize, max_names: usize) -> CaseCache {
        CaseCache {
            inner: Mutex::new(Inner::default()),
            max_dirs: max_dirs.max(1),
            max_names,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map is consistent between statements, so a panic elsewhere
        // while holding the lock leaves nothing half-done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lookup(&self, key: DirKey, stamp: Stamp, folded: &str) -> Lookup {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let ours = inner.changing.contains_key(&key);
        match inner.dirs.get_mut(&key) {
            Some(d) if d.stamp == stamp || ours => {
                d.last_used = now;
                match d.names.get(folded) {
                    Some(real) => Lookup::Found(real.clone()),
                    None => Lookup::Absent,
                }
            }
            Some(_) => {
                inner.drop_dir(key);
                Lookup::Unknown
            }
            None => Lookup::Unknown,
        }
    }

    /// The change generation, read before listing a directory for
    /// [`CaseCache::fill`].
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Replaces what is known about a directory with a full listing taken
    /// after `stamp` and `generation` were read. Our own changes made
    /// since are replayed on it; a listing that more raced with than the
    /// log holds is not kept.
    pub fn fill<I: IntoIterator<Item = String>>(
        &self,
        key: DirKey,
        stamp: Stamp,
        generation: u64,
        names: I,
    ) {
        let mut d = DirNames {
            stamp,
            names: HashMap::new(),
            dupes: false,
            last_used: 0,
        };
        for name in names {
            d.add(&name);
        }
        let mut inner = self.lock();
        inner.drop_dir(key);
        let Some(missed) = usize::try_from(inner.generation - generation)
            .ok()
            .filter(|m| *m <= inner.log.len())
        else {
            return;
        };
        let since = inner.log.len() - missed;
        for c in inner.log.range(since..).filter(|c| c.key == key) {
            if c.made {
                d.add(&c.name);
            } else if d.remove(&c.name).is_none() {
                return;
            }
            d.stamp = c.stamp;
        }
        while !inner.dirs.is_empty()
            && (inner.dirs.len() >= self.max_dirs
                || inner.total_names + d.names.len() > self.max_names)
        {
            inner.evict_one();
        }
        inner.clock += 1;
        d.last_used = inner.clock;
        inner.total_names += d.names.len();
        inner.dirs.insert(key, d);
    }

    /// One of our own changes is about to be made in the directories
    /// `keys`, until the guard goes (after [`CaseCache::added`] or
    /// [`CaseCache::removed`] told of it, or it failed).
    pub fn changing(&self, keys: &[DirKey]) -> Changing<'_> {
        let mut inner = self.lock();
        for key in keys {
            *inner.changing.entry(*key).or_default() += 1;
        }
        Changing {
            cache: self,
            keys: keys.to_vec(),
        }
    }

    /// We created `name` in the directory, which now has `stamp`.
    pub fn added(&self, key: DirKey, stamp: Stamp, name: &str) {
        let mut inner = self.lock();
        inner.log(key, stamp, name, true);
        let Some(d) = inner.dirs.get_mut(&key) else {
            return;
        };
        d.stamp = stamp;
        if d.add(name) {
            inner.total_names += 1;
        }
    }

    /// We removed `name` from the directory, which now has `stamp`.
    pub fn removed(&self, key: DirKey, stamp: Stamp, name: &str) {
        let mut inner = self.lock();
        inner.log(key, stamp, name, false);
        let Some(d) = inner.dirs.get_mut(&key) else {
            return;
        };
        d.stamp = stamp;
        match d.remove(name) {
            Some(true) => inner.total_names -= 1,
            Some(false) => {}
            None => inner.drop_dir(key),
        }
    }

    /// Forgets a directory (its entry proved wrong).
    pub fn invalidate(&self, key: DirKey) {
        self.lock().drop_dir(key);
    }

    #[cfg(test)]
    fn dir_count(&self) -> usize {
        self.lock().dirs.len()
    }
}

/// Announces one of our own changes while it is made (see
/// [`CaseCache::changing`]).
pub struct Changing<'a> {
    cache: &'a CaseCache,
    keys: Vec<DirKey>,
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        let mut inner = self.cache.lock();
        for key in &self.keys {
            if let Entry::Occupied(mut e) = inner.changing.entry(*key) {
                *e.get_mut() -= 1;
                if *e.get() == 0 {
                    e.remove();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: Stamp = Stamp {
        mtime: (1, 0),
        ctime: (1, 0),
    };
    const S2: Stamp = Stamp {
        mtime: (2, 5),
        ctime: (2, 5),
    };

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_real_case_and_knows_absence() {
        let c = CaseCache::new(8, 1000);
        assert_eq!(c.lookup((1, 1), S1, "file.txt"), Lookup::Unknown);
        c.fill((1, 1), S1, c.generation(), names(&["File.TXT", "Other"]));
        assert_eq!(
            c.lookup((1, 1), S1, "file.txt"),
            Lookup::Found("File.TXT".into())
        );
        assert_eq!(c.lookup((1, 1), S1, "missing"), Lookup::Absent);
        // Another directory is unaffected.
        assert_eq!(c.lookup((1, 2), S1, "file.txt"), Lookup::Unknown);
    }

    #[test]
    fn changed_stamp_discards_entry() {
        let c = CaseCache::new(8, 1000);
        c.fill((1, 1), S1, c.generation(), names(&["A"]));
        assert_eq!(c.lookup((1, 1), S2, "a"), Lookup::Unknown);
        // It was dropped, not just skipped.
        assert_eq!(c.lookup((1, 1), S1, "a"), Lookup::Unknown);
    }

    #[test]
    fn own_changes_keep_entry_valid() {
        let c = CaseCache::new(8, 1000);
        c.fill((1, 1), S1, c.generation(), names(&["A"]));
        c.added((1, 1), S2, "NewFile");
        assert_eq!(
            c.lookup((1, 1), S2, "newfile"),
            Lookup::Found("NewFile".into())
        );
        c.removed((1, 1), S1, "A");
        assert_eq!(c.lookup((1, 1), S1, "a"), Lookup::Absent);
        assert_eq!(
            c.lookup((1, 1), S1, "newfile"),
            Lookup::Found("NewFile".into())
        );
    }

    const S3: Stamp = Stamp {
        mtime: (3, 0),
        ctime: (3, 0),
    };

    #[test]
    fn a_directory_with_our_change_under_way_is_answered_from_its_entry() {
        let c = CaseCache::new(8, 1000);
        c.fill((1, 1), S1, c.generation(), names(&["A"]));
        let changing = c.changing(&[(1, 1)]);
        // The change is made: the directory's stamp moved before the
        // cache is told.
        assert_eq!(c.lookup((1, 1), S2, "a"), Lookup::Found("A".into()));
        assert_eq!(c.lookup((1, 1), S2, "new"), Lookup::Absent);
        c.added((1, 1), S2, "New");
        drop(changing);
        assert_eq!(c.lookup((1, 1), S2, "new"), Lookup::Found("New".into()));
        // Nothing of ours under way: a moved stamp is someone else's.
        assert_eq!(c.lookup((1, 1), S3, "new"), Lookup::Unknown);
    }

    #[test]
    fn a_listing_that_raced_with_our_changes_has_them_replayed() {
        let c = CaseCache::new(8, 1000);
        let generation = c.generation();
        // Made while the listing was read, which holds "Old" still and
        // not "New".
        c.added((1, 1), S2, "New");
        c.added((1, 2), S2, "Elsewhere");
        c.removed((1, 1), S3, "Old");
        c.fill((1, 1), S1, generation, names(&["Old", "Other"]));
        assert_eq!(c.lookup((1, 1), S3, "new"), Lookup::Found("New".into()));
        assert_eq!(c.lookup((1, 1), S3, "old"), Lookup::Absent);
        assert_eq!(c.lookup((1, 1), S3, "elsewhere"), Lookup::Absent);
        assert_eq!(c.lookup((1, 1), S3, "other"), Lookup::Found("Other".into()));
        // More changes than the log keeps: the listing is not kept.
        let generation = c.generation();
        for i in 0..=LOG_LEN {
            c.added((1, 3), S2, &format!("f{i}"));
        }
        c.fill((1, 3), S1, generation, names(&[]));
        assert_eq!(c.lookup((1, 3), S2, "f0"), Lookup::Unknown);
    }

    #[test]
    fn removing_a_duplicate_drops_the_directory() {
        let c = CaseCache::new(8, 1000);
        c.fill((1, 1), S1, c.generation(), names(&["abc", "ABC"]));
        c.removed((1, 1), S2, "ABC");
        assert_eq!(c.lookup((1, 1), S2, "abc"), Lookup::Unknown);
    }

    #[test]
    fn bounded_in_directories_and_names() {
        let c = CaseCache::new(2, 1000);
        c.fill((1, 1), S1, c.generation(), names(&["a"]));
        c.fill((1, 2), S1, c.generation(), names(&["b"]));
        // Touch (1,1) so that (1,2) is the least recently used.
        assert_eq!(c.lookup((1, 1), S1, "a"), Lookup::Found("a".into()));
        c.fill((1, 3), S1, c.generation(), names(&["c"]));
        assert_eq!(c.dir_count(), 2);
        assert_eq!(c.lookup((1, 2), S1, "b"), Lookup::Unknown);
        assert_eq!(c.lookup((1, 1), S1, "a"), Lookup::Found("a".into()));

        let c = CaseCache::new(100, 3);
        c.fill((1, 1), S1, c.generation(), names(&["a", "b"]));
        c.fill((1, 2), S1, c.generation(), names(&["c", "d"]));
        assert_eq!(c.dir_count(), 1);
        assert_eq!(c.lookup((1, 2), S1, "c"), Lookup::Found("c".into()));
    }
}
