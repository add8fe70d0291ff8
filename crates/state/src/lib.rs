//! The state connections share, which no single connection owns: the
//! open-file table with share modes, byte-range locks, oplocks and
//! leases, durable opens, the caps on opens and on listing memory, the
//! limits in force, the clients' connections and sessions, and the board
//! `copyless status` reads. Protocol cores (SMB now, NFS later) read and change it; it does
//! no I/O and knows nothing of them, so that a clustered backend can later
//! hold it elsewhere.

pub mod access;
pub mod durable_table;
pub mod file_table;
pub mod leases;
pub mod limits;
pub mod listing_ledger;
pub mod locks;
pub mod oplocks;
pub mod quota;
pub mod sessions;
pub mod status;

pub use limits::Limits;

/// A connection, as the server numbers them.
pub type ConnectionId = u64;

/// The tag of an I/O intent, by which its completion finds its request.
pub type Token = u64;
