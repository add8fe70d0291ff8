//! Messages between connections: what one connection's request makes
//! another connection do (end a session now, try a waiting lock request
//! again, break an oplock or a lease, report changes to watchers). The
//! core only addresses them; the engine carries each to the connection
//! named and hands it to
//! [`Connection::receive`](crate::Connection::receive) there, before any
//! frame that connection receives after the message was sent.

use std::sync::Arc;

use copyless_crypto::SigningKey;

use crate::file_table::Seen;
use crate::leases::LeaseBreak;

pub use copyless_state::sessions::{ClientTable, SessionFacts, SessionTable};
pub use copyless_state::ConnectionId;

/// A letter for the connection `to`.
#[derive(Debug)]
pub struct Message {
    pub to: ConnectionId,
    pub letter: Letter,
}

/// What a connection is asked to do. Opaque to the engine, which only
/// asks whether handling it may block.
#[derive(Debug)]
pub struct Letter(pub(crate) Kind);

#[derive(Debug)]
pub(crate) enum Kind {
    /// The session's user authenticated again on another connection and
    /// named it as its previous session (MS-SMB2 3.3.5.5.3): it ends, its
    /// opens closed, as if the connection that held it had dropped.
    EndSession { session_id: u64 },
    /// Byte-range locks went that a lock request pending here (by its
    /// AsyncId) waited for: it is tried again.
    LocksReleased { async_id: u64 },
    /// An oplock this connection's open holds is broken: the holder is to
    /// be told.
    OplockBreak { open: u64, to: u8 },
    /// The oplock breaks a held request here waited for are done: it runs
    /// again.
    BreakResolved { token: u64 },
    /// Directories opens here watch changed.
    Changed(Vec<Seen>),
    /// A lease of this connection's client is broken: the client is to be
    /// told.
    LeaseBreak(LeaseBreak),
    /// Another client opened the file under the same application instance
    /// id (MS-SMB2 3.3.5.9.13): this open closes, with no break.
    CloseOpen { open: u64 },
    /// Reports of changes for this connection were dropped, its inbox
    /// being full: every watch here has missed some.
    ChangesLost,
    /// A frame a bound channel received for a session held here
    /// (multichannel, MS-SMB2 3.3.5.5): run it as if it had come here,
    /// and send the replies back. The channel took the requests' credits
    /// and decrypted a sealed frame; `grants` are the credits each
    /// request's reply grants.
    Relay {
        from: ConnectionId,
        frame: Vec<u8>,
        sealed: Option<u64>,
        grants: Vec<u16>,
    },
    /// Replies to relayed requests, signed or sealed, for the channel to
    /// send; `granted` credits become the client's as they go, and `done`
    /// bytes of relayed frames are no longer held at home `from`.
    Relayed {
        from: ConnectionId,
        frame: Vec<u8>,
        granted: u64,
        done: usize,
        disconnect: bool,
    },
    /// A connection bound itself to a session held here, with this key.
    ChannelAdded {
        session_id: u64,
        channel: ConnectionId,
        key: ChannelKey,
    },
    /// A bound connection went away: the sessions it served live on.
    ChannelGone { channel: ConnectionId },
    /// A session this connection was bound to ended.
    SessionEnded { session_id: u64 },
}

/// A channel's signing key (MS-SMB2 Channel.SigningKey).
#[derive(Clone)]
pub(crate) struct ChannelKey(pub Arc<SigningKey>);

impl std::fmt::Debug for ChannelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChannelKey")
    }
}

impl Letter {
    /// Whether it only reports changes to watchers, so that an engine
    /// may drop it when the connection falls behind and say so with
    /// [`Letter::changes_lost`] instead: unlike a break or a woken lock,
    /// a missed change has an answer the client understands
    /// (STATUS_NOTIFY_ENUM_DIR: list the folder again).
    pub fn is_change_report(&self) -> bool {
        matches!(self.0, Kind::Changed(_))
    }

    /// Tells a connection that change reports for it were dropped.
    pub fn changes_lost() -> Letter {
        Letter(Kind::ChangesLost)
    }

    /// Whether handling it may call the filesystem, so that an engine
    /// keeps it off the thread that serves sockets: a relayed request may
    /// do anything a request does.
    pub fn may_block(&self) -> bool {
        match &self.0 {
            Kind::Relay { .. } => true,
            // A channel's going ends requests it relayed, which may close
            // nothing; lock waiters are forgotten in memory; what watchers
            // of a tree may see of changes is looked at by a call
            // (notify_sight.rs); the files that closes remove are removed
            // by calls (removals.rs).
            Kind::EndSession { .. }
            | Kind::CloseOpen { .. }
            | Kind::Changed(_)
            | Kind::LocksReleased { .. }
            | Kind::OplockBreak { .. }
            | Kind::LeaseBreak(_)
            | Kind::ChangesLost
            | Kind::Relayed { .. }
            | Kind::ChannelAdded { .. }
            | Kind::ChannelGone { .. }
            | Kind::SessionEnded { .. }
            // The held request runs again as its frame would, or else
            // on a tick where it may wait (`run_retries`).
            | Kind::BreakResolved { .. } => false,
        }
    }
}
