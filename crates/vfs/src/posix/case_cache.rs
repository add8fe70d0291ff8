//! Per-directory maps from case-folded name to real name, so that a
//! case-insensitive lookup that misses the exact name does not have to read
//! the whole directory each time.
//!
//! An entry belongs to a directory's (dev, ino) and remembers the
//! directory's mtime and ctime when it was built. Our own creates, renames
//! and unlinks update the entry and its stamp; any other change to the
//! directory moves its mtime/ctime, the stamps no longer match, and the entry
//! is rebuilt on the next miss.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
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

#[derive(Default)]
struct Inner {
    dirs: HashMap<DirKey, DirNames>,
    total_names: usize,
    clock: u64,
    /// Bumped by every change we make anywhere. A listing taken while it
    /// moved may miss that change, and directory timestamps are too coarse
    /// to tell (several changes share one clock tick), so it is not kept.
    generation: u64,
}

impl Inner {
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
        match inner.dirs.get_mut(&key) {
            Some(d) if d.stamp == stamp => {
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
    /// after `stamp` and `generation` were read; a listing that raced with
    /// one of our own changes is not kept.
    pub fn fill<I: IntoIterator<Item = String>>(
        &self,
        key: DirKey,
        stamp: Stamp,
        generation: u64,
        names: I,
    ) {
        let mut map = HashMap::new();
        let mut dupes = false;
        for name in names {
            let folded = fold(&name);
            match map.entry(folded) {
                Entry::Vacant(e) => {
                    e.insert(name);
                }
                Entry::Occupied(_) => dupes = true,
            }
        }
        let mut inner = self.lock();
        inner.drop_dir(key);
        if inner.generation != generation {
            return;
        }
        while !inner.dirs.is_empty()
            && (inner.dirs.len() >= self.max_dirs || inner.total_names + map.len() > self.max_names)
        {
            inner.evict_one();
        }
        inner.clock += 1;
        let last_used = inner.clock;
        inner.total_names += map.len();
        inner.dirs.insert(
            key,
            DirNames {
                stamp,
                names: map,
                dupes,
                last_used,
            },
        );
    }

    /// We created `name` in the directory, which now has `stamp`.
    pub fn added(&self, key: DirKey, stamp: Stamp, name: &str) {
        let mut inner = self.lock();
        inner.generation += 1;
        let Some(d) = inner.dirs.get_mut(&key) else {
            return;
        };
        d.stamp = stamp;
        let folded = fold(name);
        let grew = match d.names.get(&folded) {
            Some(existing) if existing != name => {
                d.dupes = true;
                false
            }
            Some(_) => false,
            None => {
                d.names.insert(folded, name.to_owned());
                true
            }
        };
        if grew {
            inner.total_names += 1;
        }
    }

    /// We removed `name` from the directory, which now has `stamp`.
    pub fn removed(&self, key: DirKey, stamp: Stamp, name: &str) {
        let mut inner = self.lock();
        inner.generation += 1;
        let Some(d) = inner.dirs.get_mut(&key) else {
            return;
        };
        if d.dupes {
            inner.drop_dir(key);
            return;
        }
        d.stamp = stamp;
        let folded = fold(name);
        let shrank = d.names.get(&folded).is_some_and(|real| real == name)
            && d.names.remove(&folded).is_some();
        if shrank {
            inner.total_names -= 1;
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
