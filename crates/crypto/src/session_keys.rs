//! The keys of an SMB2/3 session derived from its session key, per dialect
//! (MS-SMB2 3.3.5.5.3 for the server, 3.2.5.3.1 for the client). Both sides
//! derive the same keys; they differ only in which direction they use.

use crate::{kdf128, kdf256, CipherId, SigningAlgorithm, SigningKey};

const DIALECT_300: u16 = 0x0300;
const DIALECT_302: u16 = 0x0302;
const DIALECT_311: u16 = 0x0311;

/// The signing key: the session key itself with HMAC-SHA256 for 2.x,
/// AES-CMAC with a fixed context for 3.0 and 3.0.2, and the negotiated
/// algorithm with the pre-authentication hash as context for 3.1.1.
pub fn signing_key(
    dialect: u16,
    algorithm: SigningAlgorithm,
    session_key: &[u8; 16],
    preauth: &[u8; 64],
) -> SigningKey {
    match dialect {
        DIALECT_311 => SigningKey::new(algorithm, kdf128(session_key, b"SMBSigningKey\0", preauth)),
        DIALECT_300 | DIALECT_302 => SigningKey::new(
            SigningAlgorithm::AesCmac,
            kdf128(session_key, b"SMB2AESCMAC\0", b"SmbSign\0"),
        ),
        _ => SigningKey::new(SigningAlgorithm::HmacSha256, *session_key),
    }
}

/// Encryption keys as (client to server, server to client); None before
/// SMB 3.0, which has no encryption. AES-256 keys come from `full_key`,
/// the whole key the authentication gave (Session.FullSessionKey, 32
/// bytes for Kerberos with AES-256), AES-128 keys from `session_key`, its
/// first 16 bytes (MS-SMB2 3.3.5.5.3). For NTLM the two are the same.
pub fn cipher_keys(
    dialect: u16,
    cipher: CipherId,
    session_key: &[u8; 16],
    full_key: &[u8],
    preauth: &[u8; 64],
) -> Option<(Vec<u8>, Vec<u8>)> {
    let derive = |label: &[u8], context: &[u8]| {
        if cipher.key_len() == 32 {
            kdf256(full_key, label, context).to_vec()
        } else {
            kdf128(session_key, label, context).to_vec()
        }
    };
    match dialect {
        DIALECT_311 => Some((
            derive(b"SMBC2SCipherKey\0", preauth),
            derive(b"SMBS2CCipherKey\0", preauth),
        )),
        DIALECT_300 | DIALECT_302 => Some((
            derive(b"SMB2AESCCM\0", b"ServerIn \0"),
            derive(b"SMB2AESCCM\0", b"ServerOut\0"),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_per_dialect() {
        let sk = [7u8; 16];
        let pre = [1u8; 64];
        assert_eq!(
            signing_key(0x0202, SigningAlgorithm::AesGmac, &sk, &pre).algorithm(),
            SigningAlgorithm::HmacSha256
        );
        assert_eq!(
            signing_key(0x0300, SigningAlgorithm::AesGmac, &sk, &pre).algorithm(),
            SigningAlgorithm::AesCmac
        );
        assert_eq!(
            signing_key(0x0311, SigningAlgorithm::AesGmac, &sk, &pre).algorithm(),
            SigningAlgorithm::AesGmac
        );
        assert!(cipher_keys(0x0210, CipherId::Aes128Ccm, &sk, &sk, &pre).is_none());
        let (c2s, s2c) = cipher_keys(0x0311, CipherId::Aes256Gcm, &sk, &sk, &pre).unwrap();
        assert_eq!((c2s.len(), s2c.len()), (32, 32));
        assert_ne!(c2s, s2c);
        assert_eq!(c2s, kdf256(&sk, b"SMBC2SCipherKey\0", &pre).to_vec());
        let (c2s, _) = cipher_keys(0x0302, CipherId::Aes128Ccm, &sk, &sk, &pre).unwrap();
        assert_eq!(c2s, kdf128(&sk, b"SMB2AESCCM\0", b"ServerIn \0").to_vec());
    }

    #[test]
    fn aes256_keys_come_from_the_full_key() {
        let full: Vec<u8> = (0..32).collect();
        let short: [u8; 16] = full[..16].try_into().unwrap();
        let pre = [3u8; 64];
        let (c2s, _) = cipher_keys(0x0311, CipherId::Aes256Gcm, &short, &full, &pre).unwrap();
        assert_eq!(c2s, kdf256(&full, b"SMBC2SCipherKey\0", &pre).to_vec());
        assert_ne!(c2s, kdf256(&short, b"SMBC2SCipherKey\0", &pre).to_vec());
        let (c2s, _) = cipher_keys(0x0311, CipherId::Aes128Gcm, &short, &full, &pre).unwrap();
        assert_eq!(c2s, kdf128(&short, b"SMBC2SCipherKey\0", &pre).to_vec());
    }
}
