//! How the core fills the status board (`copyless_state::status`): each
//! connection publishes its sessions and tree connects when they change,
//! and the server adds the open files from its file table when asked.

use std::collections::BTreeMap;

pub use copyless_state::status::*;

use crate::conn::connection::Connection;
use crate::conn::tree::TreeKind;
use crate::server::Server;

impl Server {
    /// Connections (in the order they came), their sessions, and open
    /// files (by share and path).
    pub fn status(&self) -> ServerStatus {
        let mut connections: Vec<ConnectionStatus> =
            self.status_board.lock().values().cloned().collect();
        connections.sort_by_key(|c| c.id);
        let mut opens = self.files().open_files();
        opens.sort_by(|a, b| (a.0, &a.1.path).cmp(&(b.0, &b.1.path)));
        let opens = opens
            .into_iter()
            .map(|(index, mut open)| {
                open.share = self
                    .shares
                    .get(index)
                    .map_or_else(String::new, |s| s.name.clone());
                open
            })
            .collect();
        ServerStatus { connections, opens }
    }
}

impl Connection {
    /// Puts this connection's current view on the server's board.
    pub(crate) fn publish_status(&self) {
        let sessions = self
            .sessions
            .values()
            .filter(|s| s.is_valid())
            .map(|s| {
                let trees: BTreeMap<u32, String> = s
                    .trees
                    .values()
                    .map(|t| {
                        let name = match &t.kind {
                            TreeKind::Ipc => "IPC$".to_string(),
                            TreeKind::Disk { share, .. } => share.name.clone(),
                        };
                        (t.id, name)
                    })
                    .collect();
                SessionStatus {
                    id: s.id,
                    user: s.user.clone(),
                    anonymous: s.anonymous,
                    guest: s.guest,
                    kerberos: s.expires_at.is_some(),
                    signing_required: s.signing_required,
                    encrypted: s.encrypt_data,
                    trees: trees.into_values().collect(),
                }
            })
            .collect();
        self.server.status_board.publish(ConnectionStatus {
            id: self.id(),
            client: self.client_addr,
            dialect: self.dialect,
            sessions,
        });
    }

    pub(crate) fn withdraw_status(&self) {
        self.server.status_board.withdraw(self.id());
    }
}
