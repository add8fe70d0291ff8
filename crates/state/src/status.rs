//! What `copyless status` shows, as smbstatus does: each connection with
//! its sessions and tree connects, and every open file with its share
//! modes, its oplock or lease, and its byte-range locks.
//!
//! A connection publishes its own view on the [`StatusBoard`] whenever its
//! sessions or tree connects change (rare events: logons, logoffs, tree
//! connects), so that reading the board never has to reach into the
//! connections, which the engine owns. Open files come from the
//! [`crate::file_table::FileTable`], which already knows each open and the
//! session that holds it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

use crate::ConnectionId;

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
    /// Every connection's view, by id.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnectionId, ConnectionStatus>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn publish(&self, view: ConnectionStatus) {
        self.lock().insert(view.id, view);
    }

    pub fn withdraw(&self, id: ConnectionId) {
        self.lock().remove(&id);
    }
}
