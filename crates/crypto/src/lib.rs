//! SMB 2/3 message signing, key derivation, the 3.1.1 pre-authentication
//! integrity hash and SMB 3 encryption.
//!
//! Only glue lives here: every primitive (HMAC-SHA256, SHA-512, AES-CMAC,
//! AES-GCM/GMAC) comes from `aws-lc-rs`, and AES-CCM from RustCrypto `ccm`.
//! Key material is held only inside those libraries' key objects, which wipe
//! their memory when dropped.

mod cipher;
mod kdf;
mod preauth;
pub mod session_keys;
mod signing;

pub use cipher::{Cipher, CipherId};
pub use kdf::{kdf128, kdf256};
pub use preauth::PreauthHash;
pub use signing::{SigningAlgorithm, SigningKey};

#[cfg(test)]
mod testutil;
