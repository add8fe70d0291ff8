//! The user store: one file, `<state_dir>/users`, of `name:NT-hash` or
//! `name:NT-hash:account` lines, where `account` is the Unix account the
//! user acts as (without it, the account of the user's own name).
//!
//! The NT hash is password-equivalent for NTLM, so the file is private to
//! its owner (0600 in a 0700 directory), a file that others could read is
//! refused (as ssh refuses such a private key), and hashes are zeroed when
//! dropped.

use std::fmt;
use std::fs::{self, DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::text;
use crate::unix::valid_account_name;

const MAX_NAME_CHARS: usize = 64;
const FORBIDDEN: &str = "/\\[]\":;|=,+*?<>@";

/// The users known to the server, with the file they live in.
pub struct UserStore {
    dir: PathBuf,
    users: Vec<User>,
}

struct User {
    name: String,
    hash: Zeroizing<[u8; 16]>,
    /// None: the account named as the user is.
    account: Option<String>,
}

#[derive(Debug)]
pub enum UserError {
    Exists(String),
    Unknown(String),
    InvalidName(String),
    InvalidAccount(String),
    Io(std::io::Error),
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// The file is not private to us, so it is not trusted (nor used).
    Insecure {
        path: PathBuf,
        problem: Insecurity,
    },
}

/// Why the user store is not private enough to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insecurity {
    /// Group or others have some access; the file's permission bits.
    Mode(u32),
    /// Owned by `owner`, who is neither root nor `euid`, the user we run as.
    Owner { owner: u32, euid: u32 },
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserError::Exists(name) => write!(f, "user {name:?} already exists"),
            UserError::Unknown(name) => write!(f, "no such user: {name:?}"),
            UserError::InvalidName(name) => write!(
                f,
                "invalid user name {name:?}: use 1 to {MAX_NAME_CHARS} characters, \
                 without control characters or any of {FORBIDDEN}, \
                 not starting with '#' nor starting or ending with a space"
            ),
            UserError::InvalidAccount(name) => write!(
                f,
                "invalid Unix account name {name:?}: use 1 to 256 characters without \
                 whitespace, control characters, ':' or ',', not starting with '+' or '-'"
            ),
            UserError::Io(err) => write!(f, "user store: {err}"),
            UserError::Corrupt {
                path,
                line,
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
            UserError::Insecure { path, problem } => {
                let shown = shell_quote(&path.to_string_lossy());
                match problem {
                    Insecurity::Mode(mode) => write!(
                        f,
                        "{} has mode {mode:04o}: group or others may access the password \
                         hashes in it, so it is not used; fix it with `chmod 600 {shown}`",
                        path.display()
                    ),
                    Insecurity::Owner { owner, euid } => write!(
                        f,
                        "{} is owned by uid {owner}, but copyless runs as uid {euid} and \
                         trusts only its own or root's user store; fix it with \
                         `chown {euid} {shown}`",
                        path.display()
                    ),
                }
            }
        }
    }
}

/// `s` as one shell word, so that a suggested command can be pasted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%=".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Refuses a store that others could read or change, as ssh refuses a
/// private key: the hashes in it are as good as the passwords.
fn check_private(path: &Path, mode: u32, owner: u32, euid: u32) -> Result<(), UserError> {
    let problem = if owner != euid && owner != 0 {
        Insecurity::Owner { owner, euid }
    } else if mode & 0o077 != 0 {
        Insecurity::Mode(mode & 0o7777)
    } else {
        return Ok(());
    };
    Err(UserError::Insecure {
        path: path.to_path_buf(),
        problem,
    })
}

/// What identifies one version of the users file, to notice a change
/// without reading it: a rename gives a new inode, an edit in place a new
/// size or times (with nanoseconds), a chmod a new ctime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(meta: &Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

impl std::error::Error for UserError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UserError::Io(err) => Some(err),
            _ => None,
        }
    }
}

impl From<io::Error> for UserError {
    fn from(err: io::Error) -> Self {
        UserError::Io(err)
    }
}

impl fmt::Debug for UserStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names only: the hashes are secrets.
        f.debug_struct("UserStore")
            .field("path", &self.path())
            .field("users", &self.names())
            .finish()
    }
}

/// Checks a user name against the rules Windows applies to account names,
/// plus what our file format needs (no ':', no leading '#').
fn validate_name(name: &str) -> Result<(), UserError> {
    let count = name.chars().count();
    let valid = (1..=MAX_NAME_CHARS).contains(&count)
        && !name.starts_with('#')
        && !name.starts_with(char::is_whitespace)
        && !name.ends_with(char::is_whitespace)
        && !name
            .chars()
            .any(|c| c.is_control() || FORBIDDEN.contains(c));
    if valid {
        Ok(())
    } else {
        Err(UserError::InvalidName(name.to_string()))
    }
}

fn validate_account(account: &str) -> Result<(), UserError> {
    if valid_account_name(account) {
        Ok(())
    } else {
        Err(UserError::InvalidAccount(account.to_string()))
    }
}

/// An NT hash written as 32 hex digits (either case), as this store and
/// Samba's smbpasswd format write it.
pub fn parse_hex_hash(hex: &str) -> Option<[u8; 16]> {
    if hex.len() != 32 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 16];
    for (byte, pair) in out.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

impl UserStore {
    pub const FILE_NAME: &'static str = "users";

    /// Reads <state_dir>/users; a missing file is an empty store. A file
    /// that group or others may access, or that belongs to someone other
    /// than us or root, is refused ([`UserError::Insecure`]).
    pub fn load(state_dir: &Path) -> Result<UserStore, UserError> {
        Self::load_stamped(state_dir).map(|(store, _)| store)
    }

    /// [`UserStore::load`], with the stamp of the file as it was read
    /// (None when there is none).
    pub(crate) fn load_stamped(state_dir: &Path) -> Result<(UserStore, Option<Stamp>), UserError> {
        let mut store = UserStore {
            dir: state_dir.to_path_buf(),
            users: Vec::new(),
        };
        let path = store.path();
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((store, None)),
            Err(err) => return Err(UserError::Io(err)),
        };
        // The checks and the stamp are of the file opened, so a rename
        // between a stat and the open cannot slip past them.
        let meta = file.metadata()?;
        check_private(
            &path,
            meta.mode(),
            meta.uid(),
            rustix::process::geteuid().as_raw(),
        )?;
        // Room for the whole file up front, so that no reallocation leaves
        // an unzeroed copy of the hashes behind.
        let mut contents = Zeroizing::new(String::with_capacity(
            usize::try_from(meta.len()).unwrap_or(0) + 1,
        ));
        file.read_to_string(&mut contents)?;
        for (index, line) in contents.lines().enumerate() {
            let corrupt = |message: String| UserError::Corrupt {
                path: path.clone(),
                line: index + 1,
                message,
            };
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.trim_end().splitn(3, ':');
            let (Some(name), Some(hex)) = (fields.next(), fields.next()) else {
                return Err(corrupt("expected name:NT-hash[:account]".to_string()));
            };
            validate_name(name).map_err(|err| corrupt(err.to_string()))?;
            let hash = parse_hex_hash(hex)
                .ok_or_else(|| corrupt(format!("the hash of {name:?} is not 32 hex digits")))?;
            let account = fields.next().map(str::to_string);
            if let Some(account) = &account {
                validate_account(account).map_err(|err| corrupt(err.to_string()))?;
            }
            if store.find(name).is_some() {
                return Err(corrupt(format!("user {name:?} appears twice")));
            }
            store.users.push(User {
                name: name.to_string(),
                hash: Zeroizing::new(hash),
                account,
            });
        }
        Ok((store, Some(Stamp::of(&meta))))
    }

    /// Writes atomically (temp file + rename) with mode 0600, creating state_dir with mode 0700 if missing.
    pub fn save(&self) -> Result<(), UserError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let mut contents = Zeroizing::new(String::from(
            "# copyless users: name:NT hash (MD4 of the UTF-16LE password), then\n\
             # :account when the user acts as a Unix account not of its own name.\n\
             # The hash is as good as the password: keep this file private.\n",
        ));
        for user in &self.users {
            contents.push_str(&user.name);
            contents.push(':');
            for byte in user.hash.iter() {
                contents.push_str(&format!("{byte:02x}"));
            }
            if let Some(account) = &user.account {
                contents.push(':');
                contents.push_str(account);
            }
            contents.push('\n');
        }

        let path = self.path();
        let tmp = self
            .dir
            .join(format!(".{}.tmp.{}", Self::FILE_NAME, std::process::id()));
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            // The mode above applies only to a new file; a stale one left by
            // a crash could carry other bits.
            file.set_permissions(fs::Permissions::from_mode(0o600))?;
            file.write_all(contents.as_bytes())?;
            file.sync_all()?;
            fs::rename(&tmp, &path)?;
            // Make the rename itself durable.
            fs::File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written.map_err(UserError::Io)
    }

    /// Adds a user linked to the Unix account of its own name.
    pub fn add(&mut self, name: &str, password: &str) -> Result<(), UserError> {
        self.insert(name, crate::nt_hash(password), None)
    }

    /// Adds a user linked to the Unix account `account`.
    pub fn add_linked(
        &mut self,
        name: &str,
        password: &str,
        account: &str,
    ) -> Result<(), UserError> {
        validate_account(account)?;
        self.insert(name, crate::nt_hash(password), Some(account.to_string()))
    }

    /// Adds a user by its NT hash, as another server's password database
    /// (Samba's passdb) keeps it, so that nobody has to type the password
    /// again; linked to `account`, or to the account of its own name when
    /// None.
    pub fn add_nt_hash(
        &mut self,
        name: &str,
        hash: [u8; 16],
        account: Option<&str>,
    ) -> Result<(), UserError> {
        if let Some(account) = account {
            validate_account(account)?;
        }
        self.insert(name, hash, account.map(str::to_string))
    }

    fn insert(
        &mut self,
        name: &str,
        hash: [u8; 16],
        account: Option<String>,
    ) -> Result<(), UserError> {
        let hash = Zeroizing::new(hash);
        validate_name(name)?;
        if self.find(name).is_some() {
            return Err(UserError::Exists(name.to_string()));
        }
        self.users.push(User {
            name: name.to_string(),
            hash,
            account,
        });
        Ok(())
    }

    /// Links user `name` to the Unix account `account` instead.
    pub fn link(&mut self, name: &str, account: &str) -> Result<(), UserError> {
        validate_account(account)?;
        let index = self
            .find(name)
            .ok_or_else(|| UserError::Unknown(name.to_string()))?;
        self.users[index].account = Some(account.to_string());
        Ok(())
    }

    /// The Unix account user `name` acts as: the one it is linked to, or
    /// else the one of its own name.
    pub fn unix_account(&self, name: &str) -> Option<&str> {
        let user = &self.users[self.find(name)?];
        Some(user.account.as_deref().unwrap_or(&user.name))
    }

    pub fn set_password(&mut self, name: &str, password: &str) -> Result<(), UserError> {
        let index = self
            .find(name)
            .ok_or_else(|| UserError::Unknown(name.to_string()))?;
        self.users[index].hash = Zeroizing::new(crate::nt_hash(password));
        Ok(())
    }

    pub fn remove(&mut self, name: &str) -> Result<(), UserError> {
        let index = self
            .find(name)
            .ok_or_else(|| UserError::Unknown(name.to_string()))?;
        self.users.remove(index);
        Ok(())
    }

    /// The names as given when added, in file order.
    pub fn names(&self) -> Vec<String> {
        self.users.iter().map(|user| user.name.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether both hold the same users (names compared as Windows does)
    /// with the same hashes and Unix accounts.
    pub fn same_users(&self, other: &UserStore) -> bool {
        self.users.len() == other.users.len()
            && self.users.iter().all(|user| {
                other.find(&user.name).is_some_and(|index| {
                    *other.users[index].hash == *user.hash
                        && other.unix_account(&user.name) == self.unix_account(&user.name)
                })
            })
    }

    /// The file this store reads and writes.
    pub fn path(&self) -> PathBuf {
        self.dir.join(Self::FILE_NAME)
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.users
            .iter()
            .position(|user| text::eq_ignore_case(&user.name, name))
    }
}

impl crate::Credentials for UserStore {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.find(user).map(|index| *self.users[index].hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Credentials;

    #[test]
    fn add_save_load_remove_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state").join("copyless");
        let mut store = UserStore::load(&dir).unwrap();
        assert!(store.is_empty());

        store.add("Alice", "secret").unwrap();
        store.add("bob", "Password").unwrap();
        store.save().unwrap();

        let dir_mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        let file = dir.join(UserStore::FILE_NAME);
        let file_mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(file_mode, 0o600);
        let contents = fs::read_to_string(&file).unwrap();
        assert!(contents.contains("bob:a4f49c406510bdcab6824ee7c30fd852\n"));
        // No temp file is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);

        let mut loaded = UserStore::load(&dir).unwrap();
        assert_eq!(loaded.names(), ["Alice", "bob"]);
        assert_eq!(loaded.nt_hash("ALICE"), Some(crate::nt_hash("secret")));
        assert_eq!(loaded.nt_hash("Bob"), Some(crate::nt_hash("Password")));
        assert_eq!(loaded.nt_hash("carol"), None);

        loaded.set_password("alice", "changed").unwrap();
        loaded.remove("BOB").unwrap();
        loaded.save().unwrap();

        let again = UserStore::load(&dir).unwrap();
        assert_eq!(again.names(), ["Alice"]);
        assert_eq!(again.nt_hash("alice"), Some(crate::nt_hash("changed")));
        let file_mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(file_mode, 0o600);
    }

    #[test]
    fn duplicate_and_unknown_users() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        store.add("Alice", "x").unwrap();
        assert!(matches!(store.add("aLiCe", "y"), Err(UserError::Exists(n)) if n == "aLiCe"));
        assert!(matches!(store.remove("bob"), Err(UserError::Unknown(n)) if n == "bob"));
        assert!(matches!(
            store.set_password("bob", "z"),
            Err(UserError::Unknown(_))
        ));
        assert_eq!(store.nt_hash("alice"), Some(crate::nt_hash("x")));
    }

    #[test]
    fn names_are_validated() {
        for good in [
            "a",
            "alice",
            "J\u{f6}rg",
            "user.name",
            "x-y_z",
            &"n".repeat(64),
        ] {
            assert!(validate_name(good).is_ok(), "{good:?}");
        }
        let long = "n".repeat(65);
        for bad in [
            "", &long, "a:b", "a\tb", "a\nb", "a/b", "a\\b", "a[b", "a]b", "a\"b", "a;b", "a|b",
            "a=b", "a,b", "a+b", "a*b", "a?b", "a<b", "a>b", "a@b", "#a", " a", "a ",
        ] {
            assert!(
                matches!(validate_name(bad), Err(UserError::InvalidName(_))),
                "{bad:?}"
            );
        }
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        assert!(matches!(
            store.add("a@b", "x"),
            Err(UserError::InvalidName(_))
        ));
        assert!(store.is_empty());
    }

    /// Writes a users file as an administrator might, private to us.
    fn write_private(path: &Path, contents: &str) {
        fs::write(path, contents).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        write_private(
            &tmp.path().join("users"),
            "# comment\n\nbob:A4F49C406510BDCAB6824EE7C30FD852\r\n",
        );
        let store = UserStore::load(tmp.path()).unwrap();
        assert_eq!(store.names(), ["bob"]);
        assert_eq!(store.nt_hash("bob"), Some(crate::nt_hash("Password")));
    }

    #[test]
    fn corrupt_files_name_the_line() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("users");
        for (contents, line) in [
            ("# ok\nnocolon\n", 2),
            ("bob:1234\n", 1),
            ("bob:zz4f49c406510bdcab6824ee7c30fd852\n", 1),
            ("a@b:a4f49c406510bdcab6824ee7c30fd852\n", 1),
            ("bob:a4f49c406510bdcab6824ee7c30fd852:\n", 1),
            ("#\nbob:a4f49c406510bdcab6824ee7c30fd852:b b\n", 2),
            ("bob:a4f49c406510bdcab6824ee7c30fd852:a:b\n", 1),
            ("bob:a4f49c406510bdcab6824ee7c30fd852:-x\n", 1),
            (
                "bob:a4f49c406510bdcab6824ee7c30fd852\n\nBOB:a4f49c406510bdcab6824ee7c30fd852\n",
                3,
            ),
        ] {
            write_private(&path, contents);
            match UserStore::load(tmp.path()) {
                Err(UserError::Corrupt {
                    path: p, line: l, ..
                }) => {
                    assert_eq!(p, path);
                    assert_eq!(l, line, "{contents:?}");
                }
                other => panic!("{contents:?}: {other:?}"),
            }
        }
        let err = UserStore::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("users:3:"), "{err}");
        assert!(err.contains("appears twice"), "{err}");
    }

    #[test]
    fn a_store_without_accounts_links_users_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        write_private(
            &tmp.path().join("users"),
            "bob:a4f49c406510bdcab6824ee7c30fd852\n\
             J\u{f6}rg:a4f49c406510bdcab6824ee7c30fd852\n",
        );
        let store = UserStore::load(tmp.path()).unwrap();
        assert_eq!(store.unix_account("BOB"), Some("bob"));
        assert_eq!(store.unix_account("j\u{d6}rg"), Some("J\u{f6}rg"));
        assert_eq!(store.unix_account("carol"), None);
        // Saved again, it stays as it was.
        store.save().unwrap();
        let contents = fs::read_to_string(store.path()).unwrap();
        assert!(
            contents.ends_with(
                "\nbob:a4f49c406510bdcab6824ee7c30fd852\n\
                 J\u{f6}rg:a4f49c406510bdcab6824ee7c30fd852\n"
            ),
            "{contents}"
        );
    }

    #[test]
    fn accounts_round_trip_and_can_be_relinked() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        store.add_linked("Alice", "secret", "alice").unwrap();
        store.add("bob", "Password").unwrap();
        store.add_linked("carol", "c", "carol@example.org").unwrap();
        store.save().unwrap();
        let contents = fs::read_to_string(store.path()).unwrap();
        assert!(contents.contains("\nbob:a4f49c406510bdcab6824ee7c30fd852\n"));
        assert!(contents.contains(":carol@example.org\n"), "{contents}");

        let mut loaded = UserStore::load(tmp.path()).unwrap();
        assert!(loaded.same_users(&store));
        assert_eq!(loaded.unix_account("alice"), Some("alice"));
        assert_eq!(loaded.unix_account("bob"), Some("bob"));
        assert_eq!(loaded.unix_account("carol"), Some("carol@example.org"));
        assert_eq!(loaded.nt_hash("carol"), Some(crate::nt_hash("c")));

        loaded.link("BOB", "robert").unwrap();
        assert!(!loaded.same_users(&store), "a new link is a change");
        loaded.save().unwrap();
        let again = UserStore::load(tmp.path()).unwrap();
        assert_eq!(again.unix_account("bob"), Some("robert"));
        assert_eq!(again.nt_hash("bob"), Some(crate::nt_hash("Password")));
    }

    #[test]
    fn bad_accounts_and_unknown_users_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        store.add("bob", "pw").unwrap();
        for bad in ["", "a:b", "a\nb", "a b", "-x"] {
            assert!(
                matches!(store.link("bob", bad), Err(UserError::InvalidAccount(a)) if a == bad),
                "{bad:?}"
            );
            assert!(matches!(
                store.add_linked("carol", "pw", bad),
                Err(UserError::InvalidAccount(_))
            ));
        }
        assert_eq!(store.names(), ["bob"]);
        assert_eq!(store.unix_account("bob"), Some("bob"));
        assert!(matches!(
            store.link("carol", "carol"),
            Err(UserError::Unknown(n)) if n == "carol"
        ));
        let err = UserError::InvalidAccount("a:b".into()).to_string();
        assert!(
            err.starts_with("invalid Unix account name \"a:b\""),
            "{err}"
        );
    }

    #[test]
    fn users_added_by_nt_hash_log_on_with_the_old_password() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        // As `pdbedit -L -w` shows a user whose password is "Password".
        let hash = parse_hex_hash("A4F49C406510BDCAB6824EE7C30FD852").unwrap();
        store.add_nt_hash("bob", hash, None).unwrap();
        store.add_nt_hash("Alice", hash, Some("alice")).unwrap();
        assert!(matches!(
            store.add_nt_hash("BOB", hash, None),
            Err(UserError::Exists(_))
        ));
        assert!(matches!(
            store.add_nt_hash("carol", hash, Some("a b")),
            Err(UserError::InvalidAccount(_))
        ));
        assert!(matches!(
            store.add_nt_hash("a@b", hash, None),
            Err(UserError::InvalidName(_))
        ));
        store.save().unwrap();

        let loaded = UserStore::load(tmp.path()).unwrap();
        assert_eq!(loaded.names(), ["bob", "Alice"]);
        assert_eq!(loaded.nt_hash("bob"), Some(crate::nt_hash("Password")));
        assert_eq!(loaded.unix_account("bob"), Some("bob"));
        assert_eq!(loaded.unix_account("alice"), Some("alice"));
        let contents = fs::read_to_string(loaded.path()).unwrap();
        assert!(contents.contains("\nbob:a4f49c406510bdcab6824ee7c30fd852\n"));
    }

    #[test]
    fn save_fixes_a_stale_temp_file_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let stale = tmp
            .path()
            .join(format!(".users.tmp.{}", std::process::id()));
        fs::write(&stale, "junk").unwrap();
        fs::set_permissions(&stale, fs::Permissions::from_mode(0o644)).unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        store.add("alice", "pw").unwrap();
        store.save().unwrap();
        let mode = fs::metadata(tmp.path().join("users"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!stale.exists());
    }

    #[test]
    fn a_store_others_may_access_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(tmp.path()).unwrap();
        store.add("bob", "pw").unwrap();
        store.save().unwrap();
        let path = store.path();
        for mode in [0o644, 0o640, 0o604, 0o620, 0o601, 0o4604] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            match UserStore::load(tmp.path()) {
                Err(UserError::Insecure {
                    path: p,
                    problem: Insecurity::Mode(m),
                }) => {
                    assert_eq!(p, path);
                    assert_eq!(m, mode);
                }
                other => panic!("mode {mode:o}: {other:?}"),
            }
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let err = UserStore::load(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("mode 0644"), "{err}");
        assert!(
            err.contains(&format!("`chmod 600 {}`", path.display())),
            "{err}"
        );
        for mode in [0o600, 0o400, 0o700] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(UserStore::load(tmp.path()).unwrap().names(), ["bob"]);
        }
    }

    #[test]
    fn a_store_of_another_user_is_refused() {
        let path = Path::new("/state dir/users");
        assert!(check_private(path, 0o100600, 1000, 1000).is_ok());
        assert!(check_private(path, 0o100600, 0, 1000).is_ok(), "root's");
        assert!(check_private(path, 0o100600, 0, 0).is_ok());
        let err = check_private(path, 0o100600, 1001, 1000).unwrap_err();
        assert!(
            matches!(
                err,
                UserError::Insecure {
                    problem: Insecurity::Owner {
                        owner: 1001,
                        euid: 1000
                    },
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("owned by uid 1001"), "{text}");
        assert!(text.contains("`chown 1000 '/state dir/users'`"), "{text}");
        // Root may not trust a file that an ordinary user can rewrite.
        assert!(check_private(path, 0o100600, 1000, 0).is_err());
    }

    #[test]
    fn suggested_commands_quote_their_path() {
        assert_eq!(
            shell_quote("/var/lib/copyless/users"),
            "/var/lib/copyless/users"
        );
        assert_eq!(shell_quote("/a b/users"), "'/a b/users'");
        assert_eq!(shell_quote("/it's/users"), r"'/it'\''s/users'");
        assert_eq!(shell_quote("/$HOME/users"), "'/$HOME/users'");
    }

    #[test]
    fn same_users_compares_names_as_windows_does_hashes_and_accounts() {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = UserStore::load(tmp.path()).unwrap();
        a.add_linked("Alice", "x", "alice").unwrap();
        a.add("bob", "y").unwrap();
        let mut b = UserStore::load(tmp.path()).unwrap();
        b.add_linked("BOB", "y", "bob").unwrap();
        b.add("alice", "x").unwrap();
        assert!(a.same_users(&b));
        b.set_password("bob", "z").unwrap();
        assert!(!a.same_users(&b));
        b.set_password("bob", "y").unwrap();
        b.add("carol", "c").unwrap();
        assert!(!a.same_users(&b));
        assert!(!b.same_users(&a));
        b.remove("carol").unwrap();
        assert!(a.same_users(&b));
        b.link("bob", "robert").unwrap();
        assert!(!a.same_users(&b), "another account");
    }
}
