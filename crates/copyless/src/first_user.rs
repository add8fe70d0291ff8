//! The user made on a first start, so that `copyless serve` alone gives a
//! server one can log in to; and the warning when a store holds nobody.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use copyless_auth::unix::{self, UnixError};
use copyless_auth::UserStore;
use zeroize::Zeroizing;

pub const USER: &str = "copyless";
/// Where the first password goes when there is no terminal to show it on.
pub const PASSWORD_FILE: &str = "initial-password";

/// On a first start (no users file at all, not merely an empty one),
/// creates user `copyless` with a random password, linked to the Unix
/// account that `account` names (None: the one named `copyless`; the
/// server passes [`first_account`]), and returns what to tell the operator:
/// the password itself when `on_terminal`, else where it was written, since
/// a log is no place for it.
pub fn create_on_first_start(
    state_dir: &Path,
    on_terminal: bool,
    account: impl FnOnce() -> Result<Option<String>, String>,
) -> Result<Option<String>, String> {
    let users = state_dir.join(UserStore::FILE_NAME);
    match fs::symlink_metadata(&users) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // Whatever is there (or unreadable), loading it will tell.
        _ => return Ok(None),
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|e| format!("cannot create state directory {}: {e}", state_dir.display()))?;
    let account = account()?;
    let password = random_password()?;
    let password_file = if on_terminal {
        None
    } else {
        Some(write_password_file(state_dir, &password)?)
    };
    let created = UserStore::load(state_dir).and_then(|mut store| {
        match &account {
            Some(account) if account != USER => store.add_linked(USER, &password, account)?,
            _ => store.add(USER, &password)?,
        }
        store.save()
    });
    if let Err(e) = created {
        if let Some(path) = &password_file {
            let _ = fs::remove_file(path);
        }
        return Err(e.to_string());
    }
    Ok(Some(match password_file {
        None => format!(
            "created user {USER} with password {}\n\
             (change it with: copyless user passwd {USER})",
            *password
        ),
        Some(path) => format!(
            "created user {USER}; its password is in {}; delete that file once noted",
            path.display()
        ),
    }))
}

/// The Unix account user `copyless` acts as when made on a first start:
/// as root, the system account `copyless` (created when missing), since
/// root's own would give every client root's powers; otherwise the account
/// the server runs as, the only one whose files it can reach anyway. None
/// when that account has no name, so the user is linked to the account of
/// its own name and the server says at start that it is missing.
pub fn first_account() -> Result<Option<String>, String> {
    let euid = rustix::process::geteuid();
    if !euid.is_root() {
        return Ok(unix::account_name(euid.as_raw()));
    }
    match unix::lookup(USER) {
        Ok(_) => {}
        Err(UnixError::NotFound(_)) => {
            unix::create_system_account(USER)
                .map_err(|e| format!("cannot make a Unix account for user {USER}: {e}"))?;
            eprintln!("copyless: created the system account {USER} for user {USER}");
        }
        Err(e) => return Err(e.to_string()),
    }
    Ok(Some(USER.to_string()))
}

/// Writes the password to a new file only we may read; an existing one
/// (from an earlier first start) is left alone and reported.
fn write_password_file(state_dir: &Path, password: &str) -> Result<PathBuf, String> {
    let path = state_dir.join(PASSWORD_FILE);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut file| {
            file.write_all(password.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()
        });
    match written {
        Ok(()) => Ok(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(format!(
            "{} is there from an earlier first start, but the user store {} is not; \
             remove {} and start again to create user {USER} anew",
            path.display(),
            state_dir.join(UserStore::FILE_NAME).display(),
            path.display()
        )),
        Err(e) => {
            let _ = fs::remove_file(&path);
            Err(format!("cannot write {}: {e}", path.display()))
        }
    }
}

/// What to say when the store exists but holds nobody.
pub fn nobody_can_log_in(state_dir: &Path) -> String {
    format!(
        "warning: the user store {} holds no users, so nobody can log in; \
         add one with `copyless user add NAME --state-dir {}` (no restart needed)",
        state_dir.join(UserStore::FILE_NAME).display(),
        state_dir.display()
    )
}

fn random_password() -> Result<Zeroizing<String>, String> {
    const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut bytes = Zeroizing::new([0u8; 20]);
    getrandom::fill(bytes.as_mut()).map_err(|e| format!("random: {e}"))?;
    Ok(Zeroizing::new(
        bytes
            .iter()
            .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_auth::Credentials;
    use std::os::unix::fs::PermissionsExt;

    fn no_account() -> Result<Option<String>, String> {
        Ok(None)
    }

    fn state() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        (tmp, dir)
    }

    #[test]
    fn without_a_terminal_the_password_goes_to_a_private_file() {
        let (_tmp, dir) = state();
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        let file = dir.join(PASSWORD_FILE);
        assert_eq!(
            said,
            format!(
                "created user copyless; its password is in {}; delete that file once noted",
                file.display()
            )
        );
        let mode = fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let password = fs::read_to_string(&file).unwrap();
        let password = password.trim_end_matches('\n');
        assert_eq!(password.len(), 20);
        let store = UserStore::load(&dir).unwrap();
        assert_eq!(store.names(), ["copyless"]);
        assert_eq!(
            store.nt_hash("copyless"),
            Some(copyless_auth::nt_hash(password))
        );
        // Not a first start any more: nothing is made or said.
        assert_eq!(
            create_on_first_start(&dir, false, no_account).unwrap(),
            None
        );
        assert_eq!(fs::read_to_string(&file).unwrap().trim_end(), password);
    }

    #[test]
    fn on_a_terminal_the_password_is_shown() {
        let (_tmp, dir) = state();
        let said = create_on_first_start(&dir, true, no_account)
            .unwrap()
            .unwrap();
        let password = said
            .strip_prefix("created user copyless with password ")
            .and_then(|rest| rest.split('\n').next())
            .unwrap();
        let store = UserStore::load(&dir).unwrap();
        assert_eq!(
            store.nt_hash("copyless"),
            Some(copyless_auth::nt_hash(password))
        );
        assert!(!dir.join(PASSWORD_FILE).exists());
        let mode = fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn the_user_is_linked_to_the_account_given() {
        let (_tmp, dir) = state();
        create_on_first_start(&dir, true, || Ok(Some("root".to_string()))).unwrap();
        let store = UserStore::load(&dir).unwrap();
        assert_eq!(store.unix_account(USER), Some("root"));

        let (_tmp, dir) = state();
        create_on_first_start(&dir, true, no_account).unwrap();
        let store = UserStore::load(&dir).unwrap();
        assert_eq!(store.unix_account(USER), Some(USER));

        // No account, no user, no password file: the next start tries again.
        let (_tmp, dir) = state();
        let err = create_on_first_start(&dir, false, || Err("no useradd".to_string()));
        assert_eq!(err, Err("no useradd".to_string()));
        assert!(!dir.join(UserStore::FILE_NAME).exists());
        assert!(!dir.join(PASSWORD_FILE).exists());
    }

    #[test]
    fn an_empty_store_gets_nobody() {
        let (_tmp, dir) = state();
        let mut store = UserStore::load(&dir).unwrap();
        store.add("bob", "pw").unwrap();
        store.save().unwrap();
        store.remove("bob").unwrap();
        store.save().unwrap();
        assert_eq!(
            create_on_first_start(&dir, false, no_account).unwrap(),
            None
        );
        assert!(UserStore::load(&dir).unwrap().is_empty());
        assert!(!dir.join(PASSWORD_FILE).exists());
        let warning = nobody_can_log_in(&dir);
        assert!(warning.contains("nobody can log in"), "{warning}");
        assert!(
            warning.contains(&format!(
                "copyless user add NAME --state-dir {}",
                dir.display()
            )),
            "{warning}"
        );
    }

    #[test]
    fn a_stale_password_file_is_not_overwritten() {
        let (_tmp, dir) = state();
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(PASSWORD_FILE);
        fs::write(&file, "old\n").unwrap();
        let err = create_on_first_start(&dir, false, no_account).unwrap_err();
        assert!(err.contains(&format!("remove {}", file.display())), "{err}");
        assert_eq!(fs::read_to_string(&file).unwrap(), "old\n");
        assert!(!dir.join(UserStore::FILE_NAME).exists());
    }
}
