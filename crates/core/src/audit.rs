//! The audit trail of a share: who created, wrote, renamed, deleted or
//! changed the security of what, and who was refused. Each share names
//! the kinds it keeps (`audit = [...]` in the configuration); the core
//! reports each such event (an [`Event`](crate::Event) in the output) and
//! the engine writes it as one line, whose form is stable:
//!
//! ```text
//! audit rename ok user="alice" client=192.0.2.7:50122 share="family" path="a.txt" to="b.txt" status=STATUS_SUCCESS
//! ```

use std::fmt;
use std::net::SocketAddr;

use copyless_proto::status::{self, NtStatus};

use crate::logon::Quoted;

/// What happened to a file or folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditKind {
    /// An open of an existing file or folder (one per CREATE).
    Open,
    /// A new file or folder.
    Create,
    /// Data written (once per open, at its close), or the file cut or
    /// overwritten.
    Write,
    Rename,
    /// Removed: at the last close of a file marked for deletion.
    Delete,
    /// Its security descriptor changed.
    SetSecurity,
    /// Any of these refused with STATUS_ACCESS_DENIED, whether its own
    /// kind is kept or not: the line names what was tried.
    Denied,
}

impl AuditKind {
    pub const ALL: [AuditKind; 7] = [
        AuditKind::Open,
        AuditKind::Create,
        AuditKind::Write,
        AuditKind::Rename,
        AuditKind::Delete,
        AuditKind::SetSecurity,
        AuditKind::Denied,
    ];

    /// The name in the configuration and in the line.
    pub fn name(self) -> &'static str {
        match self {
            AuditKind::Open => "open",
            AuditKind::Create => "create",
            AuditKind::Write => "write",
            AuditKind::Rename => "rename",
            AuditKind::Delete => "delete",
            AuditKind::SetSecurity => "set_security",
            AuditKind::Denied => "denied",
        }
    }

    pub fn named(name: &str) -> Option<AuditKind> {
        AuditKind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The kinds of event a share keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditKinds(u8);

impl AuditKinds {
    pub const NONE: AuditKinds = AuditKinds(0);

    pub fn with(self, kind: AuditKind) -> AuditKinds {
        AuditKinds(self.0 | kind.bit())
    }

    pub fn contains(self, kind: AuditKind) -> bool {
        self.0 & kind.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether an operation of `kind` that ended with `status` is kept:
    /// done, when its kind is; refused, when its kind or refusals are.
    /// Other failures (a name not found, a sharing violation) change
    /// nothing and are not kept: clients probe for names all the time.
    pub fn keeps(self, kind: AuditKind, status: NtStatus) -> bool {
        match status {
            status::SUCCESS => self.contains(kind),
            status::ACCESS_DENIED => self.contains(kind) || self.contains(AuditKind::Denied),
            _ => false,
        }
    }
}

impl FromIterator<AuditKind> for AuditKinds {
    fn from_iter<I: IntoIterator<Item = AuditKind>>(kinds: I) -> AuditKinds {
        kinds.into_iter().fold(AuditKinds::NONE, AuditKinds::with)
    }
}

/// What a request does that its share may keep, noted by its handler and
/// reported with the request's final status, when its reply is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Audited {
    pub kind: AuditKind,
    pub path: String,
    pub to: Option<String>,
    /// Kept only if refused: done, it is reported later (a deletion, at
    /// the close that removes the file).
    pub refusal_only: bool,
}

impl Audited {
    pub fn new(kind: AuditKind, path: String) -> Audited {
        Audited {
            kind,
            path,
            to: None,
            refusal_only: false,
        }
    }
}

/// One event of a share's audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    pub kind: AuditKind,
    /// The session's user, as it logged on.
    pub user: String,
    pub client: SocketAddr,
    pub share: String,
    /// The file or folder, from the share's root.
    pub path: String,
    /// A rename's new path.
    pub to: Option<String>,
    pub status: NtStatus,
}

impl fmt::Display for Audit {
    /// The line, without the program's prefix. Names are quoted and
    /// escaped as in the logon lines: a file name cannot end the line or
    /// pass for another field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let result = if self.status == status::SUCCESS {
            "ok"
        } else {
            "failed"
        };
        let client = SocketAddr::new(self.client.ip().to_canonical(), self.client.port());
        write!(
            f,
            "audit {} {result} user={} client={client} share={} path={}",
            self.kind.name(),
            Quoted(&self.user),
            Quoted(&self.share),
            Quoted(&self.path),
        )?;
        if let Some(to) = &self.to {
            write!(f, " to={}", Quoted(to))?;
        }
        write!(
            f,
            " status={}",
            status::name(self.status).unwrap_or("STATUS_UNKNOWN")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename() -> Audit {
        Audit {
            kind: AuditKind::Rename,
            user: "alice".into(),
            client: "[::ffff:192.0.2.7]:50122".parse().unwrap(),
            share: "family".into(),
            path: "a.txt".into(),
            to: Some("b.txt".into()),
            status: status::SUCCESS,
        }
    }

    #[test]
    fn the_line() {
        assert_eq!(
            rename().to_string(),
            "audit rename ok user=\"alice\" client=192.0.2.7:50122 share=\"family\" \
             path=\"a.txt\" to=\"b.txt\" status=STATUS_SUCCESS"
        );
        let denied = Audit {
            kind: AuditKind::Open,
            to: None,
            path: "dir\\secret.txt".into(),
            status: status::ACCESS_DENIED,
            ..rename()
        };
        assert_eq!(
            denied.to_string(),
            "audit open failed user=\"alice\" client=192.0.2.7:50122 share=\"family\" \
             path=\"dir\\\\secret.txt\" status=STATUS_ACCESS_DENIED"
        );
    }

    #[test]
    fn a_file_name_cannot_forge_a_field_or_a_line() {
        let mut a = rename();
        a.path = "x\" to=\"y\nforged".into();
        let line = a.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(line.matches(" to=\"b.txt\"").count(), 1, "{line}");
    }

    #[test]
    fn kinds_by_name_and_what_a_share_keeps() {
        for kind in AuditKind::ALL {
            assert_eq!(AuditKind::named(kind.name()), Some(kind));
        }
        assert_eq!(AuditKind::named("unlink"), None);
        let kinds: AuditKinds = [AuditKind::Delete, AuditKind::Denied].into_iter().collect();
        assert!(kinds.keeps(AuditKind::Delete, status::SUCCESS));
        assert!(kinds.keeps(AuditKind::Open, status::ACCESS_DENIED));
        assert!(!kinds.keeps(AuditKind::Open, status::SUCCESS));
        assert!(!kinds.keeps(AuditKind::Open, status::SHARING_VIOLATION));
        assert!(!kinds.keeps(AuditKind::Delete, status::CANNOT_DELETE));
        let writes: AuditKinds = [AuditKind::Write].into_iter().collect();
        assert!(writes.keeps(AuditKind::Write, status::ACCESS_DENIED));
        assert!(!writes.keeps(AuditKind::Rename, status::ACCESS_DENIED));
        assert!(!AuditKinds::NONE.keeps(AuditKind::Delete, status::ACCESS_DENIED));
        assert!(AuditKinds::NONE.is_empty());
    }
}
