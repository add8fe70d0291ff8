//! What `copyless status` shows, as smbstatus does: each connection with
//! its sessions (user, dialect, signing, encryption) and their tree
//! connects, and every open file with its share modes, its oplock or
//! lease, and its byte-range locks.
//!
//! A connection publishes its own view whenever its sessions or tree
//! connects change (rare events: logons, logoffs, tree connects), so
//! that reading the board never has to reach into the connections,
//! which the engine owns. Open files come from the server's file table,
//! which already knows each open and the session that holds it.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Mutex;

use crate::connection::Connection;
use crate::post::ConnectionId;
use crate::server::Server;
use crate::tree::TreeKind;

/// A connection as it stands, from its last change.
#[derive(Debug, Clone)]
pub struct ConnectionStatus {
    pub id: ConnectionId,
    pub client: SocketAddr,
    /// The negotiated dialect (0x0311 for 3.1.1), 0 before NEGOTIATE.
    pub dialect: u16,
    pub sessions: Vec<SessionStatus>,
}

#[derive(Debug, Clone)]
pub struct SessionStatus {
    pub id: u64,
    pub user: String,
    pub anonymous: bool,
    pub guest: bool,
    /// Logged on with Kerberos (its ticket ends the session's validity).
    pub kerberos: bool,
    pub signing_required: bool,
    pub encrypted: bool,
    /// Shares connected, by name (IPC$ included).
    pub trees: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct OpenStatus {
    pub share: String,
    pub path: String,
    pub is_dir: bool,
    /// The session holding it (see [`SessionStatus::id`]).
    pub session: u64,
    /// Granted access and the share modes allowed to others
    /// (FILE_SHARE_READ 1, WRITE 2, DELETE 4).
    pub access: u32,
    pub share_access: u32,
    pub delete_pending: bool,
    /// Kept as a durable handle after its connection went.
    pub disconnected: bool,
    /// Its oplock level (OPLOCK_LEVEL_II, _EXCLUSIVE, _BATCH), 0 for none.
    pub oplock: u8,
    /// Its lease's caching (READ_CACHING 1, HANDLE 2, WRITE 4), when it
    /// has a lease.
    pub lease: Option<u32>,
    /// Its byte-range locks, in the order they were taken.
    pub locks: Vec<LockStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockStatus {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ServerStatus {
    pub connections: Vec<ConnectionStatus>,
    pub opens: Vec<OpenStatus>,
}

/// Every live connection's published view.
#[derive(Default)]
pub struct StatusBoard {
    connections: Mutex<HashMap<ConnectionId, ConnectionStatus>>,
}

impl StatusBoard {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, ConnectionStatus>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn publish(&self, view: ConnectionStatus) {
        self.lock().insert(view.id, view);
    }

    pub(crate) fn withdraw(&self, id: ConnectionId) {
        self.lock().remove(&id);
    }
}

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
