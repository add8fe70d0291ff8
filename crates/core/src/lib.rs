//! The SMB2/3 protocol state machine, sans I/O: frames in, frames out. The
//! engine supplies the bytes, the clock and randomness ([`Env`]); the file
//! system is reached only through the share's `copyless_vfs::Vfs`.

mod breaks;
// The state shared between connections, under the names the core has
// always used for it.
pub use copyless_state::{
    access, file_table, leases, limits, listing_ledger, locks, oplocks, quota, Limits,
};
mod channels;
pub mod connection;
pub mod credits;
pub mod durable;
pub mod encryption;
mod enumeration;
pub mod env;
pub mod event;
mod handlers;
pub mod hosts;
pub mod intent;
pub mod local;
pub mod logon;
mod negotiate;
pub mod notify;
mod notify_sight;
pub mod open;
pub mod path;
mod pending;
pub mod post;
pub mod rights;
pub mod security;
pub mod server;
mod session;
pub mod shortname;
pub mod status;
pub mod tree;
mod waiting;
pub mod wildcard;
#[cfg(any(test, feature = "reference"))]
pub mod wildcard_reference;

pub use connection::{Connection, Output};
pub use env::Env;
pub use event::Event;
pub use intent::{Completion, DataFile, Intent, Op, Token, WriteData};
pub use post::{ConnectionId, Letter, Message};
pub use server::{Principal, Server, ServerConfig, Share, ShareAccess, ShareKeeper};
