//! SMB2/3 wire format: headers, commands, negotiate contexts, status codes.
//!
//! Parsers borrow from the received bytes and check every length and offset;
//! a malformed message is an `Error`, never a panic. Nothing here does I/O
//! or keeps state.

pub mod client;
pub mod command;
pub mod compound;
pub mod create_context;
pub mod durable;
pub mod fsctl;
pub mod header;
pub mod lease;
pub mod messages;
pub mod negotiate;
pub mod smb1;
pub mod status;
pub mod transform;
pub mod utf16;
pub mod wire;

pub use header::{Header, HEADER_LEN};
pub use wire::{Error, Reader, Writer};
