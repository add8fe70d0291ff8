//! The session's keys from the client's side (MS-SMB2 3.2.5.3.1) and the
//! encryption of whole frames in a TRANSFORM_HEADER (3.2.4.1.8, 3.2.5.1.1.1).

use copyless_crypto::{Cipher, CipherId};
use copyless_proto::transform::{
    TransformHeader, TRANSFORM_AAD_RANGE, TRANSFORM_FLAG_ENCRYPTED, TRANSFORM_HEADER_LEN,
};

use super::Error;

pub use copyless_crypto::session_keys::signing_key;

/// The client's (encrypt, decrypt) pair: it encrypts with the server's
/// DecryptionKey ("ServerIn") and decrypts with its EncryptionKey.
pub struct Crypt {
    encrypt: Cipher,
    decrypt: Cipher,
    session_id: u64,
    /// Nonces must never repeat under one key: a random prefix and a counter.
    nonce_prefix: [u8; 4],
    counter: u64,
}

impl Crypt {
    pub fn new(
        dialect: u16,
        cipher: CipherId,
        session_key: &[u8; 16],
        preauth: &[u8; 64],
        session_id: u64,
        nonce_prefix: [u8; 4],
    ) -> Result<Crypt, Error> {
        let (c2s, s2c) = copyless_crypto::session_keys::cipher_keys(
            dialect,
            cipher,
            session_key,
            session_key,
            preauth,
        )
        .ok_or_else(|| Error::Protocol("encryption needs SMB 3".into()))?;
        let bad = || Error::Protocol("bad cipher key".into());
        Ok(Crypt {
            encrypt: Cipher::new(cipher, &c2s).ok_or_else(bad)?,
            decrypt: Cipher::new(cipher, &s2c).ok_or_else(bad)?,
            session_id,
            nonce_prefix,
            counter: 0,
        })
    }

    /// Encrypts `frame[4 + TRANSFORM_HEADER_LEN..]` (the plaintext message
    /// or compound, placed there by the caller) and fills in the transform
    /// header before it. The first 4 bytes are the caller's framing.
    pub fn seal(&mut self, frame: &mut [u8]) -> Result<(), Error> {
        let start = 4 + TRANSFORM_HEADER_LEN;
        let plain_len = frame
            .len()
            .checked_sub(start)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::Protocol("message too large to encrypt".into()))?;
        self.counter += 1;
        let mut nonce = [0u8; 16];
        nonce[..4].copy_from_slice(&self.nonce_prefix);
        // 4 + 7 bytes fit the 11-byte CCM nonce; GCM uses 12.
        nonce[4..11].copy_from_slice(&self.counter.to_le_bytes()[..7]);
        let th = TransformHeader {
            signature: [0; 16],
            nonce,
            original_message_size: plain_len,
            flags: TRANSFORM_FLAG_ENCRYPTED,
            session_id: self.session_id,
        };
        let mut head = Vec::with_capacity(TRANSFORM_HEADER_LEN);
        th.write(&mut head);
        let (prefix, body) = frame.split_at_mut(start);
        prefix[4..].copy_from_slice(&head);
        let tag = self
            .encrypt
            .encrypt(&nonce, &head[TRANSFORM_AAD_RANGE], body);
        prefix[8..24].copy_from_slice(&tag);
        Ok(())
    }

    /// Decrypts a received transformed frame in place; returns the
    /// plaintext (the frame without its transform header).
    pub fn open(&self, mut frame: Vec<u8>) -> Result<Vec<u8>, Error> {
        let th = TransformHeader::parse(&frame).map_err(Error::Malformed)?;
        if th.session_id != self.session_id {
            return Err(Error::Protocol(
                "encrypted reply for another session".into(),
            ));
        }
        let aad = frame
            .get(TRANSFORM_AAD_RANGE)
            .map(<[u8]>::to_vec)
            .ok_or(Error::Malformed(copyless_proto::Error("truncated")))?;
        let body = &mut frame[TRANSFORM_HEADER_LEN..];
        if th.original_message_size as usize != body.len() {
            return Err(Error::Protocol("transform size mismatch".into()));
        }
        if !self.decrypt.decrypt(&th.nonce, &aad, body, &th.signature) {
            return Err(Error::Protocol("reply failed to decrypt".into()));
        }
        frame.drain(..TRANSFORM_HEADER_LEN);
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_crypto::{SigningAlgorithm, SigningKey};
    use copyless_proto::negotiate::DIALECT_311;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn smb311_signing_key_matches_microsoft_example() {
        // "SMB 2 and SMB 3 security in Windows 10: the anatomy of signing
        // and cryptographic keys", the 3.1.1 example.
        let session_key: [u8; 16] = hex("270E1BA896585EEB7AF3472D3B4C75A7").try_into().unwrap();
        let preauth: [u8; 64] = hex(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB79
             28622DDDAD522D9751640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
        )
        .try_into()
        .unwrap();
        let ours = signing_key(
            DIALECT_311,
            SigningAlgorithm::AesCmac,
            &session_key,
            &preauth,
        );
        let reference = SigningKey::new(
            SigningAlgorithm::AesCmac,
            hex("73FE7A9A77BEF0BDE49C650D8CCB5F76").try_into().unwrap(),
        );
        let msg = [0x5au8; 100];
        assert_eq!(ours.signature(&msg), reference.signature(&msg));
    }

    #[test]
    fn sealed_frames_open_with_the_peer_keys() {
        let key = [7u8; 16];
        let preauth = [3u8; 64];
        for cipher in [
            CipherId::Aes128Gcm,
            CipherId::Aes128Ccm,
            CipherId::Aes256Gcm,
            CipherId::Aes256Ccm,
        ] {
            let mut client = Crypt::new(DIALECT_311, cipher, &key, &preauth, 42, [1; 4]).unwrap();
            // The server's view: its keys are the client's, swapped.
            let server = Crypt {
                encrypt: Crypt::new(DIALECT_311, cipher, &key, &preauth, 42, [0; 4])
                    .unwrap()
                    .decrypt,
                decrypt: Crypt::new(DIALECT_311, cipher, &key, &preauth, 42, [0; 4])
                    .unwrap()
                    .encrypt,
                session_id: 42,
                nonce_prefix: [2; 4],
                counter: 0,
            };
            let mut frame = vec![0u8; 4 + TRANSFORM_HEADER_LEN];
            frame.extend_from_slice(b"an SMB2 message, pretend");
            client.seal(&mut frame).unwrap();
            assert_ne!(&frame[56..], b"an SMB2 message, pretend");
            let wire = frame[4..].to_vec();
            assert_eq!(
                server.open(wire.clone()).unwrap(),
                b"an SMB2 message, pretend"
            );

            let mut damaged = wire.clone();
            let last = damaged.len() - 1;
            damaged[last] ^= 1;
            assert!(server.open(damaged).is_err());
            // Our own keys cannot open what we sent.
            assert!(client.open(wire.clone()).is_err());
            assert!(server.open(wire[..40].to_vec()).is_err());
        }
    }
}
