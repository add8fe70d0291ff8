//! The user made on a first start, so that `copyless serve` alone gives a
//! server one can log in to; and the warning when a store holds nobody.
//!
//! A first start makes two files: the user store and, without a terminal
//! to show the password on, the file that holds it. A kill at any point
//! leaves either no store (the next start is a first start again) or the
//! store with its password file: the password goes to a temporary file,
//! synced, then the store is saved (itself by rename), and only then does
//! the password file take its name. A start that finds the store and the
//! temporary file finishes the rename.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use copyless_auth::unix::{self, UnixError};
use copyless_auth::{Credentials, UserStore};
use zeroize::Zeroizing;

pub const USER: &str = "copyless";
/// Where the first password goes when there is no terminal to show it on.
pub const PASSWORD_FILE: &str = "initial-password";
/// The password file until the store holding its user is saved.
const PENDING_PASSWORD_FILE: &str = "initial-password.new";
/// Longer is no password this file was written with.
const MAX_PASSWORD: usize = 256;

/// On a first start (no users file at all, not merely an empty one),
/// creates user `copyless` with a random password, linked to the Unix
/// account that `account` names (None: the one named `copyless`; the
/// server passes [`first_account`]), and returns what to tell the operator:
/// the password itself when `on_terminal`, else where it was written, since
/// a log is no place for it. When the store exists, finishes what an
/// interrupted first start left (and says so).
pub fn create_on_first_start(
    state_dir: &Path,
    on_terminal: bool,
    account: impl FnOnce() -> Result<Option<String>, String>,
) -> Result<Option<String>, String> {
    let users = state_dir.join(UserStore::FILE_NAME);
    match fs::symlink_metadata(&users) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // Whatever is there (or unreadable), loading it will tell.
        _ => return Ok(finish_interrupted(state_dir)),
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .map_err(|e| format!("cannot create state directory {}: {e}", state_dir.display()))?;
    let account = account()?;
    let mut said = Vec::new();
    let leftover = leftover_password(state_dir, &mut said);
    let kept = leftover.is_some();
    let password = match leftover {
        Some(password) => password,
        None => random_password()?,
    };
    let pending = if on_terminal || kept {
        None
    } else {
        Some(write_pending_password(state_dir, &password)?)
    };
    let created = UserStore::load(state_dir).and_then(|mut store| {
        match &account {
            Some(account) if account != USER => store.add_linked(USER, &password, account)?,
            _ => store.add(USER, &password)?,
        }
        store.save()
    });
    if let Err(e) = created {
        if let Some(path) = &pending {
            let _ = fs::remove_file(path);
        }
        return Err(e.to_string());
    }
    let file = state_dir.join(PASSWORD_FILE);
    if let Some(pending) = &pending {
        settle(pending, &file, state_dir)?;
    }
    said.push(if kept {
        format!(
            "created user {USER} with the password in {}, which an interrupted first start \
             left without a user store; delete that file once noted",
            file.display()
        )
    } else if on_terminal {
        format!(
            "created user {USER} with password {}\n\
             (change it with: copyless user passwd {USER})",
            *password
        )
    } else {
        format!(
            "created user {USER}; its password is in {}; delete that file once noted",
            file.display()
        )
    });
    Ok(Some(said.join("\n")))
}

/// The password in an `initial-password` found before there is a store:
/// left by a first start that was killed before it saved the store (as
/// versions before this one could be). Its password may have been noted
/// already, so the user is made with it, if the file is private and holds
/// one; otherwise the file goes, and `said` says why.
fn leftover_password(state_dir: &Path, said: &mut Vec<String>) -> Option<Zeroizing<String>> {
    let path = state_dir.join(PASSWORD_FILE);
    let meta = fs::symlink_metadata(&path).ok()?;
    let own = rustix::process::geteuid().as_raw();
    let password = if !meta.is_file() {
        Err("it is not a regular file".to_string())
    } else if meta.uid() != own || meta.mode() & 0o077 != 0 {
        Err("others may have read it".to_string())
    } else {
        fs::read_to_string(&path)
            .map(Zeroizing::new)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                let line = Zeroizing::new(text.trim_end_matches('\n').to_string());
                let usable =
                    (1..=MAX_PASSWORD).contains(&line.len()) && !line.chars().any(char::is_control);
                usable
                    .then_some(line)
                    .ok_or_else(|| "it holds no password".to_string())
            })
    };
    match password {
        Ok(password) => Some(password),
        Err(why) => {
            let removed = match fs::remove_file(&path) {
                Ok(()) => "removed".to_string(),
                Err(e) => format!("could not remove ({e})"),
            };
            said.push(format!(
                "{removed} {}, left by an interrupted first start: {why}; a new password \
                 follows",
                path.display()
            ));
            None
        }
    }
}

/// A store exists: a pending password file is from a first start killed
/// after it saved the store. If the store's user has that password, the
/// file takes its name; otherwise (a start that did not get as far, then
/// users added by hand) it is stale and goes.
fn finish_interrupted(state_dir: &Path) -> Option<String> {
    let pending = state_dir.join(PENDING_PASSWORD_FILE);
    let password = Zeroizing::new(fs::read_to_string(&pending).ok()?);
    let password = password.trim_end_matches('\n');
    let file = state_dir.join(PASSWORD_FILE);
    let matches = UserStore::load(state_dir)
        .ok()
        .and_then(|store| store.nt_hash(USER))
        .is_some_and(|hash| hash == copyless_auth::nt_hash(password));
    if matches && !file.exists() {
        return Some(match settle(&pending, &file, state_dir) {
            Ok(()) => format!(
                "a first start was interrupted after it made user {USER}: its password is \
                 now in {}; delete that file once noted",
                file.display()
            ),
            Err(e) => e,
        });
    }
    let _ = fs::remove_file(&pending);
    Some(format!(
        "removed {}, left by an interrupted first start: it is not the password of the \
         user store's {USER}",
        pending.display()
    ))
}

/// Gives the pending password file its name, durably.
fn settle(pending: &Path, file: &Path, state_dir: &Path) -> Result<(), String> {
    fs::rename(pending, file)
        .and_then(|()| fs::File::open(state_dir)?.sync_all())
        .map_err(|e| {
            format!(
                "cannot rename {} to {}: {e}",
                pending.display(),
                file.display()
            )
        })
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

/// Writes the password to the pending file, which only we may read, and
/// syncs it; one left by an earlier attempt is replaced.
fn write_pending_password(state_dir: &Path, password: &str) -> Result<PathBuf, String> {
    let path = state_dir.join(PENDING_PASSWORD_FILE);
    let written = match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        // A new file (O_EXCL): never one a link points to.
        _ => OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut file| {
                file.write_all(password.as_bytes())?;
                file.write_all(b"\n")?;
                file.sync_all()
            }),
    };
    written.map(|()| path.clone()).map_err(|e| {
        let _ = fs::remove_file(&path);
        format!("cannot write {}: {e}", path.display())
    })
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

    fn private_file(path: &Path, text: &str) {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn store_with(dir: &Path, password: &str) {
        let mut store = UserStore::load(dir).unwrap();
        store.add(USER, password).unwrap();
        store.save().unwrap();
    }

    fn password_of_store(dir: &Path) -> Option<[u8; 16]> {
        UserStore::load(dir).unwrap().nt_hash(USER)
    }

    #[test]
    fn a_leftover_password_file_without_a_store_gives_the_user_its_password() {
        // As a first start of an older version, killed between the two
        // files, left it: its password may have been noted.
        let (_tmp, dir) = state();
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(PASSWORD_FILE);
        private_file(&file, "noted-Passw0rd\n");
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        assert!(
            said.contains(&format!("with the password in {}", file.display())),
            "{said}"
        );
        assert_eq!(
            password_of_store(&dir),
            Some(copyless_auth::nt_hash("noted-Passw0rd"))
        );
        assert_eq!(fs::read_to_string(&file).unwrap(), "noted-Passw0rd\n");
    }

    #[test]
    fn a_leftover_password_file_others_may_read_is_replaced() {
        let (_tmp, dir) = state();
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join(PASSWORD_FILE);
        fs::write(&file, "seen-Passw0rd\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        assert!(said.contains("others may have read it"), "{said}");
        let password = fs::read_to_string(&file).unwrap();
        assert_ne!(password, "seen-Passw0rd\n");
        assert_eq!(
            password_of_store(&dir),
            Some(copyless_auth::nt_hash(password.trim_end()))
        );
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn killed_before_the_store_the_next_start_is_a_first_start() {
        let (_tmp, dir) = state();
        fs::create_dir_all(&dir).unwrap();
        private_file(&dir.join(PENDING_PASSWORD_FILE), "half-done\n");
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        assert!(
            said.starts_with("created user copyless; its password is in"),
            "{said}"
        );
        assert!(!dir.join(PENDING_PASSWORD_FILE).exists());
        let password = fs::read_to_string(dir.join(PASSWORD_FILE)).unwrap();
        assert_ne!(password, "half-done\n");
        assert_eq!(
            password_of_store(&dir),
            Some(copyless_auth::nt_hash(password.trim_end()))
        );
    }

    #[test]
    fn killed_after_the_store_the_next_start_completes_the_pair() {
        let (_tmp, dir) = state();
        store_with(&dir, "pair-Passw0rd");
        private_file(&dir.join(PENDING_PASSWORD_FILE), "pair-Passw0rd\n");
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        assert!(
            said.contains("interrupted after it made user copyless"),
            "{said}"
        );
        assert_eq!(
            fs::read_to_string(dir.join(PASSWORD_FILE)).unwrap(),
            "pair-Passw0rd\n"
        );
        assert!(!dir.join(PENDING_PASSWORD_FILE).exists());
        // Nothing left to do after that.
        assert_eq!(
            create_on_first_start(&dir, false, no_account).unwrap(),
            None
        );
    }

    #[test]
    fn a_pending_password_of_someone_else_goes() {
        let (_tmp, dir) = state();
        store_with(&dir, "real-Passw0rd");
        private_file(&dir.join(PENDING_PASSWORD_FILE), "stale\n");
        let said = create_on_first_start(&dir, false, no_account)
            .unwrap()
            .unwrap();
        assert!(said.starts_with("removed"), "{said}");
        assert!(!dir.join(PENDING_PASSWORD_FILE).exists());
        assert!(!dir.join(PASSWORD_FILE).exists());
        assert_eq!(
            password_of_store(&dir),
            Some(copyless_auth::nt_hash("real-Passw0rd"))
        );
    }
}
