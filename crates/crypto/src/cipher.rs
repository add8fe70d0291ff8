//! SMB 3 encryption (MS-SMB2 3.1.4.3): AES-CCM and AES-GCM over the message
//! that follows an SMB2 TRANSFORM_HEADER.

use aes::{Aes128, Aes256};
use aws_lc_rs::aead;
use ccm::aead::{AeadInOut, KeyInit};
use ccm::consts::{U11, U16};

type Aes128Ccm = ccm::Ccm<Aes128, U16, U11>;
type Aes256Ccm = ccm::Ccm<Aes256, U16, U11>;

const CCM_NONCE_LEN: usize = 11;
const GCM_NONCE_LEN: usize = 12;

/// Cipher ids of the 3.1.1 ENCRYPTION_CAPABILITIES context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CipherId {
    Aes128Ccm = 1,
    Aes128Gcm = 2,
    Aes256Ccm = 3,
    Aes256Gcm = 4,
}

impl CipherId {
    /// The wire id (ENCRYPTION_CAPABILITIES.Ciphers entry).
    pub fn id(self) -> u16 {
        self as u16
    }

    /// The cipher for a wire id, or `None` if unknown.
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            1 => Some(CipherId::Aes128Ccm),
            2 => Some(CipherId::Aes128Gcm),
            3 => Some(CipherId::Aes256Ccm),
            4 => Some(CipherId::Aes256Gcm),
            _ => None,
        }
    }

    /// Key length in bytes: 16 for the AES-128 ciphers, 32 for AES-256.
    pub fn key_len(self) -> usize {
        match self {
            CipherId::Aes128Ccm | CipherId::Aes128Gcm => 16,
            CipherId::Aes256Ccm | CipherId::Aes256Gcm => 32,
        }
    }

    /// Nonce length: 11 for CCM, 12 for GCM.
    pub fn nonce_len(self) -> usize {
        match self {
            CipherId::Aes128Ccm | CipherId::Aes256Ccm => CCM_NONCE_LEN,
            CipherId::Aes128Gcm | CipherId::Aes256Gcm => GCM_NONCE_LEN,
        }
    }
}

/// The key schedules. aws-lc cleanses its AEAD context when freed, and `aes`
/// (built with its `zeroize` feature) wipes its round keys on drop.
enum Engine {
    Gcm(aead::LessSafeKey),
    Ccm128(Box<Aes128Ccm>),
    Ccm256(Box<Aes256Ccm>),
}

/// An encryption or decryption key (Session.EncryptionKey or DecryptionKey)
/// bound to its cipher.
pub struct Cipher {
    id: CipherId,
    engine: Engine,
}

impl Cipher {
    /// `None` if `key` is not 16 bytes for an AES-128 cipher or 32 bytes for AES-256.
    pub fn new(id: CipherId, key: &[u8]) -> Option<Cipher> {
        if key.len() != id.key_len() {
            return None;
        }
        let engine = match id {
            CipherId::Aes128Gcm => Engine::Gcm(aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::AES_128_GCM, key).ok()?,
            )),
            CipherId::Aes256Gcm => Engine::Gcm(aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::AES_256_GCM, key).ok()?,
            )),
            CipherId::Aes128Ccm => Engine::Ccm128(Box::new(Aes128Ccm::new_from_slice(key).ok()?)),
            CipherId::Aes256Ccm => Engine::Ccm256(Box::new(Aes256Ccm::new_from_slice(key).ok()?)),
        };
        Some(Cipher { id, engine })
    }

    pub fn id(&self) -> CipherId {
        self.id
    }

    /// Nonce length: 11 for CCM, 12 for GCM.
    pub fn nonce_len(&self) -> usize {
        self.id.nonce_len()
    }

    /// Encrypts `buf` in place; returns the 16-byte tag. `aad` is the
    /// transform header from Nonce to the end (MS-SMB2 3.1.4.3: bytes 20..52
    /// of the 52-byte SMB2 TRANSFORM_HEADER).
    ///
    /// Only the first [`Cipher::nonce_len`] bytes of `nonce` are used, so the
    /// whole 16-byte Nonce field of the transform header may be passed.
    ///
    /// # Panics
    /// If `nonce` is shorter than [`Cipher::nonce_len`], or `buf` is longer
    /// than the cipher allows (4 GiB for CCM with an 11-byte nonce): both are
    /// bugs of the caller, which builds the message it encrypts.
    pub fn encrypt(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let nonce = nonce
            .get(..self.nonce_len())
            .expect("encryption nonce shorter than the cipher's nonce length");
        match &self.engine {
            Engine::Gcm(key) => {
                let nonce =
                    aead::Nonce::try_assume_unique_for_key(nonce).expect("GCM nonce is 12 bytes");
                let tag = key
                    .seal_in_place_separate_tag(nonce, aead::Aad::from(aad), buf)
                    .expect("AES-GCM message within size limit");
                tag_bytes(tag.as_ref())
            }
            Engine::Ccm128(key) => ccm_seal(key.as_ref(), nonce, aad, buf),
            Engine::Ccm256(key) => ccm_seal(key.as_ref(), nonce, aad, buf),
        }
    }

    /// Decrypts in place; false if the tag does not match (buf contents then
    /// unspecified), or if `nonce` is shorter than [`Cipher::nonce_len`].
    /// Only the first [`Cipher::nonce_len`] bytes of `nonce` are used.
    pub fn decrypt(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8; 16]) -> bool {
        let Some(nonce) = nonce.get(..self.nonce_len()) else {
            return false;
        };
        match &self.engine {
            Engine::Gcm(key) => {
                let Ok(nonce) = aead::Nonce::try_assume_unique_for_key(nonce) else {
                    return false;
                };
                key.open_in_place_separate_tag(nonce, aead::Aad::from(aad), tag, buf)
                    .is_ok()
            }
            Engine::Ccm128(key) => ccm_open(key.as_ref(), nonce, aad, buf, tag),
            Engine::Ccm256(key) => ccm_open(key.as_ref(), nonce, aad, buf, tag),
        }
    }
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

fn tag_bytes(tag: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&tag[..16]);
    out
}

fn ccm_seal<C>(key: &C, nonce: &[u8], aad: &[u8], buf: &mut [u8]) -> [u8; 16]
where
    C: AeadInOut<NonceSize = U11, TagSize = U16>,
{
    let nonce = ccm::aead::Nonce::<C>::try_from(nonce).expect("CCM nonce is 11 bytes");
    let tag = key
        .encrypt_inout_detached(&nonce, aad, buf.into())
        .expect("AES-CCM message within size limit");
    tag_bytes(&tag)
}

fn ccm_open<C>(key: &C, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8; 16]) -> bool
where
    C: AeadInOut<NonceSize = U11, TagSize = U16>,
{
    let Ok(nonce) = ccm::aead::Nonce::<C>::try_from(nonce) else {
        return false;
    };
    let tag = ccm::aead::Tag::<C>::from(*tag);
    key.decrypt_inout_detached(&nonce, aad, buf.into(), &tag)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    const ALL: [CipherId; 4] = [
        CipherId::Aes128Ccm,
        CipherId::Aes128Gcm,
        CipherId::Aes256Ccm,
        CipherId::Aes256Gcm,
    ];

    /// Splits a whole transformed message (52-byte TRANSFORM_HEADER, then
    /// ciphertext) into (signature, nonce field, aad, ciphertext).
    fn split_transform(message: &[u8]) -> ([u8; 16], Vec<u8>, Vec<u8>, Vec<u8>) {
        let tag: [u8; 16] = message[4..20].try_into().expect("16");
        (
            tag,
            message[20..36].to_vec(),
            message[20..52].to_vec(),
            message[52..].to_vec(),
        )
    }

    // From Microsoft's "SMB 3.1.1 Encryption in Windows 10", appendix A.1
    // (AES-128-GCM) and A.2 (AES-128-CCM): a READ request encrypted by the
    // client, and the READ response the server sent back.

    const GCM_CLIENT_KEY: &str = "A2F5E80E5D59103034F32E52F698E5EC";
    const GCM_SERVER_KEY: &str = "748C50868C90F302962A5C35F5F9A8BF";
    const GCM_READ_REQUEST: &str = "
        FE534D4240000100000000000800010008000000000000000600000000000000FFFE000001000000
        25000000001000000000000000000000000000000000000031000000170000000000000000000000
        060000000400000001000000040000000000000000000000000000000000000000";
    const GCM_READ_REQUEST_TRANSFORMED: &str = "
        FD534D426DAC0B6FD85A3ED42BB917DA38FE0386D7AA8C6D36859243B715E0A60000000071000000
        00000100250000000010000088A47BF09CA3C3141CDD7306BE9D9475AB24FCCB833D77461C041F8F
        B983D0C188F0729272B31D9D3D0DC6B687C069EEE0CC8EACA2C536D019ACC9E185D1EB630E0FCB79
        3EEECEB06D82A1D77706E700DBEBFB4FEB54D7AD2D97E7288804F90757FE4D08D6A84A3FF433E745
        1E768E4699";
    const GCM_READ_RESPONSE_TRANSFORMED: &str = "
        FD534D427F714B3B9D8FA1198584E71C2BAA1CB6E16831DD2E8EB7B4000000000000000067000000
        000001002500000000100000FECEDF4D03BB11A6CC5D8A53BE33D6D8701986342B4197D306E16F9C
        BB218E92F7F8281F51CE68BB85A20D87DE90EBBF80538066D1C37513C0A58D70936D537B624F5500
        202A612B6CD30D448A82791A0B2E049ED512AFAEFB06E98AB3D6F931D7D50DB2DBD36A";
    const GCM_READ_RESPONSE: &str = "
        FE534D4240000100000000000800010001000000000000000600000000000000FFFE000001000000
        25000000001000000000000000000000000000000000000011005000170000000000000000000000
        536D623320656E6372797074696F6E2074657374696E67";

    const CCM_CLIENT_KEY: &str = "DFAAA31AAE40A2485D47AC4DF09FDA1D";
    const CCM_SERVER_KEY: &str = "95C544AEF6072680DA1CE49A68A97FA6";
    const CCM_READ_REQUEST: &str = "
        FE534D4240000100000000000800010008000000000000000600000000000000FFFE000001000000
        21000000001000000000000000000000000000000000000031000000170000000000000000000000
        050000000400000001000000040000000000000000000000000000000000000000";
    const CCM_READ_REQUEST_TRANSFORMED: &str = "
        FD534D4235BF9600C841F0CDA9BD1BC3727B7E36A0F92E964EDC3049B86E19000000000071000000
        000001002100000000100000C4CCD3EB483A0638E69C99E391E7F64BCC10D6BEE46FEEA258C4BCAF
        792CB5A6E69283924081806DAB64827E9D14A5345D5221AB6DAFCB0E89FC2606B63D92163F4F6C93
        D1213D86ABF123B93EAD3AEF9A3471EFD68A423A00A6E0064D9AE3C842EFFFAD236A3BF25D37F4CD
        054C97DE18";
    const CCM_READ_RESPONSE_TRANSFORMED: &str = "
        FD534D42E241A13C7E1EE42ECF1FD69F3B8668C6DA6831DD2E8EB7B4000000000000000067000000
        00000100210000000010000015D67234FC8358D7BA1BF037ABC8EFD41A0A8F9BB04B16DEB1E85606
        BD8C2770823FE6239A286CB3E3D5762ABBD53FD8DE11ED491FE905E146A8FFCE09414AB741103D63
        7E28B19C6BA759B399DCC21FAE24CF2A455A13B215FC2857ABB513927F9F271D1C208B";
    const CCM_READ_RESPONSE: &str = "
        FE534D4240000100000000000800010001000000000000000600000000000000FFFE000001000000
        21000000001000000000000000000000000000000000000011005000170000000000000000000000
        536D623320656E6372797074696F6E2074657374696E67";

    fn check_encrypt_vector(id: CipherId, key: &str, plain: &str, transformed: &str) {
        let cipher = Cipher::new(id, &hex(key)).expect("key");
        let (tag, nonce, aad, ciphertext) = split_transform(&hex(transformed));
        let mut buf = hex(plain);
        // Pass only the cipher's nonce, as the article lists it.
        let got = cipher.encrypt(&nonce[..cipher.nonce_len()], &aad, &mut buf);
        assert_eq!(buf, ciphertext, "{id:?} ciphertext");
        assert_eq!(got, tag, "{id:?} tag");
    }

    fn check_decrypt_vector(id: CipherId, key: &str, transformed: &str, plain: &str) {
        let cipher = Cipher::new(id, &hex(key)).expect("key");
        let (tag, nonce, aad, mut buf) = split_transform(&hex(transformed));
        // Pass the whole 16-byte Nonce field, as a receiver would.
        assert!(cipher.decrypt(&nonce, &aad, &mut buf, &tag), "{id:?}");
        assert_eq!(buf, hex(plain), "{id:?} plaintext");
    }

    #[test]
    fn aes128_gcm_matches_windows() {
        check_encrypt_vector(
            CipherId::Aes128Gcm,
            GCM_CLIENT_KEY,
            GCM_READ_REQUEST,
            GCM_READ_REQUEST_TRANSFORMED,
        );
        check_decrypt_vector(
            CipherId::Aes128Gcm,
            GCM_SERVER_KEY,
            GCM_READ_RESPONSE_TRANSFORMED,
            GCM_READ_RESPONSE,
        );
        // And the server side of the request: decrypt what the client sent.
        check_decrypt_vector(
            CipherId::Aes128Gcm,
            GCM_CLIENT_KEY,
            GCM_READ_REQUEST_TRANSFORMED,
            GCM_READ_REQUEST,
        );
    }

    #[test]
    fn aes128_ccm_matches_windows() {
        check_encrypt_vector(
            CipherId::Aes128Ccm,
            CCM_CLIENT_KEY,
            CCM_READ_REQUEST,
            CCM_READ_REQUEST_TRANSFORMED,
        );
        check_decrypt_vector(
            CipherId::Aes128Ccm,
            CCM_SERVER_KEY,
            CCM_READ_RESPONSE_TRANSFORMED,
            CCM_READ_RESPONSE,
        );
        check_decrypt_vector(
            CipherId::Aes128Ccm,
            CCM_CLIENT_KEY,
            CCM_READ_REQUEST_TRANSFORMED,
            CCM_READ_REQUEST,
        );
    }

    // No published SMB vectors exist for the AES-256 ciphers; these were
    // computed with Python `cryptography` (OpenSSL) AESGCM / AESCCM(tag 16).
    const AES256_KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const AES256_AAD: &str = "00112233445566778899aabb000000002d000000000001002500000000100000";
    const AES256_PLAIN: &[u8] = b"copyless AES-256 test: 45 bytes of plaintext!";

    #[test]
    fn aes256_gcm_matches_independent_implementation() {
        let cipher = Cipher::new(CipherId::Aes256Gcm, &hex(AES256_KEY)).expect("key");
        let aad = hex(AES256_AAD);
        let mut buf = AES256_PLAIN.to_vec();
        let tag = cipher.encrypt(&aad[..16], &aad, &mut buf);
        assert_eq!(
            buf,
            hex("b9e980ca2302386d4821854f57beb70b1976d62666505b83bfaf7489e5d56d9b17e6c81bd13acc370c33bdfca2")
        );
        assert_eq!(tag.to_vec(), hex("37bdcf2aee77ab244f5f7e51fef96785"));
    }

    #[test]
    fn aes256_ccm_matches_independent_implementation() {
        let cipher = Cipher::new(CipherId::Aes256Ccm, &hex(AES256_KEY)).expect("key");
        let aad = hex(AES256_AAD);
        let mut buf = AES256_PLAIN.to_vec();
        let tag = cipher.encrypt(&aad[..16], &aad, &mut buf);
        assert_eq!(
            buf,
            hex("7a23db93e9b9fca56f6e96f374139bda846f9da21bb1c62ec057ccd05edb0ac156297e8193730ba3e6eccf01ce")
        );
        assert_eq!(tag.to_vec(), hex("a761faf5fdd2654ff2ed94ed51bc453f"));
    }

    fn sample(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 % 256) as u8).collect()
    }

    fn cipher_for(id: CipherId) -> Cipher {
        let key: Vec<u8> = (0..id.key_len()).map(|i| i as u8 ^ 0x5a).collect();
        Cipher::new(id, &key).expect("key")
    }

    #[test]
    fn round_trip_for_every_cipher() {
        let nonce = [0x42u8; 16];
        let aad = [0x17u8; 32];
        for id in ALL {
            let cipher = cipher_for(id);
            for len in [0, 1, 15, 16, 17, 64, 1000, 70_000] {
                let plain = sample(len);
                let mut buf = plain.clone();
                let tag = cipher.encrypt(&nonce, &aad, &mut buf);
                if len > 0 {
                    assert_ne!(buf, plain, "{id:?} len {len} not encrypted");
                }
                assert!(
                    cipher.decrypt(&nonce, &aad, &mut buf, &tag),
                    "{id:?} len {len}"
                );
                assert_eq!(buf, plain, "{id:?} len {len}");
            }
        }
    }

    #[test]
    fn tampering_is_detected_for_every_cipher() {
        let nonce = [0x24u8; 16];
        let aad = [0x71u8; 32];
        for id in ALL {
            let cipher = cipher_for(id);
            let plain = sample(300);
            let mut sealed = plain.clone();
            let tag = cipher.encrypt(&nonce, &aad, &mut sealed);

            let mut buf = sealed.clone();
            buf[150] ^= 0x01;
            assert!(
                !cipher.decrypt(&nonce, &aad, &mut buf, &tag),
                "{id:?} ciphertext"
            );

            let mut bad_tag = tag;
            bad_tag[15] ^= 0x80;
            let mut buf = sealed.clone();
            assert!(
                !cipher.decrypt(&nonce, &aad, &mut buf, &bad_tag),
                "{id:?} tag"
            );

            let mut bad_aad = aad;
            bad_aad[31] ^= 0x01; // e.g. the SessionId
            let mut buf = sealed.clone();
            assert!(
                !cipher.decrypt(&nonce, &bad_aad, &mut buf, &tag),
                "{id:?} aad"
            );

            let mut bad_nonce = nonce;
            bad_nonce[0] ^= 0x01;
            let mut buf = sealed.clone();
            assert!(
                !cipher.decrypt(&bad_nonce, &aad, &mut buf, &tag),
                "{id:?} nonce"
            );

            let mut buf = sealed[..299].to_vec();
            assert!(
                !cipher.decrypt(&nonce, &aad, &mut buf, &tag),
                "{id:?} truncated"
            );

            let other = Cipher::new(id, &vec![0u8; id.key_len()]).expect("key");
            let mut buf = sealed.clone();
            assert!(!other.decrypt(&nonce, &aad, &mut buf, &tag), "{id:?} key");
        }
    }

    #[test]
    fn nonce_bytes_beyond_the_cipher_length_are_ignored() {
        // The transform header's Nonce field is 16 bytes; the reserved tail
        // is not part of the AES nonce.
        for id in ALL {
            let cipher = cipher_for(id);
            let mut a = [0x11u8; 16];
            let mut b = a;
            b[cipher.nonce_len()..].fill(0xee);
            a[cipher.nonce_len()..].fill(0);
            let mut x = sample(40);
            let mut y = x.clone();
            assert_eq!(
                cipher.encrypt(&a, &[], &mut x),
                cipher.encrypt(&b, &[], &mut y)
            );
            assert_eq!(x, y);
        }
    }

    #[test]
    fn short_nonce_fails_decryption() {
        for id in ALL {
            let cipher = cipher_for(id);
            let nonce = vec![0u8; cipher.nonce_len() - 1];
            let mut buf = sample(20);
            assert!(!cipher.decrypt(&nonce, &[], &mut buf, &[0; 16]), "{id:?}");
        }
    }

    #[test]
    fn key_length_must_match_cipher() {
        for id in ALL {
            assert!(
                Cipher::new(id, &vec![0u8; id.key_len()]).is_some(),
                "{id:?}"
            );
            for wrong in [0, 15, 17, 24, 31, 33] {
                assert!(
                    Cipher::new(id, &vec![0u8; wrong]).is_none(),
                    "{id:?} {wrong}"
                );
            }
        }
        assert!(Cipher::new(CipherId::Aes128Gcm, &[0; 32]).is_none());
        assert!(Cipher::new(CipherId::Aes256Ccm, &[0; 16]).is_none());
    }

    #[test]
    fn ids_and_lengths() {
        for id in ALL {
            assert_eq!(CipherId::from_id(id.id()), Some(id));
            assert_eq!(cipher_for(id).id(), id);
        }
        assert_eq!(CipherId::from_id(0), None);
        assert_eq!(CipherId::from_id(5), None);
        assert_eq!(cipher_for(CipherId::Aes128Ccm).nonce_len(), 11);
        assert_eq!(cipher_for(CipherId::Aes256Ccm).nonce_len(), 11);
        assert_eq!(cipher_for(CipherId::Aes128Gcm).nonce_len(), 12);
        assert_eq!(cipher_for(CipherId::Aes256Gcm).nonce_len(), 12);
    }

    #[test]
    fn debug_does_not_show_key_material() {
        let text = format!(
            "{:?}",
            Cipher::new(CipherId::Aes128Gcm, &[0xcd; 16]).expect("key")
        );
        assert!(text.contains("Aes128Gcm"));
        assert!(!text.to_lowercase().contains("cd"));
    }

    #[test]
    fn ciphers_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Cipher>();
    }
}
