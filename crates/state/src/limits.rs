//! The caps on what clients may hold, which a reload (SIGHUP) can change
//! while the server runs.
//!
//! - Counts (sessions per connection, tree connects per session, opens,
//!   listing bytes) are checked against the values in force at each check:
//!   lowering one refuses what would pass it from then on, and takes
//!   nothing away that is already held.
//! - What a connection was told in NEGOTIATE or is framed by (message and
//!   I/O sizes, credits) is fixed when the connection is made: a client
//!   that was told it may write 8 MiB must not be cut off for doing so.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest SMB2 message read from a client, header included; the
    /// engine frames by it.
    pub max_message_size: u32,
    /// The largest message read until a session is authenticated.
    pub max_preauth_message_size: u32,
    /// Largest READ, WRITE and transaction (SMB 2.1 and later).
    pub max_io_size: u32,
    pub max_credits: u16,
    pub max_sessions: u32,
    /// Tree connects per session.
    pub max_tree_connects: u32,
    /// Opens per session.
    pub max_open_files: u32,
    pub max_open_files_per_connection: u32,
    pub max_open_files_per_user: u32,
    pub max_open_files_total: u32,
    /// Bytes of directory listings an enumeration-heavy connection may
    /// hold (see handlers/dir.rs)...
    pub max_listing_bytes: usize,
    /// ...one user over all its connections, and the whole server
    /// (listing_ledger.rs).
    pub max_listing_bytes_per_user: usize,
    pub max_listing_bytes_total: usize,
}
