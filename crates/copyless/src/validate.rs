//! The checks a parsed configuration passes before it is served: the one
//! validation that `serve`, `check-config` and a reload (SIGHUP) all go
//! through, so that none of them accepts what another refuses. Parsing
//! (config.rs) has refused what the file alone shows to be wrong and every
//! account or group the system does not know; this looks at the machine:
//! the share folders, the state directory and the user store.
//!
//! Errors refuse the configuration. Warnings are said and served anyway:
//! a user store may be filled after the config is written, and a share
//! nobody can write to may be meant to be fixed later.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use copyless_auth::UserStore;
use copyless_core::Principal;

use crate::config::{Config, ConfigError, ShareConfig};

/// Where a share was configured, so that what a check after parsing finds
/// names the place as a parse error does.
#[derive(Debug, Clone, Default)]
pub enum ShareSource {
    /// The built-in default share (`./share`).
    #[default]
    Builtin,
    /// `--share NAME=PATH`, as given.
    Argument(String),
    /// A `[[share]]` table: its file and the line of each key checked.
    File {
        file: PathBuf,
        lines: Vec<(&'static str, usize)>,
    },
}

/// Where a share was written is no part of its settings: a share moved
/// within the file is the same share to a reload.
impl PartialEq for ShareSource {
    fn eq(&self, _other: &ShareSource) -> bool {
        true
    }
}

impl ShareSource {
    /// An error about `key` of the share, at its line.
    pub fn error(&self, key: &str, message: String) -> ConfigError {
        match self {
            ShareSource::File { file, lines } => {
                let line = |k: &str| lines.iter().find(|(key, _)| *key == k).map(|(_, l)| *l);
                // A key not written (its default) is the table's business.
                let at = line(key)
                    .or_else(|| line("name"))
                    .or_else(|| line("path"))
                    .unwrap_or(1);
                ConfigError::in_file(file, at, message)
            }
            ShareSource::Argument(arg) => ConfigError::plain(format!("--share {arg:?}: {message}")),
            ShareSource::Builtin => ConfigError::plain(message),
        }
    }

    /// A warning about `key` of the share, placed as an error would be.
    pub fn warning(&self, key: &str, message: String) -> String {
        self.error(key, format!("warning: {message}")).to_string()
    }
}

/// Checks `config` against the machine; `users` is the user store, or why
/// it could not be read. Returns the warnings, one line each.
pub fn validate(
    config: &Config,
    users: Result<&UserStore, String>,
) -> Result<Vec<String>, ConfigError> {
    for share in &config.shares {
        check_folder(share, &config.state_dir)?;
    }
    if let Some(homes) = &config.homes {
        check_homes(homes, &config.state_dir)?;
    }
    let mut warnings = Vec::new();
    for share in &config.shares {
        warnings.extend(contradictions(config, share));
    }
    match users {
        Ok(store) => {
            for share in &config.shares {
                warnings.extend(unknown_users(share, store));
                warnings.extend(crate::writable::nobody_can_write(config, share, store));
            }
        }
        Err(why) => warnings.push(format!(
            "warning: the user store in {} cannot be read ({why}): the users the shares \
             name, and whether they can write to them, are not checked",
            config.state_dir.display()
        )),
    }
    Ok(warnings)
}

/// A share's path must be an existing folder, not a system folder, and
/// neither in nor around the state directory.
fn check_folder(share: &ShareConfig, state_dir: &Path) -> Result<(), ConfigError> {
    match folder_problem(&share.path, &share.name, state_dir) {
        None => Ok(()),
        Some(what) => Err(share.source.error(
            "path",
            format!(
                "share {:?}: path {} {what}",
                share.name,
                share.path.display()
            ),
        )),
    }
}

/// The folder home folders are made in (the path of `[homes]` up to the
/// part with `%U`) must pass as a share's folder would.
fn check_homes(homes: &ShareConfig, state_dir: &Path) -> Result<(), ConfigError> {
    let base: std::path::PathBuf = homes
        .path
        .components()
        .take_while(|c| {
            !c.as_os_str()
                .to_string_lossy()
                .contains(crate::config::HOME_USER)
        })
        .collect();
    match folder_problem(&base, "homes", state_dir) {
        None => Ok(()),
        Some(what) => Err(homes.source.error(
            "path",
            format!(
                "[homes]: {} (where home folders are made) {what}",
                base.display()
            ),
        )),
    }
}

/// What is wrong with `path` as the folder of share `name`, if anything
/// (said after the path).
pub fn folder_problem(path: &Path, name: &str, state_dir: &Path) -> Option<String> {
    let real = match fs::canonicalize(path) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Some(
                "does not exist: create the folder (and give it to the users who are to \
                 write there), or correct the path"
                    .to_string(),
            )
        }
        Err(e) => return Some(format!("cannot be resolved: {e}")),
    };
    let resolved = if real == path {
        String::new()
    } else {
        format!("(which resolves to {}) ", real.display())
    };
    match fs::metadata(&real) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Some(format!("{resolved}is not a folder")),
        Err(e) => return Some(format!("{resolved}cannot be read: {e}")),
    }
    if let Some(why) = system_folder(&real) {
        return Some(format!(
            "{resolved}is {why}: clients would reach the machine's own files; share a \
             folder made for it, such as /srv/{}",
            name.to_lowercase()
        ));
    }
    // The state directory holds every user's password hash.
    let state = fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    if real.starts_with(&state) {
        return Some(format!(
            "{resolved}lies in the state directory {}, which holds the user store: share \
             a folder outside it",
            state.display()
        ));
    }
    if state.starts_with(&real) {
        return Some(format!(
            "{resolved}holds the state directory {}, and so the user store with every \
             user's password hash: share a folder beside it, or move state_dir out of it",
            state.display()
        ));
    }
    None
}

/// Trees no share may be or lie in: the kernel's views (/proc, /sys,
/// /dev), what boots and configures the machine (/boot, /etc), root's
/// home, and the programs and libraries installed.
const SYSTEM_TREES: [&str; 13] = [
    "/proc", "/sys", "/dev", "/boot", "/etc", "/root", "/usr", "/bin", "/sbin", "/lib", "/lib32",
    "/lib64", "/libx32",
];
/// Folders that hold system trees: no share may be one of them, though
/// one may lie below (/var/lib/NAME, /run/media/USER/DISK).
const SYSTEM_FOLDERS: [&str; 4] = ["/", "/var", "/var/lib", "/run"];
/// A tmpfs for everyone, an ordinary place for a share, inside /dev.
const SHARED_MEMORY: &str = "/dev/shm";

/// What makes `real` (a resolved path) a system folder, if it is one.
fn system_folder(real: &Path) -> Option<String> {
    if real == Path::new("/") {
        return Some("the root of the whole file system".to_string());
    }
    if let Some(folder) = SYSTEM_FOLDERS.iter().find(|f| real == Path::new(f)) {
        return Some(format!("the system folder {folder}"));
    }
    if real.starts_with(SHARED_MEMORY) {
        return None;
    }
    SYSTEM_TREES
        .iter()
        .find(|tree| real.starts_with(tree))
        .map(|tree| {
            if real == Path::new(tree) {
                format!("the system folder {tree}")
            } else {
                format!("inside the system folder {tree}")
            }
        })
}

/// Settings that cancel each other out.
fn contradictions(config: &Config, share: &ShareConfig) -> Vec<String> {
    let mut said = Vec::new();
    let name = &share.name;
    if share.access.guest_ok && !config.guest {
        said.push(share.source.warning(
            "guest_ok",
            format!(
                "share {name:?} says guest_ok, but guests are off ([security] guest = false): \
                 no guest can use it; set guest = true in [security], or drop guest_ok"
            ),
        ));
    }
    if share.access.valid_users.as_ref().is_some_and(Vec::is_empty) {
        said.push(share.source.warning(
            "valid_users",
            format!("share {name:?}: valid_users is empty, so nobody may connect to it"),
        ));
    }
    // Each list counts on one kind of share only (as in Samba).
    if !share.read_only && !share.access.write_users.is_empty() {
        said.push(share.source.warning(
            "write_users",
            format!(
                "share {name:?}: write_users counts only on a read_only share; everyone \
                 allowed may write to this one already"
            ),
        ));
    }
    if share.read_only && !share.access.read_only_users.is_empty() {
        said.push(share.source.warning(
            "read_only_users",
            format!(
                "share {name:?}: read_only_users counts only on a writable share; only \
                 write_users may write to this one"
            ),
        ));
    }
    said
}

/// Users a share's lists name that the user store does not hold: they
/// cannot log in until added.
fn unknown_users(share: &ShareConfig, store: &UserStore) -> Vec<String> {
    let names = store.names();
    let known = |user: &str| names.iter().any(|n| n.eq_ignore_ascii_case(user));
    let a = &share.access;
    let lists = [
        ("valid_users", a.valid_users.as_deref().unwrap_or_default()),
        ("read_only_users", &a.read_only_users),
        ("write_users", &a.write_users),
    ];
    let mut said = Vec::new();
    for (key, list) in lists {
        for entry in list {
            if let Principal::User(user) = entry {
                if !known(user) {
                    said.push(share.source.warning(
                        key,
                        format!(
                            "share {:?}: {key} names {user:?}, who is not in the user store \
                             {} (add them with `copyless user add {user}`)",
                            share.name,
                            store.path().display()
                        ),
                    ));
                }
            }
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_folders() {
        let is = |p: &str| system_folder(Path::new(p));
        assert_eq!(is("/").unwrap(), "the root of the whole file system");
        assert_eq!(is("/etc").unwrap(), "the system folder /etc");
        assert_eq!(is("/etc/x").unwrap(), "inside the system folder /etc");
        assert_eq!(is("/var").unwrap(), "the system folder /var");
        assert!(is("/proc/1").is_some() && is("/sys/fs").is_some() && is("/dev").is_some());
        assert!(is("/usr/share").is_some() && is("/root/data").is_some());
        for fine in [
            "/srv/copyless",
            "/var/lib/nas",
            "/run/media/alice/disk",
            "/home",
            "/dev/shm/test",
            "/mnt/disk",
            "/etcetera",
        ] {
            assert_eq!(is(fine), None, "{fine}");
        }
    }

    #[test]
    fn home_folders_are_made_in_a_folder_that_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let state = elsewhere.path().join("state");
        let config = |homes: &str| {
            let text = format!(
                "state_dir = \"{}\"\n[homes]\npath = \"{homes}\"\n",
                state.display()
            );
            crate::config::Config::from_text(&text, Path::new("/etc/copyless.toml")).unwrap()
        };
        let fine = config(&format!("{}/%U", dir.path().display()));
        assert!(validate(&fine, Err(String::new())).is_ok());
        let missing = config(&format!("{}/missing/%U/files", dir.path().display()));
        let e = validate(&missing, Err(String::new()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/etc/copyless.toml:3: [homes]") && e.contains("does not exist"),
            "{e}"
        );
    }

    #[test]
    fn places_name_the_key_line() {
        let source = ShareSource::File {
            file: PathBuf::from("/etc/c.toml"),
            lines: vec![("name", 7), ("path", 8)],
        };
        assert_eq!(
            source.error("path", "bad".into()).to_string(),
            "/etc/c.toml:8: bad"
        );
        // A key the table does not hold: the table's line.
        assert_eq!(
            source.warning("guest_ok", "odd".into()),
            "/etc/c.toml:7: warning: odd"
        );
        assert_eq!(
            ShareSource::Argument("a=/".into())
                .error("path", "bad".into())
                .to_string(),
            "--share \"a=/\": bad"
        );
    }
}
