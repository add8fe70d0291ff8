//! The durable opens of the server (MS-SMB2 3.3.5.9.6-.12, 3.3.7.1):
//! where each live one is, and those whose connection went, waiting to be
//! reclaimed. The table holds whatever the protocol core calls an open:
//! what a server restart would have to keep to offer persistent handles
//! later is all here.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use copyless_proto::status::{self, NtStatus};

use crate::file_table::FileKey;
use crate::ConnectionId;

/// An open whose connection went, waiting to be reclaimed.
pub struct Parked<O> {
    pub open: O,
    /// The user of the session that held it: only they may reclaim it.
    pub user: String,
    pub share: usize,
    /// FILETIME after which it is closed.
    pub expires: u64,
}

/// The durable opens of the server, by persistent file id: those whose
/// connection went, and where the others live.
pub struct DurableTable<O> {
    parked: Mutex<HashMap<u64, Parked<O>>>,
    live: Mutex<HashMap<u64, (FileKey, ConnectionId)>>,
}

impl<O> Default for DurableTable<O> {
    fn default() -> Self {
        DurableTable {
            parked: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
        }
    }
}

impl<O> DurableTable<O> {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Parked<O>>> {
        self.parked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live durable opens: by persistent id, the file and the
    /// connection that holds it.
    pub fn live(&self) -> MutexGuard<'_, HashMap<u64, (FileKey, ConnectionId)>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A durable open lives on `connection`.
    pub fn attach(&self, id: u64, key: FileKey, connection: ConnectionId) {
        self.live().insert(id, (key, connection));
    }

    /// A durable open closes.
    pub fn detach(&self, id: u64) {
        self.live().remove(&id);
    }

    /// The open `id` lost its connection: it waits here.
    pub fn park(&self, id: u64, parked: Parked<O>) {
        self.detach(id);
        self.lock().insert(id, parked);
    }

    /// Takes the open out when `check` allows; a refused reclaim leaves
    /// it where it is, for a later, right one.
    pub fn take_if(
        &self,
        persistent: u64,
        check: impl FnOnce(&Parked<O>) -> Result<(), NtStatus>,
    ) -> Result<Parked<O>, NtStatus> {
        let mut parked = self.lock();
        check(
            parked
                .get(&persistent)
                .ok_or(status::OBJECT_NAME_NOT_FOUND)?,
        )?;
        parked
            .remove(&persistent)
            .ok_or(status::OBJECT_NAME_NOT_FOUND)
    }

    /// Takes the opens `ids` out, those that are here.
    pub fn take(&self, ids: &[u64]) -> Vec<Parked<O>> {
        let mut parked = self.lock();
        ids.iter().filter_map(|id| parked.remove(id)).collect()
    }

    /// Takes out the opens whose time is up at `now` (FILETIME).
    pub fn take_expired(&self, now: u64) -> Vec<Parked<O>> {
        let mut parked = self.lock();
        let expired: Vec<u64> = parked
            .iter()
            .filter(|(_, p)| p.expires <= now)
            .map(|(id, _)| *id)
            .collect();
        expired.iter().filter_map(|id| parked.remove(id)).collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
