//! NTLMv2 computations (MS-NLMP 3.3.2) and message signing with extended
//! session security (MS-NLMP 3.4.4.2, 3.4.5).

use hmac::{Hmac, KeyInit, Mac};
use md5::{Digest, Md5};
use rc4::{Rc4, StreamCipher};
use zeroize::Zeroizing;

use super::flags;
use crate::text;

type HmacMd5 = Hmac<Md5>;

pub(crate) fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    // HMAC is defined for keys of every length, so this cannot fail.
    let mut mac = HmacMd5::new_from_slice(key).expect("HMAC accepts any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut hasher = Md5::new();
    for part in parts {
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// NTOWFv2: HMAC_MD5(NT hash, UTF16LE(UPPER(user) + domain)).
pub(crate) fn ntowf_v2(nt_hash: &[u8; 16], user: &str, domain: &str) -> Zeroizing<[u8; 16]> {
    let mut identity = text::upcase(user);
    identity.push_str(domain);
    Zeroizing::new(hmac_md5(nt_hash, &[&text::utf16le(&identity)]))
}

/// NTProofStr: HMAC_MD5(NTOWFv2, ServerChallenge || blob).
pub(crate) fn nt_proof(ntowf: &[u8; 16], server_challenge: &[u8; 8], blob: &[u8]) -> [u8; 16] {
    hmac_md5(ntowf, &[server_challenge, blob])
}

/// SessionBaseKey (= KeyExchangeKey for NTLMv2): HMAC_MD5(NTOWFv2, NTProofStr).
pub(crate) fn session_base_key(ntowf: &[u8; 16], proof: &[u8; 16]) -> Zeroizing<[u8; 16]> {
    Zeroizing::new(hmac_md5(ntowf, &[proof]))
}

/// RC4 of a 16-byte value with a 16-byte key, as used for the
/// EncryptedRandomSessionKey.
pub(crate) fn rc4_16(key: &[u8; 16], data: &[u8; 16]) -> Zeroizing<[u8; 16]> {
    let mut out = Zeroizing::new(*data);
    rc4_cipher(key).apply_keystream(out.as_mut_slice());
    out
}

fn rc4_cipher(key: &[u8]) -> Rc4 {
    // RC4 takes keys of 1 to 256 bytes; ours are 5 to 16.
    Rc4::new_from_slice(key).expect("RC4 key length is 5 to 16 bytes")
}

/// Which way a message travels, for key derivation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    ClientToServer,
    ServerToClient,
}

impl Direction {
    fn sign_magic(self) -> &'static [u8] {
        match self {
            Direction::ClientToServer => {
                b"session key to client-to-server signing key magic constant\0"
            }
            Direction::ServerToClient => {
                b"session key to server-to-client signing key magic constant\0"
            }
        }
    }

    fn seal_magic(self) -> &'static [u8] {
        match self {
            Direction::ClientToServer => {
                b"session key to client-to-server sealing key magic constant\0"
            }
            Direction::ServerToClient => {
                b"session key to server-to-client sealing key magic constant\0"
            }
        }
    }
}

/// SIGNKEY (MS-NLMP 3.4.5.2), with extended session security.
pub(crate) fn sign_key(exported: &[u8; 16], dir: Direction) -> Zeroizing<[u8; 16]> {
    Zeroizing::new(md5(&[exported, dir.sign_magic()]))
}

/// SEALKEY (MS-NLMP 3.4.5.3), with extended session security: the session
/// key is cut to 128, 56 or 40 bits by the negotiated strength.
pub(crate) fn seal_key(exported: &[u8; 16], neg_flags: u32, dir: Direction) -> Zeroizing<[u8; 16]> {
    let len = if neg_flags & flags::NEGOTIATE_128 != 0 {
        16
    } else if neg_flags & flags::NEGOTIATE_56 != 0 {
        7
    } else {
        5
    };
    Zeroizing::new(md5(&[&exported[..len], dir.seal_magic()]))
}

/// One direction of NTLM message integrity with extended session security:
/// the signing key and the RC4 handle, whose keystream carries on from one
/// message to the next.
pub(crate) struct Signer {
    sign_key: Zeroizing<[u8; 16]>,
    seal: Option<Rc4>,
}

impl Signer {
    pub(crate) fn new(exported: &[u8; 16], neg_flags: u32, dir: Direction) -> Signer {
        let seal = (neg_flags & flags::KEY_EXCH != 0)
            .then(|| rc4_cipher(seal_key(exported, neg_flags, dir).as_slice()));
        Signer {
            sign_key: sign_key(exported, dir),
            seal,
        }
    }

    /// NTLMSSP_MESSAGE_SIGNATURE for extended session security
    /// (MS-NLMP 2.2.2.9.2, 3.4.4.2): version 1, the first 8 bytes of
    /// HMAC_MD5(SigningKey, SeqNum || message), RC4-encrypted when key
    /// exchange was negotiated, and the sequence number.
    pub(crate) fn mac(&mut self, seq_num: u32, message: &[u8]) -> [u8; 16] {
        let digest = hmac_md5(self.sign_key.as_slice(), &[&seq_num.to_le_bytes(), message]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(&digest[..8]);
        if let Some(seal) = self.seal.as_mut() {
            seal.apply_keystream(&mut checksum);
        }
        let mut out = [0u8; 16];
        out[..4].copy_from_slice(&1u32.to_le_bytes());
        out[4..12].copy_from_slice(&checksum);
        out[12..].copy_from_slice(&seq_num.to_le_bytes());
        out
    }

    /// Encrypts with the sealing handle (for tests of the stateful RC4 handle
    /// against the specification's GSS_WrapEx example).
    #[cfg(test)]
    pub(crate) fn seal_in_place(&mut self, data: &mut [u8]) {
        if let Some(seal) = self.seal.as_mut() {
            seal.apply_keystream(data);
        }
    }
}

/// Compares two byte strings in time independent of where they differ.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    // MS-NLMP 4.2.1 and 4.2.4.
    const SERVER_CHALLENGE: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
    const RANDOM_SESSION_KEY: [u8; 16] = [0x55; 16];

    /// The NTLMv2 "temp" of MS-NLMP 4.2.4.1.3 (time 0, client challenge
    /// aa..aa, AV pairs NbDomainName "Domain", NbComputerName "Server").
    pub(crate) const SPEC_TEMP: [u8; 68] = [
        0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00,
        0x0c, 0x00, 0x44, 0x00, 0x6f, 0x00, 0x6d, 0x00, 0x61, 0x00, 0x69, 0x00, 0x6e, 0x00, 0x01,
        0x00, 0x0c, 0x00, 0x53, 0x00, 0x65, 0x00, 0x72, 0x00, 0x76, 0x00, 0x65, 0x00, 0x72, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn nt_hash_matches_ms_nlmp_4_2_2_1_2() {
        assert_eq!(
            crate::nt_hash("Password"),
            [
                0xa4, 0xf4, 0x9c, 0x40, 0x65, 0x10, 0xbd, 0xca, 0xb6, 0x82, 0x4e, 0xe7, 0xc3, 0x0f,
                0xd8, 0x52
            ]
        );
    }

    #[test]
    fn ntlmv2_matches_ms_nlmp_4_2_4() {
        let ntowf = ntowf_v2(&crate::nt_hash("Password"), "User", "Domain");
        // 4.2.4.1.1 NTOWFv2.
        assert_eq!(
            *ntowf,
            [
                0x0c, 0x86, 0x8a, 0x40, 0x3b, 0xfd, 0x7a, 0x93, 0xa3, 0x00, 0x1e, 0xf2, 0x2e, 0xf0,
                0x2e, 0x3f
            ]
        );
        // The user name is upper-cased, the domain is not.
        assert_eq!(
            *ntowf_v2(&crate::nt_hash("Password"), "uSeR", "Domain"),
            *ntowf
        );
        assert_ne!(
            *ntowf_v2(&crate::nt_hash("Password"), "User", "DOMAIN"),
            *ntowf
        );

        // 4.2.4.2.2 NTProofStr.
        let proof = nt_proof(&ntowf, &SERVER_CHALLENGE, &SPEC_TEMP);
        assert_eq!(
            proof,
            [
                0x68, 0xcd, 0x0a, 0xb8, 0x51, 0xe5, 0x1c, 0x96, 0xaa, 0xbc, 0x92, 0x7b, 0xeb, 0xef,
                0x6a, 0x1c
            ]
        );
        // 4.2.4.1.2 SessionBaseKey.
        let base = session_base_key(&ntowf, &proof);
        assert_eq!(
            *base,
            [
                0x8d, 0xe4, 0x0c, 0xca, 0xdb, 0xc1, 0x4a, 0x82, 0xf1, 0x5c, 0xb0, 0xad, 0x0d, 0xe9,
                0x5c, 0xa3
            ]
        );
        // 4.2.4.2.3 EncryptedSessionKey, and back.
        let encrypted = rc4_16(&base, &RANDOM_SESSION_KEY);
        assert_eq!(
            *encrypted,
            [
                0xc5, 0xda, 0xd2, 0x54, 0x4f, 0xc9, 0x79, 0x90, 0x94, 0xce, 0x1c, 0xe9, 0x0b, 0xc9,
                0xd0, 0x3e
            ]
        );
        assert_eq!(*rc4_16(&base, &encrypted), RANDOM_SESSION_KEY);
    }

    #[test]
    fn sign_and_seal_match_ms_nlmp_4_2_4_4() {
        let neg = flags::NEGOTIATE_56
            | flags::NEGOTIATE_128
            | flags::SIGN
            | flags::SEAL
            | flags::KEY_EXCH
            | flags::EXTENDED_SESSIONSECURITY;
        let dir = Direction::ClientToServer;
        assert_eq!(
            *seal_key(&RANDOM_SESSION_KEY, neg, dir),
            [
                0x59, 0xf6, 0x00, 0x97, 0x3c, 0xc4, 0x96, 0x0a, 0x25, 0x48, 0x0a, 0x7c, 0x19, 0x6e,
                0x4c, 0x58
            ]
        );
        assert_eq!(
            *sign_key(&RANDOM_SESSION_KEY, dir),
            [
                0x47, 0x88, 0xdc, 0x86, 0x1b, 0x47, 0x82, 0xf3, 0x5d, 0x43, 0xfd, 0x98, 0xfe, 0x1a,
                0x2d, 0x39
            ]
        );

        // GSS_WrapEx: the plaintext is sealed first, then the checksum goes
        // through the same RC4 handle.
        let plaintext = text::utf16le("Plaintext");
        let mut signer = Signer::new(&RANDOM_SESSION_KEY, neg, dir);
        let mut sealed = plaintext.clone();
        signer.seal_in_place(&mut sealed);
        assert_eq!(
            sealed,
            [
                0x54, 0xe5, 0x01, 0x65, 0xbf, 0x19, 0x36, 0xdc, 0x99, 0x60, 0x20, 0xc1, 0x81, 0x1b,
                0x0f, 0x06, 0xfb, 0x5f
            ]
        );
        assert_eq!(
            signer.mac(0, &plaintext),
            [
                0x01, 0x00, 0x00, 0x00, 0x7f, 0xb3, 0x8e, 0xc5, 0xc5, 0x5d, 0x49, 0x76, 0x00, 0x00,
                0x00, 0x00
            ]
        );
    }

    #[test]
    fn signature_without_key_exchange_is_the_plain_hmac() {
        let neg = flags::EXTENDED_SESSIONSECURITY | flags::NEGOTIATE_128;
        let plaintext = text::utf16le("Plaintext");
        let mut signer = Signer::new(&RANDOM_SESSION_KEY, neg, Direction::ClientToServer);
        let mac = signer.mac(0, &plaintext);
        // MS-NLMP 4.2.4.4: HMAC_MD5(SigningKey, SeqNum || Message)[0..8].
        assert_eq!(mac[4..12], [0x70, 0x35, 0x28, 0x51, 0xf2, 0x56, 0x43, 0x09]);
    }

    #[test]
    fn seal_key_strength_follows_flags() {
        let k = [0x55u8; 16];
        let d = Direction::ServerToClient;
        let k128 = seal_key(&k, flags::NEGOTIATE_128, d);
        let k56 = seal_key(&k, flags::NEGOTIATE_56, d);
        let k40 = seal_key(&k, 0, d);
        assert_eq!(*k56, md5(&[&k[..7], d.seal_magic()]));
        assert_eq!(*k40, md5(&[&k[..5], d.seal_magic()]));
        assert_ne!(*k128, *k56);
        assert_ne!(
            *seal_key(&k, flags::NEGOTIATE_128, Direction::ClientToServer),
            *k128
        );
    }

    #[test]
    fn ct_eq_compares() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
