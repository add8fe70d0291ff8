//! The user store as a running server sees it: loaded once, then reloaded
//! when the file changes, so that `copyless user add/del/passwd/link` take
//! effect without a restart; and each user's Unix account, looked up again
//! whenever the store or the system's passwd or group file changes.
//!
//! Lookups only read the users and accounts last loaded (an `Arc` swapped
//! under a lock held for the swap alone); all file access and every
//! account lookup happen in [`LiveUsers::refresh`], which a caller runs on
//! a timer.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use crate::unix::{self, UnixAccount, UnixError};
use crate::userstore::{Stamp, UserError, UserStore};
use crate::Credentials;

/// The files behind the system's account databases. A directory service
/// (LDAP, sssd) changes nothing here: its changes are seen at the next
/// change of the store or of these files.
const SYSTEM_DATABASES: [&str; 2] = ["/etc/passwd", "/etc/group"];

pub struct LiveUsers {
    dir: PathBuf,
    current: RwLock<Arc<Resolved>>,
    generation: AtomicU64,
    /// The files as they were when `current` was made. Held for a whole
    /// refresh so that two refreshes never interleave.
    seen: Mutex<Seen>,
    accounts: AccountSource,
}

/// The users in force and the Unix accounts they act as.
struct Resolved {
    users: Arc<UserStore>,
    /// By account name: the account, or why there is none.
    accounts: HashMap<String, Result<Arc<UnixAccount>, UnixError>>,
}

struct Seen {
    /// None: there was no store.
    store: Option<Stamp>,
    databases: Vec<Option<Stamp>>,
}

type Lookup = dyn Fn(&str) -> Result<UnixAccount, UnixError> + Send + Sync;

/// Where accounts come from: the system, or a stand-in in tests.
struct AccountSource {
    lookup: Box<Lookup>,
    /// The files whose change may change what `lookup` answers.
    databases: Vec<PathBuf>,
}

impl AccountSource {
    fn system() -> AccountSource {
        AccountSource {
            lookup: Box::new(unix::lookup),
            databases: SYSTEM_DATABASES.iter().map(PathBuf::from).collect(),
        }
    }

    /// A file that cannot be looked at counts as missing: what matters is
    /// whether that changes.
    fn stamps(&self) -> Vec<Option<Stamp>> {
        self.databases
            .iter()
            .map(|path| fs::metadata(path).ok().map(|meta| Stamp::of(&meta)))
            .collect()
    }

    fn resolve(&self, users: Arc<UserStore>) -> Resolved {
        let mut accounts = HashMap::new();
        for name in users.names() {
            if let Some(account) = users.unix_account(&name) {
                if !accounts.contains_key(account) {
                    let found = (self.lookup)(account).map(Arc::new);
                    accounts.insert(account.to_string(), found);
                }
            }
        }
        Resolved { users, accounts }
    }
}

/// What a [`LiveUsers::refresh`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// The user store was read again.
    pub reloaded: bool,
    /// The users' Unix accounts were looked up again (after a reload, or
    /// a change of the passwd or group file).
    pub resolved: bool,
}

impl LiveUsers {
    /// Loads `<state_dir>/users` as [`UserStore::load`] does, and looks up
    /// every user's Unix account; a missing file means no users (until
    /// one is made).
    pub fn load(state_dir: &Path) -> Result<LiveUsers, UserError> {
        Self::load_from(state_dir, AccountSource::system())
    }

    fn load_from(state_dir: &Path, accounts: AccountSource) -> Result<LiveUsers, UserError> {
        let databases = accounts.stamps();
        let (store, stamp) = UserStore::load_stamped(state_dir)?;
        Ok(LiveUsers {
            dir: state_dir.to_path_buf(),
            current: RwLock::new(Arc::new(accounts.resolve(Arc::new(store)))),
            generation: AtomicU64::new(0),
            seen: Mutex::new(Seen {
                store: stamp,
                databases,
            }),
            accounts,
        })
    }

    /// Reloads the store if it changed since it was last loaded, and looks
    /// the accounts up again if the store or the account databases
    /// changed. On an error the users and accounts loaded before stay in
    /// force, and the next refresh tries again.
    pub fn refresh(&self) -> Result<Refreshed, UserError> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let store = match fs::metadata(self.path()) {
            Ok(meta) => Some(Stamp::of(&meta)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(UserError::Io(err)),
        };
        // Before the lookups: a change during them is seen next time.
        let databases = self.accounts.stamps();
        let reloaded = store != seen.store;
        if !reloaded && databases == seen.databases {
            return Ok(Refreshed::default());
        }
        let before = self.resolved();
        let users = if reloaded {
            let (users, stamp) = UserStore::load_stamped(&self.dir)?;
            seen.store = stamp;
            Arc::new(users)
        } else {
            Arc::clone(&before.users)
        };
        let now = self.accounts.resolve(users);
        let changed = !now.users.same_users(&before.users) || now.accounts != before.accounts;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(now);
        if changed {
            // After the swap: whoever sees the new generation finds the
            // new users.
            self.generation.fetch_add(1, Ordering::Release);
        }
        seen.databases = databases;
        Ok(Refreshed {
            reloaded,
            resolved: true,
        })
    }

    /// The users in force now.
    pub fn users(&self) -> Arc<UserStore> {
        Arc::clone(&self.resolved().users)
    }

    /// The users whose Unix account is missing (or could not be looked
    /// up) as of the last load or refresh, in the store's order, each with
    /// why.
    pub fn unresolved(&self) -> Vec<(String, UnixError)> {
        let now = self.resolved();
        now.users
            .names()
            .into_iter()
            .filter_map(|name| {
                let account = now.users.unix_account(&name)?;
                let err = now.accounts.get(account)?.as_ref().err()?.clone();
                Some((name, err))
            })
            .collect()
    }

    /// The file watched.
    pub fn path(&self) -> PathBuf {
        self.dir.join(UserStore::FILE_NAME)
    }

    fn resolved(&self) -> Arc<Resolved> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Credentials for LiveUsers {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.resolved().users.nt_hash(user)
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn unix_account(&self, user: &str) -> Option<Arc<UnixAccount>> {
        let now = self.resolved();
        let account = now.users.unix_account(user)?;
        now.accounts.get(account)?.as_ref().ok().cloned()
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
        assert!(!live.refresh().unwrap().reloaded, "no file, and still none");
        let start = live.generation();

        add(dir, "bob", "one");
        assert_eq!(live.nt_hash("bob"), None, "seen only after a refresh");
        assert!(live.refresh().unwrap().reloaded);
        assert_eq!(live.nt_hash("BOB"), Some(crate::nt_hash("one")));
        let added = live.generation();
        assert!(added > start);
        assert!(
            !live.refresh().unwrap().reloaded,
            "an unchanged file is not read again"
        );
        assert_eq!(live.generation(), added);

        let mut store = UserStore::load(dir).unwrap();
        store.set_password("bob", "two").unwrap();
        store.save().unwrap();
        assert!(live.refresh().unwrap().reloaded);
        assert_eq!(live.nt_hash("bob"), Some(crate::nt_hash("two")));
        let changed = live.generation();
        assert!(changed > added);

        let mut store = UserStore::load(dir).unwrap();
        store.remove("bob").unwrap();
        store.save().unwrap();
        assert!(live.refresh().unwrap().reloaded);
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
        assert!(live.refresh().unwrap().reloaded);
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
        assert!(live.refresh().unwrap().reloaded);
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
        assert!(live.refresh().unwrap().reloaded);
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
        assert!(live.refresh().unwrap().reloaded);
        assert_eq!(live.nt_hash("carol"), Some(crate::nt_hash("Password")));
        assert!(live.generation() > before);
    }

    /// A stand-in for the passwd database, with files of its own to touch.
    struct FakeSystem {
        accounts: Arc<Mutex<HashMap<String, UnixAccount>>>,
        passwd: PathBuf,
        group: PathBuf,
    }

    impl FakeSystem {
        fn new(dir: &Path, names: &[(&str, u32)]) -> FakeSystem {
            let system = FakeSystem {
                accounts: Arc::default(),
                passwd: dir.join("passwd"),
                group: dir.join("group"),
            };
            for (name, uid) in names {
                system.set(name, Some(*uid));
            }
            fs::write(&system.passwd, "").unwrap();
            fs::write(&system.group, "").unwrap();
            system
        }

        /// Adds, changes or (with None) removes an account, without
        /// touching the files.
        fn set(&self, name: &str, uid: Option<u32>) {
            let mut accounts = self.accounts.lock().unwrap();
            match uid {
                Some(uid) => accounts.insert(name.to_string(), account(name, uid)),
                None => accounts.remove(name),
            };
        }

        /// Rewrites a file as useradd does: a new file renamed over it.
        fn touch(path: &Path) {
            let tmp = path.with_extension("new");
            fs::write(&tmp, "changed").unwrap();
            fs::rename(&tmp, path).unwrap();
        }

        fn source(&self) -> AccountSource {
            let accounts = Arc::clone(&self.accounts);
            AccountSource {
                lookup: Box::new(move |name| {
                    accounts
                        .lock()
                        .unwrap()
                        .get(name)
                        .cloned()
                        .ok_or_else(|| UnixError::NotFound(name.to_string()))
                }),
                databases: vec![self.passwd.clone(), self.group.clone()],
            }
        }
    }

    fn account(name: &str, uid: u32) -> UnixAccount {
        UnixAccount {
            name: name.to_string(),
            uid,
            gid: uid,
            groups: vec![uid, 100],
        }
    }

    fn missing(user: &str, account: &str) -> (String, UnixError) {
        (user.to_string(), UnixError::NotFound(account.to_string()))
    }

    #[test]
    fn accounts_are_looked_up_when_the_store_or_the_system_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let system = FakeSystem::new(dir, &[("alice", 1001)]);
        let mut store = UserStore::load(dir).unwrap();
        store.add("Alice", "a").unwrap();
        store.add_linked("bob", "b", "robert").unwrap();
        store.save().unwrap();

        let live = LiveUsers::load_from(dir, system.source()).unwrap();
        assert_eq!(
            live.unix_account("alice"),
            None,
            "\"Alice\" is not \"alice\""
        );
        assert_eq!(live.unix_account("BOB"), None);
        assert_eq!(
            live.unresolved(),
            [missing("Alice", "Alice"), missing("bob", "robert")]
        );
        let start = live.generation();

        // A link to the right account is a store change.
        let mut store = UserStore::load(dir).unwrap();
        store.link("alice", "alice").unwrap();
        store.save().unwrap();
        assert_eq!(
            live.refresh().unwrap(),
            Refreshed {
                reloaded: true,
                resolved: true
            }
        );
        assert_eq!(
            live.unix_account("ALICE").as_deref(),
            Some(&account("alice", 1001))
        );
        assert_eq!(live.unresolved(), [missing("bob", "robert")]);
        let linked = live.generation();
        assert!(linked > start);

        // An account made is seen once the passwd file changes, not before:
        // a lookup never asks the system itself.
        system.set("robert", Some(1002));
        assert_eq!(live.refresh().unwrap(), Refreshed::default());
        assert_eq!(live.unix_account("bob"), None);
        FakeSystem::touch(&system.passwd);
        assert_eq!(
            live.refresh().unwrap(),
            Refreshed {
                reloaded: false,
                resolved: true
            }
        );
        assert_eq!(live.unix_account("bob").unwrap().uid, 1002);
        assert!(live.unresolved().is_empty());
        let created = live.generation();
        assert!(created > linked);
        assert_eq!(live.refresh().unwrap(), Refreshed::default());

        // A change of the group file that changes no answer is no news.
        FakeSystem::touch(&system.group);
        assert!(live.refresh().unwrap().resolved);
        assert_eq!(live.generation(), created);

        system.set("alice", None);
        FakeSystem::touch(&system.group);
        assert!(live.refresh().unwrap().resolved);
        assert_eq!(live.unix_account("alice"), None);
        assert_eq!(live.unresolved(), [missing("Alice", "alice")]);
        assert!(live.generation() > created);
        assert_eq!(live.nt_hash("alice"), Some(crate::nt_hash("a")));
    }

    #[test]
    fn a_failed_reload_keeps_the_accounts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let system = FakeSystem::new(dir, &[("bob", 1001)]);
        add(dir, "bob", "pw");
        let live = LiveUsers::load_from(dir, system.source()).unwrap();
        fs::write(live.path(), "bob\n").unwrap();
        system.set("bob", Some(2000));
        FakeSystem::touch(&system.passwd);
        assert!(matches!(live.refresh(), Err(UserError::Corrupt { .. })));
        assert_eq!(live.unix_account("bob").unwrap().uid, 1001);
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
