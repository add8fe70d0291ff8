//! The user store as a running server sees it: loaded once, then reloaded
//! when the file changes, so that `copyless user add/del/passwd` take
//! effect without a restart.
//!
//! Lookups only read the users last loaded (an `Arc` swapped under a
//! lock held for the swap alone); all file access happens in
//! [`LiveUsers::refresh`], which a caller runs on a timer.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::userstore::{Stamp, UserError, UserStore};
use crate::Credentials;

pub struct LiveUsers {
    dir: PathBuf,
    current: RwLock<Arc<UserStore>>,
    generation: AtomicU64,
    /// The file as it was when `current` was loaded (None: there was none).
    /// Held for a whole refresh so that two refreshes never interleave.
    loaded: Mutex<Option<Stamp>>,
}

impl LiveUsers {
    /// Loads `<state_dir>/users` as [`UserStore::load`] does; a missing
    /// file means no users (until one is made).
    pub fn load(state_dir: &Path) -> Result<LiveUsers, UserError> {
        let (store, stamp) = UserStore::load_stamped(state_dir)?;
        Ok(LiveUsers {
            dir: state_dir.to_path_buf(),
            current: RwLock::new(Arc::new(store)),
            generation: AtomicU64::new(0),
            loaded: Mutex::new(stamp),
        })
    }

    /// Reloads the file if it changed since it was last loaded. Ok(true)
    /// when it was reloaded. On an error the users loaded before stay in
    /// force, and the next refresh tries again.
    pub fn refresh(&self) -> Result<bool, UserError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let now = match fs::metadata(self.path()) {
            Ok(meta) => Some(Stamp::of(&meta)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(UserError::Io(err)),
        };
        if now == *loaded {
            return Ok(false);
        }
        let (store, stamp) = UserStore::load_stamped(&self.dir)?;
        let changed = !store.same_users(&self.users());
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(store);
        if changed {
            // After the swap: whoever sees the new generation finds the
            // new users.
            self.generation.fetch_add(1, Ordering::Release);
        }
        *loaded = stamp;
        Ok(true)
    }

    /// The users in force now.
    pub fn users(&self) -> Arc<UserStore> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The file watched.
    pub fn path(&self) -> PathBuf {
        self.dir.join(UserStore::FILE_NAME)
    }
}

impl Credentials for LiveUsers {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.users().nt_hash(user)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Insecurity;
    use std::os::unix::fs::PermissionsExt;

    fn add(dir: &Path, name: &str, password: &str) {
        let mut store = UserStore::load(dir).unwrap();
        store.add(name, password).unwrap();
        store.save().unwrap();
    }

    #[test]
    fn changes_to_the_file_are_picked_up() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let live = LiveUsers::load(dir).unwrap();
        assert!(live.users().is_empty());
        assert_eq!(live.nt_hash("bob"), None);
        assert!(!live.refresh().unwrap(), "no file, and still none");
        let start = live.generation();

        add(dir, "bob", "one");
        assert_eq!(live.nt_hash("bob"), None, "seen only after a refresh");
        assert!(live.refresh().unwrap());
        assert_eq!(live.nt_hash("BOB"), Some(crate::nt_hash("one")));
        let added = live.generation();
        assert!(added > start);
        assert!(
            !live.refresh().unwrap(),
            "an unchanged file is not read again"
        );
        assert_eq!(live.generation(), added);

        let mut store = UserStore::load(dir).unwrap();
        store.set_password("bob", "two").unwrap();
        store.save().unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("two")));
        let changed = live.generation();
        assert!(changed > added);

        let mut store = UserStore::load(dir).unwrap();
        store.remove("bob").unwrap();
        store.save().unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.nt_hash("bob"), None);
        assert!(live.generation() > changed);
    }

    #[test]
    fn rewriting_the_same_users_keeps_the_generation() {
        let tmp = tempfile::tempdir().unwrap();
        add(tmp.path(), "bob", "pw");
        let live = LiveUsers::load(tmp.path()).unwrap();
        let before = live.generation();
        // A new file (a rename) with the same contents.
        UserStore::load(tmp.path()).unwrap().save().unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.generation(), before);
        assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("pw")));
    }

    #[test]
    fn a_removed_file_means_no_users() {
        let tmp = tempfile::tempdir().unwrap();
        add(tmp.path(), "bob", "pw");
        let live = LiveUsers::load(tmp.path()).unwrap();
        let before = live.generation();
        fs::remove_file(live.path()).unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.nt_hash("bob"), None);
        assert!(live.generation() > before);
    }

    #[test]
    fn a_failed_reload_keeps_the_users_and_is_retried() {
        let tmp = tempfile::tempdir().unwrap();
        add(tmp.path(), "bob", "pw");
        let live = LiveUsers::load(tmp.path()).unwrap();
        let path = live.path();
        let before = live.generation();

        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        for _ in 0..2 {
            match live.refresh() {
                Err(UserError::Insecure {
                    problem: Insecurity::Mode(0o644),
                    ..
                }) => {}
                other => panic!("{other:?}"),
            }
            assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("pw")));
        }
        assert_eq!(live.generation(), before);

        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.generation(), before, "the same users as before");

        let good = fs::read_to_string(&path).unwrap();
        fs::write(&path, "bob\n").unwrap();
        assert!(matches!(live.refresh(), Err(UserError::Corrupt { .. })));
        assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("pw")));
        fs::write(
            &path,
            format!("{good}carol:a4f49c406510bdcab6824ee7c30fd852\n"),
        )
        .unwrap();
        assert!(live.refresh().unwrap());
        assert_eq!(live.nt_hash("carol"), Some(crate::nt_hash("Password")));
        assert!(live.generation() > before);
    }

    #[test]
    fn lookups_go_on_while_another_thread_reloads() {
        let tmp = tempfile::tempdir().unwrap();
        add(tmp.path(), "bob", "pw");
        let live = Arc::new(LiveUsers::load(tmp.path()).unwrap());
        let writer = {
            let live = Arc::clone(&live);
            let dir = tmp.path().to_path_buf();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let mut store = UserStore::load(&dir).unwrap();
                    store.add(&format!("u{i}"), "x").unwrap();
                    store.save().unwrap();
                    live.refresh().unwrap();
                }
            })
        };
        // Every lookup sees bob, whichever version of the store it meets.
        for _ in 0..1000 {
            assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("pw")));
        }
        writer.join().unwrap();
        live.refresh().unwrap();
        assert_eq!(live.users().len(), 51);
        assert_eq!(live.nt_hash("u49"), Some(crate::nt_hash("x")));
    }
}
