//! Unix accounts, as the system's passwd and group databases (NSS) know
//! them: what a copyless user acts as on disk.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::unistd::{getgrouplist, Gid, Group, Uid, User};

/// A Unix account and the groups it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnixAccount {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// every group the account is in (primary first, no duplicates), from
    /// the system group database
    pub groups: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnixError {
    /// The passwd database has no account of this name.
    NotFound(String),
    /// The passwd or group database could not answer for this account.
    Lookup { account: String, errno: i32 },
    /// Not a name to give a new account (see [`creatable_name`]).
    InvalidName(String),
    /// Only root may create accounts.
    NotRoot(String),
    /// Neither useradd nor adduser is installed.
    NoTool(String),
    /// The tool ran and failed: its command line and what it said.
    Create { command: String, message: String },
}

impl fmt::Display for UnixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnixError::NotFound(account) => write!(f, "no Unix account {account:?}"),
            UnixError::Lookup { account, errno } => write!(
                f,
                "cannot look up Unix account {account:?}: {}",
                io::Error::from_raw_os_error(*errno)
            ),
            UnixError::InvalidName(name) => write!(
                f,
                "cannot create a Unix account named {name:?}: use 1 to 32 lowercase letters, \
                 digits, '_', '.' or '-', starting with a letter or '_'"
            ),
            UnixError::NotRoot(name) => {
                write!(f, "creating Unix account {name:?} needs root")
            }
            UnixError::NoTool(name) => write!(
                f,
                "cannot create Unix account {name:?}: neither useradd nor adduser is installed"
            ),
            UnixError::Create { command, message } => write!(f, "`{command}` failed: {message}"),
        }
    }
}

impl std::error::Error for UnixError {}

/// The account named `account`, with its groups.
pub fn lookup(account: &str) -> Result<UnixAccount, UnixError> {
    let failed = |errno: Errno| UnixError::Lookup {
        account: account.to_string(),
        errno: errno as i32,
    };
    let not_found = || UnixError::NotFound(account.to_string());
    let user = match User::from_name(account) {
        Ok(Some(user)) => user,
        // getpwnam_r(3): some databases say "not found" with one of these.
        Ok(None) | Err(Errno::ENOENT | Errno::ESRCH | Errno::EBADF | Errno::EPERM) => {
            return Err(not_found())
        }
        Err(errno) => return Err(failed(errno)),
    };
    // The name as the database spells it: group member lists use that one.
    let name = CString::new(user.name.as_str()).map_err(|_| not_found())?;
    let listed = getgrouplist(&name, user.gid).map_err(failed)?;
    let mut groups = vec![user.gid.as_raw()];
    for gid in listed.into_iter().map(Gid::as_raw) {
        if !groups.contains(&gid) {
            groups.push(gid);
        }
    }
    Ok(UnixAccount {
        name: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        groups,
    })
}

/// The name of the account with this uid, if the passwd database has one.
pub fn account_name(uid: u32) -> Option<String> {
    User::from_uid(Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|user| user.name)
}

pub fn group_name(gid: u32) -> Option<String> {
    Group::from_gid(Gid::from_raw(gid))
        .ok()
        .flatten()
        .map(|group| group.name)
}

pub fn group_id(name: &str) -> Option<u32> {
    Group::from_name(name)
        .ok()
        .flatten()
        .map(|group| group.gid.as_raw())
}

/// Whether `name` may stand in the user store as the account a user is
/// linked to. Wider than [`creatable_name`], since a directory service may
/// hold names such as `alice@example.org`; narrow enough for the store's
/// format and for the passwd and group files' (no ':', ',' or whitespace,
/// and no leading '+' or '-', which mean NIS entries there).
pub fn valid_account_name(name: &str) -> bool {
    (1..=256).contains(&name.len())
        && !name.starts_with(['+', '-'])
        && !name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == ':' || c == ',')
}

/// Whether a new account may take this name: 1 to 32 characters of
/// `[a-z_][a-z0-9_.-]*`, with an optional final `$` (as for Samba's machine
/// accounts), the portable names useradd accepts by default. Checked here
/// so that the error names the rule instead of quoting the tool.
pub fn creatable_name(name: &str) -> bool {
    let stem = name.strip_suffix('$').unwrap_or(name);
    let mut chars = stem.chars();
    name.len() <= 32
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c))
}

/// Creates a system account `name` without a home or a login shell, and
/// its group of the same name. An account that appears meanwhile (made by
/// someone else) counts as created.
pub fn create_system_account(name: &str) -> Result<(), UnixError> {
    if !creatable_name(name) {
        return Err(UnixError::InvalidName(name.to_string()));
    }
    if !rustix::process::geteuid().is_root() {
        return Err(UnixError::NotRoot(name.to_string()));
    }
    const TOOLS: [(&str, &[&str]); 2] = [
        (
            "useradd",
            &[
                "--system",
                "--no-create-home",
                "--user-group",
                "--shell",
                "/usr/sbin/nologin",
            ],
        ),
        ("adduser", &["--system", "--group", "--no-create-home"]),
    ];
    for (tool, args) in TOOLS {
        // The second for a PATH without the sbin directories (`su` without `-`).
        for program in [tool.to_string(), format!("/usr/sbin/{tool}")] {
            let command = format!("{program} {} {name}", args.join(" "));
            let output = match Command::new(&program)
                .args(args)
                .arg(name)
                .stdin(Stdio::null())
                .output()
            {
                Ok(output) => output,
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => {
                    return Err(UnixError::Create {
                        command,
                        message: err.to_string(),
                    })
                }
            };
            if output.status.success() || lookup(name).is_ok() {
                return Ok(());
            }
            let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
            return Err(UnixError::Create {
                command,
                message: if said.is_empty() {
                    output.status.to_string()
                } else {
                    said
                },
            });
        }
    }
    Err(UnixError::NoTool(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `id -G` says of `account`, the reference for the group list.
    fn id_groups(account: &str) -> Vec<u32> {
        let out = Command::new("id").args(["-G", account]).output().unwrap();
        assert!(out.status.success(), "id -G {account}");
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(|gid| gid.parse().unwrap())
            .collect()
    }

    #[test]
    fn accounts_are_found_with_their_groups() {
        let me = account_name(rustix::process::geteuid().as_raw()).unwrap();
        for name in ["root", me.as_str()] {
            let account = lookup(name).unwrap();
            assert_eq!(account.name, name);
            assert_eq!(account_name(account.uid).as_deref(), Some(name));
            assert_eq!(account.groups[0], account.gid, "primary first");
            let mut sorted = account.groups.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), account.groups.len(), "no duplicates");
            let mut expected = id_groups(name);
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(sorted, expected, "{name}");
        }
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
    }

    #[test]
    fn missing_accounts_are_not_found() {
        for name in ["copyless-no-such-account", "a\0b", "a:b", ""] {
            assert_eq!(lookup(name), Err(UnixError::NotFound(name.to_string())));
        }
        let err = lookup("copyless-no-such-account").unwrap_err().to_string();
        assert_eq!(err, "no Unix account \"copyless-no-such-account\"");
    }

    #[test]
    fn groups_by_id_and_name() {
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("copyless-no-such-group"), None);
        assert_eq!(account_name(0).as_deref(), Some("root"));
    }

    #[test]
    fn account_names() {
        for good in ["alice", "_svc", "a.b-c_d", "host$", &"n".repeat(32)] {
            assert!(creatable_name(good), "{good:?}");
            assert!(valid_account_name(good), "{good:?}");
        }
        for wide in ["Alice", "alice@example.org", "1abc", "Debian-exim"] {
            assert!(!creatable_name(wide), "{wide:?}");
            assert!(valid_account_name(wide), "{wide:?}");
        }
        let long = "n".repeat(33);
        for bad in ["", "a:b", "a b", "a\nb", "a,b", "-a", "+a", "a\tb"] {
            assert!(!creatable_name(bad), "{bad:?}");
            assert!(!valid_account_name(bad), "{bad:?}");
        }
        for bad in [long.as_str(), "a$b", "$", "a/b"] {
            assert!(!creatable_name(bad), "{bad:?}");
        }
        assert!(!valid_account_name(&"n".repeat(257)));
    }

    #[test]
    fn bad_names_are_refused_before_anything_runs() {
        assert_eq!(
            create_system_account("Bad Name"),
            Err(UnixError::InvalidName("Bad Name".to_string()))
        );
    }
}
