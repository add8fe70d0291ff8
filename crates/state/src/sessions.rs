//! Who is connected: every client's connections (by ClientGuid) and every
//! authenticated session with the connection that holds it, for what one
//! connection must reach in another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use copyless_crypto::{Cipher, CipherId, SigningAlgorithm, SigningKey};

use crate::ConnectionId;

/// Every client's connections, oldest first, by ClientGuid: a lease is
/// the client's, and its breaks go to the client's oldest connection
/// (as Windows and Samba send them), whichever connection opened it.
#[derive(Default)]
pub struct ClientTable {
    clients: Mutex<HashMap<[u8; 16], Vec<ConnectionId>>>,
}

impl ClientTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 16], Vec<ConnectionId>>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn join(&self, client: [u8; 16], connection: ConnectionId) {
        self.lock().entry(client).or_default().push(connection);
    }

    pub fn leave(&self, client: [u8; 16], connection: ConnectionId) {
        let mut clients = self.lock();
        if let Some(list) = clients.get_mut(&client) {
            list.retain(|c| *c != connection);
            if list.is_empty() {
                clients.remove(&client);
            }
        }
    }

    pub fn oldest(&self, client: &[u8; 16]) -> Option<ConnectionId> {
        self.lock().get(client).and_then(|l| l.first().copied())
    }
}

/// Every authenticated session of the server and the connection that
/// holds it (MS-SMB2 GlobalSessionTable), for what one connection must
/// reach in another, and for the answers another connection gives a
/// request naming the session (a bind, a stray request).
#[derive(Default)]
pub struct SessionTable {
    sessions: Mutex<HashMap<u64, SessionFacts>>,
}

/// What another connection needs to judge a request that names a
/// session it does not hold: the session's dialect and algorithms, which
/// a bind must match, and its key, which checks the request and signs
/// the refusal.
#[derive(Clone)]
pub struct SessionFacts {
    /// The connection that holds the session.
    pub home: ConnectionId,
    pub user: String,
    pub dialect: u16,
    pub algorithm: SigningAlgorithm,
    pub cipher: Option<CipherId>,
    pub signing: Arc<SigningKey>,
    /// Opens what the client seals for the session, on any channel.
    pub decrypt: Option<Arc<Cipher>>,
    /// Its channels beyond the connection that holds it.
    pub channels: Arc<ChannelCount>,
}

/// How many channels a session has beyond its first connection, counted
/// by the connections they were bound on.
#[derive(Debug, Default)]
pub struct ChannelCount(AtomicUsize);

/// A channel's place in its session's [`ChannelCount`], given back when
/// the channel goes (dropped with it).
#[derive(Debug)]
pub struct ChannelSlot(Arc<ChannelCount>);

impl ChannelCount {
    /// A place for one more channel, while fewer than `most` hold one.
    pub fn take(self: &Arc<Self>, most: usize) -> Option<ChannelSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < most).then_some(n + 1)
            })
            .ok()
            .map(|_| ChannelSlot(self.clone()))
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for ChannelSlot {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl SessionTable {
    /// Records a session's facts; a re-authentication's keep the count
    /// of the channels bound before it.
    pub fn insert(&self, session_id: u64, mut facts: SessionFacts) {
        let mut sessions = self.lock();
        if let Some(old) = sessions.get(&session_id) {
            facts.channels = old.channels.clone();
        }
        sessions.insert(session_id, facts);
    }

    pub fn remove(&self, session_id: u64) {
        self.lock().remove(&session_id);
    }

    pub fn facts(&self, session_id: u64) -> Option<SessionFacts> {
        self.lock().get(&session_id).cloned()
    }

    /// Takes the session out of the table when `user` holds it, and says
    /// which connection must end it; None (and nothing taken) for another
    /// user's session or one that is gone.
    pub fn take_if_user(&self, session_id: u64, user: &str) -> Option<ConnectionId> {
        let mut sessions = self.lock();
        let owner = sessions.get(&session_id)?;
        if !owner.user.eq_ignore_ascii_case(user) {
            return None;
        }
        sessions.remove(&session_id).map(|o| o.home)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Held only for short updates; a poisoned lock (a panic in another
    /// connection) does not stop the others.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SessionFacts>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_slot_is_given_back_when_dropped() {
        let count = Arc::new(ChannelCount::default());
        let slots: Vec<_> = (0..3).map(|_| count.take(3).unwrap()).collect();
        assert!(count.take(3).is_none());
        assert_eq!(count.get(), 3);
        drop(slots);
        assert_eq!(count.get(), 0);
        assert!(count.take(3).is_some());
    }
}
