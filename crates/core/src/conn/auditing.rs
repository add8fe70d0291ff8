//! Reporting what a share's audit trail keeps (audit.rs): who did it and
//! from where are the connection's to say.

use std::sync::Arc;

use copyless_proto::status::{self, NtStatus};

use crate::audit::{Audit, AuditKind, Audited};
use crate::conn::connection::Connection;
use crate::conn::tree::TreeKind;
use crate::event::Event;
use crate::server::Share;

impl Connection {
    /// Reports `audited`, a request of session `session_id` on tree
    /// `tree_id` that ended with `status`, if the share keeps it.
    pub(crate) fn audit_reply(
        &mut self,
        session_id: u64,
        tree_id: u32,
        audited: Audited,
        status: NtStatus,
    ) {
        if audited.refusal_only && status != status::ACCESS_DENIED {
            return;
        }
        let share = self
            .sessions
            .get(&session_id)
            .and_then(|s| s.trees.get(&tree_id))
            .and_then(|t| match &t.kind {
                TreeKind::Disk { share, .. } => Some(share.clone()),
                TreeKind::Ipc => None,
            });
        if let Some(share) = share {
            let Audited { kind, path, to, .. } = audited;
            self.audit(session_id, &share, kind, path, to, status);
        }
    }

    /// Reports what a session did on the share of index `share`, outside
    /// a reply (a close removing a file, a close after writes).
    pub(crate) fn audit_done(
        &mut self,
        session_id: u64,
        share: usize,
        kind: AuditKind,
        path: &str,
    ) {
        if let Some(share) = self.server.shares.get(share) {
            self.audit(
                session_id,
                &share,
                kind,
                path.to_owned(),
                None,
                status::SUCCESS,
            );
        }
    }

    fn audit(
        &mut self,
        session_id: u64,
        share: &Arc<Share>,
        kind: AuditKind,
        path: String,
        to: Option<String>,
        status: NtStatus,
    ) {
        if !share.audit.keeps(kind, status) {
            return;
        }
        let user = self
            .sessions
            .get(&session_id)
            .map(|s| s.user.clone())
            .unwrap_or_default();
        self.events.push(Event::Audit(Audit {
            kind,
            user,
            client: self.client_addr,
            share: share.name.clone(),
            path,
            to,
            status,
        }));
    }
}
