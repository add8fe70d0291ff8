//! Samba's full_audit module as a share's `audit`: the VFS operations
//! `full_audit:success` names become the kinds of event copyless keeps,
//! and any `full_audit:failure` becomes `denied` (copyless keeps
//! refusals, not every failure).

use copyless_core::audit::AuditKind;

use super::smbconf::split_list;

/// What the lists carry over to: the kinds, and the operations of the
/// lists that copyless keeps no event for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Kept {
    pub kinds: Vec<AuditKind>,
    pub left_out: Vec<String>,
}

/// The kinds of `success` (the operations logged when they succeed) and
/// `failure` (when they fail).
pub fn kinds(success: Option<&str>, failure: Option<&str>) -> Kept {
    let mut kept = Kept::default();
    let add = |kinds: &mut Vec<AuditKind>, new: &[AuditKind]| {
        for kind in new {
            if !kinds.contains(kind) {
                kinds.push(*kind);
            }
        }
    };
    for op in success.map(split_list).unwrap_or_default() {
        match of_operation(&op) {
            Some(new) => add(&mut kept.kinds, new),
            None => kept.left_out.push(op),
        }
    }
    let failures = failure.map(split_list).unwrap_or_default();
    if failures.iter().any(|op| op.to_lowercase() != "none") {
        add(&mut kept.kinds, &[AuditKind::Denied]);
    }
    // In the order copyless lists them.
    kept.kinds
        .sort_by_key(|k| AuditKind::ALL.iter().position(|a| a == k));
    kept
}

/// The kinds one operation's success is kept as; None for an operation
/// copyless keeps nothing of (a read, a listing, a connect...).
fn of_operation(op: &str) -> Option<&'static [AuditKind]> {
    use AuditKind::*;
    let op = op.to_lowercase();
    let op = op.trim_end_matches("_send").trim_end_matches("_recv");
    Some(match op {
        "all" => &[Open, Create, Write, Rename, Delete, SetSecurity],
        "none" => &[],
        "open" | "openat" | "create_file" => &[Open, Create],
        "mkdir" | "mkdirat" => &[Create],
        "write" | "pwrite" | "ftruncate" | "fallocate" => &[Write],
        "rename" | "renameat" => &[Rename],
        "unlink" | "unlinkat" | "rmdir" => &[Delete],
        "fset_nt_acl" | "set_nt_acl" | "chmod" | "fchmod" | "chown" | "fchown" | "lchown"
        | "fchmod_acl" | "sys_acl_set_fd" | "sys_acl_set_file" => &[SetSecurity],
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use AuditKind::*;

    #[test]
    fn typical_lists() {
        // TrueNAS's and OpenMediaVault's usual choice.
        let kept = kinds(
            Some("mkdirat unlinkat renameat pwrite fset_nt_acl"),
            Some("connect"),
        );
        assert_eq!(
            kept.kinds,
            [Create, Write, Rename, Delete, SetSecurity, Denied]
        );
        assert!(kept.left_out.is_empty());
        let kept = kinds(Some("all"), Some("none"));
        assert_eq!(
            kept.kinds,
            [Open, Create, Write, Rename, Delete, SetSecurity]
        );
        let kept = kinds(Some("openat pread connect"), None);
        assert_eq!(kept.kinds, [Open, Create]);
        assert_eq!(kept.left_out, ["pread", "connect"]);
        assert_eq!(kinds(None, None), Kept::default());
    }
}
