//! SMB 3.x encryption (MS-SMB2 3.3.4.1.4 and 3.3.5.2.1.1): the transform
//! header, per-session keys, and wrapping whole (compound) messages.

use copyless_crypto::{Cipher, CipherId};
use copyless_proto::header::TRANSFORM_PROTOCOL_ID;
use copyless_proto::Reader;

pub const TRANSFORM_HEADER_LEN: usize = 52;
const FLAG_ENCRYPTED: u16 = 0x0001;

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
    /// Client to server.
    pub decrypt: Cipher,
    /// Counter half of our nonces: never repeats within a session.
    pub nonce_counter: u64,
}

impl SessionCiphers {
    pub fn derive(
        dialect: u16,
        id: CipherId,
        session_key: &[u8; 16],
        preauth: &[u8; 64],
    ) -> Option<SessionCiphers> {
        let (c2s, s2c) =
            copyless_crypto::session_keys::cipher_keys(dialect, id, session_key, preauth)?;
        Some(SessionCiphers {
            encrypt: Cipher::new(id, &s2c)?,
            decrypt: Cipher::new(id, &c2s)?,
            nonce_counter: 0,
        })
    }

    /// The same keys from the client's side (for the in-memory test
    /// client): it encrypts what the server decrypts.
    pub fn derive_for_client(
        dialect: u16,
        id: CipherId,
        session_key: &[u8; 16],
        preauth: &[u8; 64],
    ) -> Option<SessionCiphers> {
        let mut c = SessionCiphers::derive(dialect, id, session_key, preauth)?;
        std::mem::swap(&mut c.encrypt, &mut c.decrypt);
        Some(c)
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
        out.extend_from_slice(&TRANSFORM_PROTOCOL_ID);
        out.extend_from_slice(&[0u8; 16]);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&(msg.len() as u32).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&FLAG_ENCRYPTED.to_le_bytes());
        out.extend_from_slice(&session_id.to_le_bytes());
        out.extend_from_slice(msg);
        let (head, body) = out.split_at_mut(TRANSFORM_HEADER_LEN);
        let tag = self.encrypt.encrypt(&nonce[..n], &head[20..], body);
        out[4..20].copy_from_slice(&tag);
        out
    }
}

/// The parts of a received transform header.
pub struct Transform<'a> {
    pub session_id: u64,
    pub tag: [u8; 16],
    pub nonce: &'a [u8],
    pub aad: &'a [u8],
    pub body: &'a [u8],
}

pub fn parse(msg: &[u8]) -> Option<Transform<'_>> {
    let mut r = Reader::new(msg);
    if r.array::<4>().ok()? != TRANSFORM_PROTOCOL_ID {
        return None;
    }
    let tag = r.array::<16>().ok()?;
    let nonce = r.bytes(16).ok()?;
    let size = r.u32().ok()? as usize;
    r.skip(2).ok()?;
    let flags = r.u16().ok()?;
    let session_id = r.u64().ok()?;
    let body = msg.get(TRANSFORM_HEADER_LEN..)?;
    if flags != FLAG_ENCRYPTED || size != body.len() || size == 0 {
        return None;
    }
    Some(Transform {
        session_id,
        tag,
        nonce,
        aad: &msg[20..TRANSFORM_HEADER_LEN],
        body,
    })
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
            let mut c = SessionCiphers::derive(DIALECT_311, id, &key, &[1; 64]).unwrap();
            let sealed = c.seal(42, b"hello smb message", [9; 8]);
            let t = parse(&sealed).unwrap();
            assert_eq!(t.session_id, 42);
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
            let mut body = t.body.to_vec();
            assert!(client.decrypt(&t.nonce[..client.nonce_len()], t.aad, &mut body, &t.tag));
            assert_eq!(body, b"hello smb message");
            let mut bad = sealed.clone();
            bad[60] ^= 1;
            let t = parse(&bad).unwrap();
            let mut body = t.body.to_vec();
            assert!(!client.decrypt(&t.nonce[..client.nonce_len()], t.aad, &mut body, &t.tag));
        }
        assert!(parse(&[0xFD, b'S', b'M', b'B']).is_none());
    }
}
