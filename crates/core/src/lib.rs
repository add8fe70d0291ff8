//! The SMB2/3 protocol state machine, sans I/O: frames in, frames out. The
//! engine supplies the bytes, the clock and randomness ([`Env`]); the file
//! system is reached only through the share's `copyless_vfs::Vfs`.
//!
//! Three layers:
//! - `copyless_state`: what connections share (the open-file table with
//!   share modes, locks, oplocks and leases, durable opens, sessions,
//!   caps and limits, the status board), which knows nothing of the core;
//!   re-exported here under the names the core has always used;
//! - [`Connection`] and what one connection keeps (`conn/`): dispatch,
//!   signing, credits, negotiate, sessions, tree connects, channels,
//!   pending and waiting requests, letters between connections;
//! - the command handlers (`handlers/`), with the names they work on
//!   (`names/`: paths, wildcards, short names, enumerations).
//!
//! The last two still reach into each other: dispatch calls the handlers,
//! and handlers and the feature modules beside them (durable, notify,
//! breaks, local) add to `impl Connection`.

pub mod audit;
mod breaks;
mod conn;
pub mod durable;
pub mod env;
pub mod event;
mod handlers;
pub mod hosts;
pub mod intent;
pub mod local;
pub mod logon;
mod names;
pub mod notify;
mod notify_sight;
pub mod open;
pub mod recycle;
pub mod rights;
pub mod security;
pub mod server;
pub mod status;

pub use copyless_state::{
    access, file_table, leases, limits, listing_ledger, locks, oplocks, quota, Limits,
};

pub use conn::connection::{Connection, Output, RequestTrace, Unsealed};
pub use conn::encryption::SessionCiphers;
pub use conn::post::{ConnectionId, Letter, Message};
pub use env::Env;
pub use event::Event;
pub use intent::{
    Call, CallOp, Completion, DataFile, Intent, Made, Op, OpenCall, Token, WriteData,
};
pub use names::hiding::NameRules;
#[cfg(any(test, feature = "reference"))]
pub use names::wildcard_reference;
pub use names::{path, wildcard};
pub use server::{HomeShares, Principal, Server, ServerConfig, Share, ShareAccess, ShareKeeper};
