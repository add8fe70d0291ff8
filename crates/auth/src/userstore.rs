//! The user store: one file, `<state_dir>/users`, of `name:NT-hash` lines.
//!
//! The NT hash is password-equivalent for NTLM, so the file is private to
//! its owner (0600 in a 0700 directory) and hashes are zeroed when dropped.

use std::fmt;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::text;

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
}

#[derive(Debug)]
pub enum UserError {
    Exists(String),
    Unknown(String),
    InvalidName(String),
    Io(std::io::Error),
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
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
            UserError::Io(err) => write!(f, "user store: {err}"),
            UserError::Corrupt {
                path,
                line,
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
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

fn parse_hex_hash(hex: &str) -> Option<[u8; 16]> {
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

    /// Reads <state_dir>/users; a missing file is an empty store.
    pub fn load(state_dir: &Path) -> Result<UserStore, UserError> {
        let mut store = UserStore {
            dir: state_dir.to_path_buf(),
            users: Vec::new(),
        };
        let path = store.path();
        let contents = match fs::read_to_string(&path) {
            Ok(contents) => Zeroizing::new(contents),
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(store),
            Err(err) => return Err(UserError::Io(err)),
        };
        for (index, line) in contents.lines().enumerate() {
            let corrupt = |message: String| UserError::Corrupt {
                path: path.clone(),
                line: index + 1,
                message,
            };
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, hex) = line
                .split_once(':')
                .ok_or_else(|| corrupt("expected name:NT-hash".to_string()))?;
            validate_name(name).map_err(|err| corrupt(err.to_string()))?;
            let hash = parse_hex_hash(hex.trim_end())
                .ok_or_else(|| corrupt(format!("the hash of {name:?} is not 32 hex digits")))?;
            if store.find(name).is_some() {
                return Err(corrupt(format!("user {name:?} appears twice")));
            }
            store.users.push(User {
                name: name.to_string(),
                hash: Zeroizing::new(hash),
            });
        }
        Ok(store)
    }

    /// Writes atomically (temp file + rename) with mode 0600, creating state_dir with mode 0700 if missing.
    pub fn save(&self) -> Result<(), UserError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let mut contents = Zeroizing::new(String::from(
            "# copyless users: name:NT hash (MD4 of the UTF-16LE password).\n\
             # The hash is as good as the password: keep this file private.\n",
        ));
        for user in &self.users {
            contents.push_str(&user.name);
            contents.push(':');
            for byte in user.hash.iter() {
                contents.push_str(&format!("{byte:02x}"));
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

    pub fn add(&mut self, name: &str, password: &str) -> Result<(), UserError> {
        validate_name(name)?;
        if self.find(name).is_some() {
            return Err(UserError::Exists(name.to_string()));
        }
        self.users.push(User {
            name: name.to_string(),
            hash: Zeroizing::new(crate::nt_hash(password)),
        });
        Ok(())
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

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(
            tmp.path().join("users"),
            "# comment\n\nbob:A4F49C406510BDCAB6824EE7C30FD852\r\n",
        )
        .unwrap();
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
            (
                "bob:a4f49c406510bdcab6824ee7c30fd852\n\nBOB:a4f49c406510bdcab6824ee7c30fd852\n",
                3,
            ),
        ] {
            fs::write(&path, contents).unwrap();
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
}
