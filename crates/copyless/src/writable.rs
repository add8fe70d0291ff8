//! Whether anyone who may write to a share can: the users the settings let
//! write (valid_users, read_only, write_users, read_only_users, guests on
//! a guest share) act on disk as their Unix accounts (force_user and
//! force_group applied), and unless one of them may add files to the
//! share's root, every upload fails with ACCESS_DENIED. The kernel answers
//! for each, through the share's VFS acting as them (so mode bits, POSIX
//! ACLs and read-only mounts all count).

use std::io;
use std::path::Path;
use std::sync::Arc;

use copyless_auth::unix;
use copyless_auth::UserStore;
use copyless_core::server::includes;
use copyless_core::ShareAccess;
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::{Identity, Kind, OpenRequest, UnixIds, Vfs};

use crate::config::{Config, ShareConfig};

/// Accounts named in the warning before "and N more".
const NAMED: usize = 3;

/// The warning for `share` when users may write to it by its settings but
/// none can to its root; None when one can, when nobody may write anyway,
/// or when the store has no user to ask about.
pub fn nobody_can_write(config: &Config, share: &ShareConfig, store: &UserStore) -> Option<String> {
    let root = std::fs::canonicalize(&share.path).ok()?;
    let act_as_users = rustix::process::geteuid().is_root();
    let writers = if act_as_users {
        writers(config, share, store)
    } else if anyone_may_write(config, share, store) {
        // Every session acts as the server's own account.
        vec![Identity::Server]
    } else {
        Vec::new()
    };
    if writers.is_empty() {
        return None;
    }
    match any_can_write(&root, &writers) {
        Ok(true) => None,
        Ok(false) => Some(share.source.warning(
            "path",
            format!(
                "share {:?}: {} may write to it, but {} cannot add files to {} ({}); {}",
                share.name,
                if act_as_users {
                    "users"
                } else {
                    "users (all acting as the server's own account)"
                },
                who(&writers),
                root.display(),
                describe(&root),
                advice(&root, &writers),
            ),
        )),
        Err(e) => Some(share.source.warning(
            "path",
            format!(
                "share {:?}: cannot tell who may write to {}: {e}",
                share.name,
                root.display()
            ),
        )),
    }
}

/// Whether the settings let any user in the store, or guests, write.
fn anyone_may_write(config: &Config, share: &ShareConfig, store: &UserStore) -> bool {
    let a = &share.access;
    let guests = config.guest && a.guest_ok && may_write(share, "", &[]);
    guests
        || store.names().iter().any(|name| {
            let groups = account_of(store, name).map_or_else(Vec::new, |ids| ids.groups);
            may_connect(a, name, &groups) && may_write(share, name, &groups)
        })
}

/// The identities of everyone the settings let write, as the core makes
/// them (core/src/conn/tree.rs: share_rights and forced), each once.
fn writers(config: &Config, share: &ShareConfig, store: &UserStore) -> Vec<Identity> {
    let a = &share.access;
    let mut found: Vec<Identity> = Vec::new();
    let mut add = |who: Identity| {
        let who = forced(a, who);
        if !found.contains(&who) {
            found.push(who);
        }
    };
    for name in store.names() {
        // A user without an account cannot log in.
        let Some(ids) = account_of(store, &name) else {
            continue;
        };
        if may_connect(a, &name, &ids.groups) && may_write(share, &name, &ids.groups) {
            add(Identity::Unix(Arc::new(ids)));
        }
    }
    if config.guest && a.guest_ok && may_write(share, "", &[]) {
        if let Ok(guest) = crate::no_root::guest_identity(&config.guest_account, config.guest) {
            add(guest);
        }
    }
    found
}

fn account_of(store: &UserStore, name: &str) -> Option<UnixIds> {
    let account = unix::lookup(store.unix_account(name)?).ok()?;
    Some(UnixIds {
        uid: account.uid,
        gid: account.gid,
        groups: account.groups,
    })
}

fn may_connect(a: &ShareAccess, name: &str, groups: &[u32]) -> bool {
    a.valid_users
        .as_ref()
        .is_none_or(|valid| includes(valid, name, groups))
}

fn may_write(share: &ShareConfig, name: &str, groups: &[u32]) -> bool {
    let a = &share.access;
    if share.read_only {
        includes(&a.write_users, name, groups)
    } else {
        !includes(&a.read_only_users, name, groups)
    }
}

fn forced(a: &ShareAccess, who: Identity) -> Identity {
    let who = a.force_user.clone().unwrap_or(who);
    match (a.force_group, &who) {
        (Some(gid), Identity::Unix(ids)) => {
            let mut groups = ids.groups.clone();
            if !groups.contains(&gid) {
                groups.push(gid);
            }
            Identity::unix(ids.uid, gid, groups)
        }
        _ => who,
    }
}

/// Whether one of `writers` may add entries to the folder `root`: the
/// share's own VFS opens the root as each and asks the kernel, as a
/// session's work would. Credentials are per thread, and the VFS leaves
/// a thread acting as whoever it last acted for, so a thread of its own
/// does this and ends with them.
fn any_can_write(root: &Path, writers: &[Identity]) -> io::Result<bool> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let vfs = PosixVfs::new(root).map_err(io::Error::other)?;
                Ok(writers.iter().any(|who| {
                    vfs.open(&OpenRequest::look(who, "", Kind::Directory))
                        .and_then(|root| vfs.unix_access(&root.handle))
                        .is_ok_and(|may| may.write && may.execute)
                }))
            })
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the checking thread panicked")))
    })
}

/// Owner, group and mode of `root`, as `ls -ld` shows them.
fn describe(root: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(root) {
        Ok(meta) => format!(
            "owner {}, group {}, mode {:o}",
            unix::account_name(meta.uid()).unwrap_or_else(|| meta.uid().to_string()),
            unix::group_name(meta.gid()).unwrap_or_else(|| meta.gid().to_string()),
            meta.mode() & 0o7777
        ),
        Err(e) => e.to_string(),
    }
}

/// Who the writers act as, by account name and uid.
fn who(writers: &[Identity]) -> String {
    let mut names: Vec<String> = Vec::new();
    for uid in writers.iter().map(uid_of) {
        let name = match unix::account_name(uid) {
            Some(name) => format!("{name} (uid {uid})"),
            None => format!("uid {uid}"),
        };
        // Users forced to other groups are still one account.
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let more = names.len().saturating_sub(NAMED);
    names.truncate(NAMED);
    let mut said = names.join(", ");
    if more > 0 {
        said.push_str(&format!(" and {more} more"));
    }
    said
}

fn uid_of(who: &Identity) -> u32 {
    match who {
        Identity::Unix(ids) => ids.uid,
        Identity::Server => rustix::process::geteuid().as_raw(),
    }
}

/// How to let the first writer in.
fn advice(root: &Path, writers: &[Identity]) -> String {
    let uid = writers
        .first()
        .map_or_else(|| rustix::process::geteuid().as_raw(), uid_of);
    let owner = unix::account_name(uid).unwrap_or_else(|| uid.to_string());
    format!(
        "give it to them (chown {owner} {0}) or let a group of theirs write \
         (chgrp GROUP {0}; chmod g+rwx {0})",
        root.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_core::Principal;

    /// Who may write to a share of `access` (read only when `read_only`),
    /// as the settings say, with bob, acting as nobody, in the store.
    fn who_may(read_only: bool, access: ShareAccess, guest: bool) -> Vec<Identity> {
        let dir = tempfile::tempdir().unwrap();
        let mut store = UserStore::load(dir.path()).unwrap();
        store.add_linked("bob", "pw", "nobody").unwrap();
        let mut config = Config::builtin();
        config.guest = guest;
        let share = ShareConfig {
            read_only,
            access,
            ..config.shares[0].clone()
        };
        writers(&config, &share, &store)
    }

    #[test]
    fn the_settings_say_who_may_write() {
        let nobody = || Identity::unix(65534, 65534, vec![65534]);
        let bob = || vec![Principal::User("bob".into())];
        assert_eq!(who_may(false, ShareAccess::default(), false), [nobody()]);
        assert!(who_may(true, ShareAccess::default(), false).is_empty());
        let writers = ShareAccess {
            write_users: bob(),
            ..ShareAccess::default()
        };
        assert_eq!(who_may(true, writers, false), [nobody()]);
        let readers = ShareAccess {
            read_only_users: bob(),
            ..ShareAccess::default()
        };
        assert!(who_may(false, readers, false).is_empty());
        let others = ShareAccess {
            valid_users: Some(vec![Principal::User("carol".into())]),
            ..ShareAccess::default()
        };
        assert!(who_may(false, others, false).is_empty());
        let forced = ShareAccess {
            force_user: Some(Identity::unix(1500, 1500, vec![1500])),
            force_group: Some(100),
            ..ShareAccess::default()
        };
        assert_eq!(
            who_may(false, forced, false),
            [Identity::unix(1500, 100, vec![1500, 100])]
        );
        // Guests, on a guest share with guests on, as the guest account.
        let guests = ShareAccess {
            guest_ok: true,
            valid_users: Some(Vec::new()),
            ..ShareAccess::default()
        };
        assert!(who_may(false, guests.clone(), false).is_empty());
        assert_eq!(who_may(false, guests, true), [nobody()]);
    }
}
