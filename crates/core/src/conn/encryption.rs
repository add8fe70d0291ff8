//! SMB 3.x encryption (MS-SMB2 3.3.4.1.4 and 3.3.5.2.1.1): the transform
//! header, per-session keys, and wrapping whole (compound) messages.

use std::sync::Arc;

use copyless_crypto::{Cipher, CipherId};
use copyless_proto::transform::{
    Sealed, TransformHeader, TRANSFORM_AAD_RANGE, TRANSFORM_FLAG_ENCRYPTED, TRANSFORM_HEADER_LEN,
};

/// Ciphers in the server's order of preference (3.1.1 negotiation).
pub const PREFERENCE: [CipherId; 4] = [
    CipherId::Aes128Gcm,
    CipherId::Aes128Ccm,
    CipherId::Aes256Gcm,
    CipherId::Aes256Ccm,
];

/// A session's two directions.
pub struct SessionCiphers {
    /// Server to client.
    pub encrypt: Cipher,
    /// Client to server; shared with the session's other channels, which
    /// open what the client seals on them.
    pub decrypt: Arc<Cipher>,
    /// Counter half of our nonces: never repeats within a session.
    pub nonce_counter: u64,
}

impl SessionCiphers {
    /// From Session.SessionKey and Session.FullSessionKey (see
    /// [`copyless_crypto::session_keys::cipher_keys`]).
    pub fn derive(
        dialect: u16,
        id: CipherId,
        session_key: &[u8; 16],
        full_key: &[u8],
        preauth: &[u8; 64],
    ) -> Option<SessionCiphers> {
        let (c2s, s2c) = copyless_crypto::session_keys::cipher_keys(
            dialect,
            id,
            session_key,
            full_key,
            preauth,
        )?;
        SessionCiphers::with_keys(id, &s2c, &c2s)
    }

    /// The same keys from the client's side (for the in-memory test
    /// client): it encrypts with the server's decryption key, and the
    /// other way round.
    pub fn derive_for_client(
        dialect: u16,
        id: CipherId,
        session_key: &[u8; 16],
        full_key: &[u8],
        preauth: &[u8; 64],
    ) -> Option<SessionCiphers> {
        let server = SessionCiphers::derive(dialect, id, session_key, full_key, preauth)?;
        Some(SessionCiphers {
            encrypt: Arc::try_unwrap(server.decrypt).ok()?,
            decrypt: Arc::new(server.encrypt),
            nonce_counter: 0,
        })
    }

    fn with_keys(id: CipherId, encrypt: &[u8], decrypt: &[u8]) -> Option<SessionCiphers> {
        Some(SessionCiphers {
            encrypt: Cipher::new(id, encrypt)?,
            decrypt: Arc::new(Cipher::new(id, decrypt)?),
            nonce_counter: 0,
        })
    }

    /// Wraps `msg` (one SMB2 message or compound) in a transform header.
    /// `salt` fills the nonce bytes the counter does not.
    pub fn seal(&mut self, session_id: u64, msg: &[u8], salt: [u8; 8]) -> Vec<u8> {
        self.nonce_counter += 1;
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&self.nonce_counter.to_le_bytes());
        let n = self.encrypt.nonce_len();
        nonce[8..n].copy_from_slice(&salt[..n - 8]);
        let mut out = Vec::with_capacity(TRANSFORM_HEADER_LEN + msg.len());
        TransformHeader {
            signature: [0; 16],
            nonce,
            // Replies stay below the 24-bit transport limit.
            original_message_size: msg.len() as u32,
            flags: TRANSFORM_FLAG_ENCRYPTED,
            session_id,
        }
        .write(&mut out);
        out.extend_from_slice(msg);
        let (head, body) = out.split_at_mut(TRANSFORM_HEADER_LEN);
        let tag = self
            .encrypt
            .encrypt(&nonce[..n], &head[TRANSFORM_AAD_RANGE], body);
        out[4..20].copy_from_slice(&tag);
        out
    }

    /// The plaintext of a received transformed message, or None when it
    /// does not decrypt.
    pub fn open(&self, sealed: &Sealed<'_>) -> Option<Vec<u8>> {
        let mut body = sealed.body.to_vec();
        self.decrypt_body(&sealed.header, sealed.aad, &mut body)
            .then_some(body)
    }

    /// Decrypts a received transformed message where it lies: the
    /// plaintext takes the place of the ciphertext, after the transform
    /// header. False when it is no transformed message or does not
    /// decrypt; its bytes are then of no use.
    pub fn open_in_place(&self, frame: &mut [u8]) -> bool {
        open_in_place(&self.decrypt, frame)
    }

    fn decrypt_body(&self, h: &TransformHeader, aad: &[u8], body: &mut [u8]) -> bool {
        decrypt_body(&self.decrypt, h, aad, body)
    }
}

/// [`SessionCiphers::open_in_place`] with the session's decryption key
/// alone, as a bound channel holds it.
pub fn open_in_place(decrypt: &Cipher, frame: &mut [u8]) -> bool {
    let Ok(sealed) = Sealed::parse(frame) else {
        return false;
    };
    let header = sealed.header;
    let mut aad = [0u8; 32];
    aad.copy_from_slice(sealed.aad);
    decrypt_body(decrypt, &header, &aad, &mut frame[TRANSFORM_HEADER_LEN..])
}

fn decrypt_body(decrypt: &Cipher, h: &TransformHeader, aad: &[u8], body: &mut [u8]) -> bool {
    let n = decrypt.nonce_len();
    decrypt.decrypt(&h.nonce[..n], aad, body, &h.signature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_crypto::{kdf128, kdf256};
    use copyless_proto::negotiate::DIALECT_311;

    #[test]
    fn seal_then_open() {
        let key = [7u8; 16];
        for id in PREFERENCE {
            let mut c = SessionCiphers::derive(DIALECT_311, id, &key, &key, &[1; 64]).unwrap();
            let sealed = c.seal(42, b"hello smb message", [9; 8]);
            let t = Sealed::parse(&sealed).unwrap();
            assert_eq!(t.header.session_id, 42);
            // The client's key for this direction is our encryption key.
            let client = Cipher::new(
                id,
                &if matches!(id, CipherId::Aes256Ccm | CipherId::Aes256Gcm) {
                    kdf256(&key, b"SMBS2CCipherKey\0", &[1; 64]).to_vec()
                } else {
                    kdf128(&key, b"SMBS2CCipherKey\0", &[1; 64]).to_vec()
                },
            )
            .unwrap();
            let n = client.nonce_len();
            let mut body = t.body.to_vec();
            assert!(client.decrypt(&t.header.nonce[..n], t.aad, &mut body, &t.header.signature));
            assert_eq!(body, b"hello smb message");
            // And the client's own view of the session opens it.
            let other =
                SessionCiphers::derive_for_client(DIALECT_311, id, &key, &key, &[1; 64]).unwrap();
            assert_eq!(other.open(&t).unwrap(), b"hello smb message");
            let mut bad = sealed.clone();
            bad[60] ^= 1;
            assert!(other.open(&Sealed::parse(&bad).unwrap()).is_none());
        }
    }
}
