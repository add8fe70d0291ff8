//! Authentication for copyless: the NTLMv2 acceptor inside SPNEGO
//! (MS-SPNG, MS-NLMP), its client-side counterpart (used by the benchmark
//! client), the Kerberos service side (keytab, AP exchange), the user
//! store, and the Unix accounts its users are linked to.
//!
//! Everything here is sans-IO except [`UserStore::load`],
//! [`UserStore::save`], [`LiveUsers`]' loading and refreshing, and the
//! account lookups of [`unix`]: the acceptor takes its randomness and clock
//! from the caller, so it can be driven in memory by tests.

mod acceptor;
mod der;
pub mod initiator;
pub mod kerberos;
pub mod keytab;
mod live;
mod ntlm;
mod spnego;
mod text;
pub mod unix;
pub mod userstore;

#[cfg(test)]
mod tests;

pub use acceptor::{
    negotiate_hint, smb_session_key, Acceptor, AuthError, Authenticated, Claim, Mechanism,
    ServerInfo, Step,
};
pub use initiator::{ClientIdentity, Initiator, InitiatorRandom, InitiatorStep};
pub use live::{LiveUsers, Refreshed};
pub use unix::{UnixAccount, UnixError};
pub use userstore::{Insecurity, UserError, UserStore};

/// MD4 of the UTF-16LE password.
pub fn nt_hash(password: &str) -> [u8; 16] {
    use md4::{Digest, Md4};
    let utf16 = zeroize::Zeroizing::new(text::utf16le(password));
    Md4::digest(utf16.as_slice()).into()
}

/// Looks users up by name, case-insensitively (Windows user names are).
pub trait Credentials: Send + Sync {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]>;

    /// A number that grows whenever the set of users, their hashes or
    /// their Unix accounts changed, so that a caller can notice a change
    /// cheaply (and then ask [`Credentials::nt_hash`] about the users it
    /// cares about). Constant for a set of users that never changes.
    fn generation(&self) -> u64 {
        0
    }

    /// The Unix account `user` acts as, when it has one: looked up ahead
    /// of time, so that asking never waits on the system's databases.
    fn unix_account(&self, _user: &str) -> Option<std::sync::Arc<UnixAccount>> {
        None
    }
}
