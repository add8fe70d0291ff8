//! A share's recycle bin (`recycle = true`, as Samba's vfs_recycle and
//! the bins of NAS systems keep one): a file deleted from the share is
//! moved to `.recycle/USER/`, under the folders it was in, rather than
//! removed. The bin is the server's: `.recycle` is made by the server
//! (mode 0755), and each user's part of it by the server for that user
//! (owned by them, mode 0700), so that no user can make another's part
//! or look into it; what is in it keeps its owner and its mode. A name
//! already there is kept too: the newcomer becomes `Copy #N of NAME`.
//! What the bin keeps not (its own files, excluded names, files above the
//! size limit, anything it cannot take) is removed as without a bin.
//!
//! A file's last access time is set to when it came into the bin (its
//! change time once moved, by the filesystem's clock), and the server
//! removes what stayed longer than `recycle_keep_days`.

use std::sync::Arc;

use copyless_vfs::{join, FileStat, Identity, Kind, OpenRequest, SetTimes, Vfs, VfsError};

use crate::names::wildcard::Pattern;

/// The bin's folder, in the share's root.
pub const FOLDER: &str = ".recycle";

/// Name clashes numbered at most; past that, the file is removed.
const MAX_COPIES: u32 = 1000;

/// FILETIME units in a day.
const DAY: u64 = 86_400 * 10_000_000;

/// What a share's bin keeps, and for how long.
pub struct RecycleBin {
    /// Names (of one component) never kept.
    exclude: Vec<Pattern>,
    /// Files larger than this are not kept; 0: any size.
    max_size: u64,
    /// Days a file stays; 0: until someone empties the bin.
    keep_days: u32,
}

impl std::fmt::Debug for RecycleBin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecycleBin")
            .field("excluded_patterns", &self.exclude.len())
            .field("max_size", &self.max_size)
            .field("keep_days", &self.keep_days)
            .finish()
    }
}

/// A deletion into a bin: the bin, and the user whose part of it takes
/// the file.
#[derive(Debug, Clone)]
pub struct Recycling {
    pub bin: Arc<RecycleBin>,
    pub user: Arc<str>,
}

impl RecycleBin {
    /// A bin that keeps every file but those whose names match one of
    /// `exclude` (patterns of one name, `*` and `?`, any case) or larger
    /// than `max_size` bytes (0: any), for `keep_days` days (0: for ever).
    pub fn new(exclude: &[String], max_size: u64, keep_days: u32) -> Result<RecycleBin, String> {
        let exclude = exclude
            .iter()
            .map(|p| {
                if p.is_empty() || p.contains(['/', '\\']) || p.contains(char::is_control) {
                    return Err(format!("{p:?} is not a pattern of one name"));
                }
                Pattern::new(p).ok_or_else(|| format!("{p:?} is longer than a name may be"))
            })
            .collect::<Result<_, _>>()?;
        Ok(RecycleBin {
            exclude,
            max_size,
            keep_days,
        })
    }

    pub fn keep_days(&self) -> u32 {
        self.keep_days
    }

    /// Deletes the file at the real path `path` as `who`, `user`'s
    /// deletion: into the bin when it keeps it, else for good.
    pub fn delete(
        &self,
        vfs: &dyn Vfs,
        who: &Identity,
        user: &str,
        path: &str,
    ) -> Result<(), VfsError> {
        if self.keep(vfs, who, user, path).is_err() {
            return vfs.unlink(who, path, false);
        }
        Ok(())
    }

    /// Moves the file into the bin; an error when the bin does not (or
    /// cannot) keep it, which is then removed.
    fn keep(&self, vfs: &dyn Vfs, who: &Identity, user: &str, path: &str) -> Result<(), VfsError> {
        let (folders, name) = match path.rsplit_once('/') {
            Some((folders, name)) => (folders, name),
            None => ("", path),
        };
        let in_bin = path.split('/').next() == Some(FOLDER);
        if in_bin || self.exclude.iter().any(|p| p.matches(name)) {
            return Err(VfsError::NotSupported);
        }
        if self.max_size > 0 && size(vfs, who, path)? > self.max_size {
            return Err(VfsError::NotSupported);
        }
        vfs.make_dir_for(&Identity::Server, FOLDER, 0o755)?;
        let mut dir = join(FOLDER, &folder_name(user));
        vfs.make_dir_for(who, &dir, 0o700)?;
        for folder in folders.split('/').filter(|f| !f.is_empty()) {
            dir = join(&dir, folder);
            make_folder(vfs, who, &dir)?;
        }
        for n in 0..MAX_COPIES {
            let target = match n {
                0 => join(&dir, name),
                n => join(&dir, &format!("Copy #{n} of {name}")),
            };
            match vfs.rename(who, path, &target, false) {
                Ok(kept) => {
                    // When it came in: what it is kept from.
                    let _ = touch(vfs, who, &kept);
                    return Ok(());
                }
                Err(VfsError::Collision) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(VfsError::Collision)
    }

    /// Removes from the bin, as the server, every file that came into it
    /// more than `keep_days` before `now`, and the folders that leaves
    /// empty (but each user's own); how many files went.
    pub fn expire(&self, vfs: &dyn Vfs, now: u64) -> Result<usize, VfsError> {
        if self.keep_days == 0 {
            return Ok(0);
        }
        let before = now.saturating_sub(u64::from(self.keep_days) * DAY);
        match sweep(vfs, FOLDER, before, 0) {
            Err(VfsError::NameNotFound | VfsError::PathNotFound) => Ok(0),
            done => done.map(|(gone, _)| gone),
        }
    }
}

/// A user's name as a folder's: nothing that would lead elsewhere.
fn folder_name(user: &str) -> String {
    let name: String = user
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | '\0') {
                '_'
            } else {
                c
            }
        })
        .collect();
    match name.as_str() {
        "" | "." | ".." => "_".to_owned(),
        _ => name,
    }
}

fn size(vfs: &dyn Vfs, who: &Identity, path: &str) -> Result<u64, VfsError> {
    Ok(vfs
        .open(&OpenRequest::look(who, path, Kind::NonDirectory))?
        .stat
        .size)
}

/// The folder `path` in the bin, made if it is not there.
fn make_folder(vfs: &dyn Vfs, who: &Identity, path: &str) -> Result<(), VfsError> {
    let made = vfs.open(&OpenRequest {
        who,
        path,
        disposition: copyless_vfs::Disposition::OpenIf,
        kind: Kind::Directory,
        read: false,
        write: false,
        attributes: 0,
        allocation_size: 0,
        unlink_asked: false,
    });
    made.map(|_| ())
}

/// Sets the file's last access time to its change time: when the move
/// into the bin changed it.
fn touch(vfs: &dyn Vfs, who: &Identity, path: &str) -> Result<(), VfsError> {
    let o = vfs.open(&OpenRequest::look(who, path, Kind::NonDirectory))?;
    let times = SetTimes {
        last_access_time: Some(o.stat.change_time),
        ..SetTimes::default()
    };
    vfs.set_times(&o.handle, &times)
}

/// Removes what in the folder `path` came before `before`: the files
/// gone, and whether the folder is left empty.
fn sweep(vfs: &dyn Vfs, path: &str, before: u64, depth: u32) -> Result<(usize, bool), VfsError> {
    let server = Identity::Server;
    let dir = vfs.open(&OpenRequest::look(&server, path, Kind::Directory))?;
    let mut gone = 0;
    let mut left = 0;
    for name in vfs.list_names(&dir.handle)? {
        let Some(st) = vfs.entry(&dir.handle, &name)? else {
            continue;
        };
        let child = join(path, &name);
        if st.is_dir {
            let (g, empty) = sweep(vfs, &child, before, depth + 1)?;
            gone += g;
            // Each user's own part stays.
            if empty && depth > 0 && vfs.unlink(&server, &child, true).is_ok() {
                continue;
            }
        } else if expired(&st, before) && vfs.unlink(&server, &child, false).is_ok() {
            gone += 1;
            continue;
        }
        left += 1;
    }
    Ok((gone, left == 0))
}

fn expired(st: &FileStat, before: u64) -> bool {
    st.last_access_time < before
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_vfs::memory::MemoryVfs;
    use copyless_vfs::Disposition;

    fn put(vfs: &MemoryVfs, path: &str, data: &[u8]) {
        let o = vfs
            .open(&OpenRequest {
                who: &Identity::Server,
                path,
                disposition: Disposition::Create,
                kind: Kind::NonDirectory,
                read: true,
                write: true,
                attributes: 0,
                allocation_size: 0,
                unlink_asked: false,
            })
            .unwrap();
        vfs.write(&o.handle, 0, data).unwrap();
    }

    fn exists(vfs: &MemoryVfs, path: &str) -> bool {
        vfs.resolve(&Identity::Server, path).is_ok()
    }

    fn came_in(vfs: &MemoryVfs, path: &str) -> u64 {
        let o = vfs
            .open(&OpenRequest::look(&Identity::Server, path, Kind::Any))
            .unwrap();
        o.stat.last_access_time
    }

    #[test]
    fn deleted_files_keep_their_folders_and_clashes_are_numbered() {
        let vfs = MemoryVfs::new();
        let who = Identity::Server;
        vfs.make_dir_for(&who, "docs", 0o755).unwrap();
        let bin = RecycleBin::new(&["*.tmp".into()], 0, 30).unwrap();
        for _ in 0..3 {
            put(&vfs, "docs/a.txt", b"x");
            bin.delete(&vfs, &who, "alice", "docs/a.txt").unwrap();
        }
        assert!(!exists(&vfs, "docs/a.txt"));
        for kept in ["a.txt", "Copy #1 of a.txt", "Copy #2 of a.txt"] {
            assert!(
                exists(&vfs, &format!(".recycle/alice/docs/{kept}")),
                "{kept}"
            );
        }
        // Excluded names and the bin's own files go for good.
        put(&vfs, "scratch.tmp", b"x");
        bin.delete(&vfs, &who, "alice", "scratch.tmp").unwrap();
        assert!(!exists(&vfs, ".recycle/alice/scratch.tmp") && !exists(&vfs, "scratch.tmp"));
        bin.delete(&vfs, &who, "alice", ".recycle/alice/docs/a.txt")
            .unwrap();
        assert!(!exists(&vfs, ".recycle/alice/docs/a.txt"));
        // A user name cannot lead out of the bin.
        put(&vfs, "b.txt", b"x");
        bin.delete(&vfs, &who, "../x", "b.txt").unwrap();
        assert!(exists(&vfs, ".recycle/.._x/b.txt"));
    }

    #[test]
    fn large_files_are_not_kept() {
        let vfs = MemoryVfs::new();
        let who = Identity::Server;
        let bin = RecycleBin::new(&[], 10, 0).unwrap();
        put(&vfs, "small", b"12345");
        put(&vfs, "large", b"12345678901");
        bin.delete(&vfs, &who, "bob", "small").unwrap();
        bin.delete(&vfs, &who, "bob", "large").unwrap();
        assert!(exists(&vfs, ".recycle/bob/small"));
        assert!(!exists(&vfs, ".recycle/bob/large") && !exists(&vfs, "large"));
    }

    #[test]
    fn what_stayed_too_long_goes() {
        let vfs = MemoryVfs::new();
        let who = Identity::Server;
        vfs.make_dir_for(&who, "d", 0o755).unwrap();
        let bin = RecycleBin::new(&[], 0, 7).unwrap();
        put(&vfs, "d/old", b"x");
        bin.delete(&vfs, &who, "carol", "d/old").unwrap();
        let old = came_in(&vfs, ".recycle/carol/d/old");
        assert!(old > 0);
        put(&vfs, "new", b"x");
        bin.delete(&vfs, &who, "carol", "new").unwrap();
        let new = came_in(&vfs, ".recycle/carol/new");
        assert!(new > old);
        // A week after the first came in, but not yet after the second.
        assert_eq!(bin.expire(&vfs, new + 7 * DAY - 1).unwrap(), 1);
        assert!(!exists(&vfs, ".recycle/carol/d"));
        assert!(exists(&vfs, ".recycle/carol/new"));
        assert_eq!(bin.expire(&vfs, new + 7 * DAY + 1).unwrap(), 1);
        assert!(exists(&vfs, ".recycle/carol"));
        // Kept for ever, or no bin yet: nothing to do.
        let forever = RecycleBin::new(&[], 0, 0).unwrap();
        assert_eq!(forever.expire(&vfs, new + 100 * DAY).unwrap(), 0);
        assert_eq!(bin.expire(&MemoryVfs::new(), new).unwrap(), 0);
        assert!(RecycleBin::new(&["a/b".into()], 0, 0).is_err());
    }
}
