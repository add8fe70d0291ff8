//! What keeps a configuration from handing out root's powers: no share
//! works as root (force_user, force_group), no share list lets root in by
//! name or group, and guests never act as root. Each check says why in
//! words a config error can carry.

use copyless_auth::unix::{self, UnixAccount};
use copyless_vfs::Identity;

/// The uid and gid that carry root's powers.
const ROOT: u32 = 0;
/// The ids of `nobody`, for guests when no guest account exists.
const NOBODY: u32 = 65534;

/// Why acting as `account` (named by `key` = `name`) would hand out root's
/// powers, if it would: it is root, or its groups include root's group,
/// which owns much of the system (and, on many, the files of /etc).
pub fn account_refusal(key: &str, name: &str, account: &UnixAccount) -> Option<String> {
    if account.uid == ROOT {
        return Some(format!(
            "{key} {name:?} is root (uid 0): clients would act with root's powers; \
             name an unprivileged account"
        ));
    }
    if account.gid == ROOT || account.groups.contains(&ROOT) {
        return Some(format!(
            "{key} {name:?} is in the root group (gid 0): clients would act with that \
             group's rights; name an account outside it"
        ));
    }
    None
}

/// Why the group `name` (gid `gid`), given as `key`, is refused, if it is.
pub fn group_refusal(key: &str, name: &str, gid: u32) -> Option<String> {
    (gid == ROOT).then(|| {
        format!(
            "{key}: {name:?} is the root group (gid 0): a share must not hand out \
             its rights; name another group"
        )
    })
}

/// Why a share list entry naming the user `name` is refused, if it is:
/// `root` is linked to the Unix account root unless linked elsewhere, so
/// naming it lets root's powers in.
pub fn user_refusal(key: &str, name: &str) -> Option<String> {
    name.eq_ignore_ascii_case("root").then(|| {
        format!(
            "{key}: user {name:?} would act as the Unix account root; name \
             unprivileged users"
        )
    })
}

/// Who guests act as on disk: `account`, which must exist when guests are
/// allowed and may never have root's powers. Without guests only anonymous
/// sessions use it, and the conventional ids of `nobody` stand in for a
/// missing account.
pub fn guest_identity(account: &str, guest: bool) -> Result<Identity, String> {
    let found = match unix::lookup(account) {
        Ok(found) => found,
        Err(_) if !guest => return Ok(Identity::unix(NOBODY, NOBODY, vec![NOBODY])),
        Err(e) => {
            return Err(format!(
                "guest_account {account:?}: {e}; guests (guest = true) act as it on disk: \
                 create it or name another"
            ))
        }
    };
    if let Some(why) = account_refusal("guest_account", account, &found) {
        return Err(why);
    }
    Ok(Identity::unix(found.uid, found.gid, found.groups))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(uid: u32, gid: u32, groups: &[u32]) -> UnixAccount {
        UnixAccount {
            name: "x".into(),
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn root_and_its_group_are_refused() {
        let m = account_refusal("force_user", "toor", &account(0, 5, &[5])).unwrap();
        assert!(m.starts_with("force_user \"toor\" is root (uid 0)"), "{m}");
        let m = account_refusal("force_user", "op", &account(11, 0, &[0])).unwrap();
        assert!(m.contains("root group (gid 0)"), "{m}");
        let m = account_refusal("force_user", "wheel", &account(12, 12, &[12, 0])).unwrap();
        assert!(m.contains("root group"), "{m}");
        assert_eq!(
            account_refusal("force_user", "media", &account(1500, 1500, &[1500, 100])),
            None
        );
        assert!(group_refusal("force_group", "root", 0).is_some());
        assert!(group_refusal("force_group", "staff", 50).is_none());
        assert!(user_refusal("valid_users", "Root").is_some());
        assert!(user_refusal("valid_users", "rooty").is_none());
    }

    #[test]
    fn guests_never_act_as_root() {
        let m = guest_identity("root", false).unwrap_err();
        assert!(m.contains("is root (uid 0)"), "{m}");
        let m = guest_identity("no-such-account-here", true).unwrap_err();
        assert!(m.contains("guest_account \"no-such-account-here\""), "{m}");
        assert_eq!(
            guest_identity("no-such-account-here", false).unwrap(),
            Identity::unix(NOBODY, NOBODY, vec![NOBODY])
        );
    }
}
