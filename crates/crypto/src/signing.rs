//! SMB2/3 message signing (MS-SMB2 3.1.4.1 and 3.1.5.1).

use aws_lc_rs::{aead, cmac, constant_time, hmac};
use zeroize::Zeroize;

/// Length of the SMB2 sync/async header.
const HEADER_LEN: usize = 64;
/// The Signature field: bytes 48..64 of the header.
const SIGNATURE_START: usize = 48;
const FLAGS_OFFSET: usize = 16;
const COMMAND_OFFSET: usize = 12;
const MESSAGE_ID_OFFSET: usize = 24;
const SMB2_FLAGS_SERVER_TO_REDIR: u32 = 0x0000_0001;
const SMB2_CANCEL: u16 = 0x000C;
const ZERO_SIGNATURE: [u8; 16] = [0; 16];

/// The signing algorithm of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningAlgorithm {
    /// SMB 2.0.2 and 2.1: HMAC-SHA256 truncated to 16 bytes, keyed with the session key.
    HmacSha256,
    /// SMB 3.0, 3.0.2, and 3.1.1 without a negotiated algorithm.
    AesCmac,
    /// SMB 3.1.1 with SIGNING_CAPABILITIES selecting AES-128-GMAC.
    AesGmac,
}

impl SigningAlgorithm {
    /// SMB2 signing algorithm ids of the 3.1.1 SIGNING_CAPABILITIES context:
    /// HMAC=0, CMAC=1, GMAC=2.
    pub fn id(self) -> u16 {
        match self {
            SigningAlgorithm::HmacSha256 => 0,
            SigningAlgorithm::AesCmac => 1,
            SigningAlgorithm::AesGmac => 2,
        }
    }

    /// The algorithm for a SIGNING_CAPABILITIES id, or `None` if unknown.
    pub fn from_id(id: u16) -> Option<Self> {
        match id {
            0 => Some(SigningAlgorithm::HmacSha256),
            1 => Some(SigningAlgorithm::AesCmac),
            2 => Some(SigningAlgorithm::AesGmac),
            _ => None,
        }
    }
}

/// The keyed primitive. aws-lc wipes these key schedules when they are
/// dropped (its cleanup and free functions cleanse memory), so no raw copy of
/// the key is kept here.
enum Mac {
    // Boxed: the HMAC context is over a kilobyte, the others a pointer or two.
    Hmac(Box<hmac::Key>),
    Cmac(cmac::Key),
    Gmac(aead::LessSafeKey),
}

/// A signing key (Session.SigningKey, Channel.SigningKey, or the session key
/// for SMB 2.x) together with its algorithm.
pub struct SigningKey {
    algo: SigningAlgorithm,
    mac: Mac,
}

impl SigningKey {
    /// Builds the key schedule once, so that signing a message costs only the MAC.
    pub fn new(algo: SigningAlgorithm, mut key: [u8; 16]) -> SigningKey {
        let mac = match algo {
            SigningAlgorithm::HmacSha256 => {
                Mac::Hmac(Box::new(hmac::Key::new(hmac::HMAC_SHA256, &key)))
            }
            SigningAlgorithm::AesCmac => Mac::Cmac(
                cmac::Key::new(cmac::AES_128, &key)
                    .expect("a 16-byte key is valid for AES-128-CMAC"),
            ),
            SigningAlgorithm::AesGmac => Mac::Gmac(aead::LessSafeKey::new(
                aead::UnboundKey::new(&aead::AES_128_GCM, &key)
                    .expect("a 16-byte key is valid for AES-128-GCM"),
            )),
        };
        key.zeroize();
        SigningKey { algo, mac }
    }

    pub fn algorithm(&self) -> SigningAlgorithm {
        self.algo
    }

    /// Signature of one SMB2 message (64-byte header at msg[0..64], then body,
    /// exactly the bytes of that message in a compound, padding included),
    /// computed as if the Signature field (bytes 48..64) were zero. For GMAC
    /// the 12-byte nonce is built from the header per MS-SMB2 3.1.4.1
    /// (MessageId, plus the role bit from SMB2_FLAGS_SERVER_TO_REDIR and the
    /// CANCEL bit when Command == 0x000C).
    ///
    /// A message shorter than a header has no Signature field; its MAC is
    /// computed over the bytes as they are (it can never verify).
    ///
    /// For GMAC, a message whose Signature field is not zero is copied once,
    /// because AES-GCM takes its AAD as one slice; [`SigningKey::sign`] and
    /// [`SigningKey::verify_in_place`] avoid that copy.
    pub fn signature(&self, msg: &[u8]) -> [u8; 16] {
        let (head, rest) = match split_signature(msg) {
            Some((head, _, rest)) => (head, Some(rest)),
            None => (msg, None),
        };
        match &self.mac {
            Mac::Hmac(key) => {
                let mut ctx = hmac::Context::with_key(key);
                ctx.update(head);
                if let Some(rest) = rest {
                    ctx.update(&ZERO_SIGNATURE);
                    ctx.update(rest);
                }
                first16(ctx.sign().as_ref())
            }
            Mac::Cmac(key) => {
                let mut parts: [&[u8]; 3] = [head, &[], &[]];
                if let Some(rest) = rest {
                    parts[1] = &ZERO_SIGNATURE;
                    parts[2] = rest;
                }
                cmac_parts(key, &parts)
            }
            Mac::Gmac(key) => {
                let nonce = gmac_nonce(msg);
                let field_is_zero = msg
                    .get(SIGNATURE_START..HEADER_LEN)
                    .is_none_or(|field| field == ZERO_SIGNATURE);
                if field_is_zero {
                    gmac(key, nonce, msg)
                } else {
                    let mut copy = msg.to_vec();
                    copy[SIGNATURE_START..HEADER_LEN].fill(0);
                    gmac(key, nonce, &copy)
                }
            }
        }
    }

    /// Writes the signature into msg[48..64] (the caller has already set
    /// SMB2_FLAGS_SIGNED 0x8 in Flags at bytes 16..20). Does nothing to a
    /// message shorter than the 64-byte header.
    pub fn sign(&self, msg: &mut [u8]) {
        let Some(field) = msg.get_mut(SIGNATURE_START..HEADER_LEN) else {
            return;
        };
        // Zeroing first lets GMAC hash the buffer in place.
        field.fill(0);
        let signature = self.signature(msg);
        msg[SIGNATURE_START..HEADER_LEN].copy_from_slice(&signature);
    }

    /// Constant-time check of msg[48..64]. False for a message shorter than a header.
    pub fn verify(&self, msg: &[u8]) -> bool {
        let Some(received) = msg.get(SIGNATURE_START..HEADER_LEN) else {
            return false;
        };
        let expected = self.signature(msg);
        constant_time::verify_slices_are_equal(&expected, received).is_ok()
    }

    /// Like [`SigningKey::verify`], but clears the Signature field while
    /// hashing and puts it back afterwards, so GMAC needs no copy of a large
    /// message. `msg` is unchanged when this returns.
    pub fn verify_in_place(&self, msg: &mut [u8]) -> bool {
        let Some(field) = msg.get_mut(SIGNATURE_START..HEADER_LEN) else {
            return false;
        };
        let received = first16(field);
        field.fill(0);
        let expected = self.signature(msg);
        msg[SIGNATURE_START..HEADER_LEN].copy_from_slice(&received);
        constant_time::verify_slices_are_equal(&expected, &received).is_ok()
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("algo", &self.algo)
            .finish_non_exhaustive()
    }
}

/// Splits a message into (bytes before the Signature field, the field, bytes after).
fn split_signature(msg: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    if msg.len() < HEADER_LEN {
        return None;
    }
    let (head, tail) = msg.split_at(SIGNATURE_START);
    let (field, rest) = tail.split_at(HEADER_LEN - SIGNATURE_START);
    Some((head, field, rest))
}

/// The AES-GMAC nonce of MS-SMB2 3.1.4.1: MessageId, then a 32-bit word whose
/// bit 0 says the sender is the server and bit 1 that this is a CANCEL request.
/// Missing header bytes (a truncated message) read as zero.
fn gmac_nonce(msg: &[u8]) -> [u8; 12] {
    let message_id = read_u64(msg, MESSAGE_ID_OFFSET);
    let flags = read_u32(msg, FLAGS_OFFSET);
    let command = read_u16(msg, COMMAND_OFFSET);
    let mut role = 0u32;
    if flags & SMB2_FLAGS_SERVER_TO_REDIR != 0 {
        role |= 1;
    }
    if command == SMB2_CANCEL {
        role |= 2;
    }
    let mut nonce = [0u8; 12];
    nonce[..8].copy_from_slice(&message_id.to_le_bytes());
    nonce[8..].copy_from_slice(&role.to_le_bytes());
    nonce
}

fn read_u16(msg: &[u8], at: usize) -> u16 {
    let mut bytes = [0u8; 2];
    if let Some(src) = msg.get(at..at + 2) {
        bytes.copy_from_slice(src);
    }
    u16::from_le_bytes(bytes)
}

fn read_u32(msg: &[u8], at: usize) -> u32 {
    let mut bytes = [0u8; 4];
    if let Some(src) = msg.get(at..at + 4) {
        bytes.copy_from_slice(src);
    }
    u32::from_le_bytes(bytes)
}

fn read_u64(msg: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    if let Some(src) = msg.get(at..at + 8) {
        bytes.copy_from_slice(src);
    }
    u64::from_le_bytes(bytes)
}

fn first16(bytes: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&bytes[..16]);
    out
}

fn cmac_parts(key: &cmac::Key, parts: &[&[u8]]) -> [u8; 16] {
    let mut ctx = cmac::Context::with_key(key);
    for part in parts {
        ctx.update(part).expect("AES-CMAC update does not fail");
    }
    let tag = ctx.sign().expect("AES-CMAC finish does not fail");
    first16(tag.as_ref())
}

/// GMAC (RFC 4543) is AES-GCM with an empty plaintext and the message as AAD.
fn gmac(key: &aead::LessSafeKey, nonce: [u8; 12], aad: &[u8]) -> [u8; 16] {
    let tag = key
        .seal_in_place_separate_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(aad),
            &mut [],
        )
        .expect("AES-GMAC of an SMB message does not fail");
    first16(tag.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kdf::kdf128;
    use crate::testutil::{hex, hex16};

    const ALL: [SigningAlgorithm; 3] = [
        SigningAlgorithm::HmacSha256,
        SigningAlgorithm::AesCmac,
        SigningAlgorithm::AesGmac,
    ];

    /// The final SESSION_SETUP response of the SMB 3.1.1 example in
    /// Microsoft's "anatomy of signing and cryptographic keys" article, signed
    /// by Windows with AES-128-CMAC and the SigningKey derived there.
    const SIGNED_SESSION_SETUP_RESPONSE: &str = "
        FE534D4240000100000000000100800009000000000000000300000000000000FFFE000000000000
        1900000000100000EBE146DA120BA25FC3376A49DFE31BC10900000048001D00A11B3019A0030A01
        00A3120410010000003B453CDC3524164200000000";
    const SMB311_SIGNING_KEY: &str = "73FE7A9A77BEF0BDE49C650D8CCB5F76";
    const WINDOWS_SIGNATURE: &str = "EBE146DA120BA25FC3376A49DFE31BC1";

    /// A plausible signed message: header with SIGNED set, some body.
    fn sample_message(server: bool, command: u16, message_id: u64, body_len: usize) -> Vec<u8> {
        let mut msg = vec![0u8; HEADER_LEN + body_len];
        msg[..4].copy_from_slice(b"\xfeSMB");
        msg[4..6].copy_from_slice(&64u16.to_le_bytes());
        msg[12..14].copy_from_slice(&command.to_le_bytes());
        let flags: u32 = 0x8 | u32::from(server);
        msg[16..20].copy_from_slice(&flags.to_le_bytes());
        msg[24..32].copy_from_slice(&message_id.to_le_bytes());
        msg[40..48].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        for (i, byte) in msg[HEADER_LEN..].iter_mut().enumerate() {
            *byte = (i % 251) as u8;
        }
        msg
    }

    #[test]
    fn ids_round_trip() {
        for algo in ALL {
            assert_eq!(SigningAlgorithm::from_id(algo.id()), Some(algo));
        }
        assert_eq!(SigningAlgorithm::HmacSha256.id(), 0);
        assert_eq!(SigningAlgorithm::AesCmac.id(), 1);
        assert_eq!(SigningAlgorithm::AesGmac.id(), 2);
        assert_eq!(SigningAlgorithm::from_id(3), None);
        assert_eq!(SigningAlgorithm::from_id(0xffff), None);
    }

    #[test]
    fn cmac_matches_windows_signature() {
        let key = SigningKey::new(SigningAlgorithm::AesCmac, hex16(SMB311_SIGNING_KEY));
        let msg = hex(SIGNED_SESSION_SETUP_RESPONSE);
        assert_eq!(key.signature(&msg), hex16(WINDOWS_SIGNATURE));
        assert!(key.verify(&msg));

        let mut resigned = msg.clone();
        resigned[48..64].fill(0xAA);
        key.sign(&mut resigned);
        assert_eq!(resigned, msg);
    }

    #[test]
    fn cmac_with_key_derived_from_session_key_matches_windows() {
        // Same example end to end: session key and preauth hash to signature.
        let session_key = hex16("270E1BA896585EEB7AF3472D3B4C75A7");
        let preauth = hex(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB79
             28622DDDAD522D9751640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
        );
        let signing_key = kdf128(&session_key, b"SMBSigningKey\0", &preauth);
        let key = SigningKey::new(SigningAlgorithm::AesCmac, signing_key);
        assert!(key.verify(&hex(SIGNED_SESSION_SETUP_RESPONSE)));
    }

    #[test]
    fn cmac_matches_rfc4493_examples() {
        let key =
            cmac::Key::new(cmac::AES_128, &hex16("2b7e151628aed2a6abf7158809cf4f3c")).expect("key");
        let message = hex(
            "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710",
        );
        let cases = [
            (0, "bb1d6929e95937287fa37d129b756746"),
            (16, "070a16b46b4d4144f79bdd9dd04a287c"),
            (40, "dfa66747de9ae63030ca32611497c827"),
            (64, "51f0bebf7e3b9d92fc49741779363cfe"),
        ];
        for (len, tag) in cases {
            assert_eq!(
                cmac_parts(&key, &[&message[..len]]),
                hex16(tag),
                "length {len}"
            );
        }
        // Feeding the message in pieces, as signing does, gives the same MAC.
        let (a, rest) = message.split_at(48);
        let (b, c) = rest.split_at(16);
        assert_eq!(
            cmac_parts(&key, &[a, b, c]),
            hex16("51f0bebf7e3b9d92fc49741779363cfe")
        );
    }

    #[test]
    fn hmac_signature_is_truncated_hmac_sha256_over_zeroed_field() {
        let raw = hex16("000102030405060708090a0b0c0d0e0f");
        let key = SigningKey::new(SigningAlgorithm::HmacSha256, raw);
        let mut msg = sample_message(false, 5, 7, 100);
        msg[48..64].fill(0x5c);
        let mut zeroed = msg.clone();
        zeroed[48..64].fill(0);
        let full = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &raw), &zeroed);
        assert_eq!(key.signature(&msg), first16(full.as_ref()));
    }

    #[test]
    fn hmac_sha256_matches_rfc4231_case_2() {
        // The streaming context used for signing, checked against RFC 4231.
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"Jefe");
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(b"what do ya want ");
        ctx.update(b"for nothing?");
        assert_eq!(
            ctx.sign().as_ref(),
            hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
    }

    #[test]
    fn gcm_with_empty_input_matches_gcm_spec_test_case_1() {
        // McGrew & Viega, "The Galois/Counter Mode of Operation", test case 1.
        let key = aead::LessSafeKey::new(
            aead::UnboundKey::new(&aead::AES_128_GCM, &[0; 16]).expect("key"),
        );
        assert_eq!(
            gmac(&key, [0; 12], &[]),
            hex16("58e2fccefa7e3061367f1d57a4e7455a")
        );
    }

    #[test]
    fn gmac_matches_independent_implementation() {
        // Vectors computed with Python `cryptography` (OpenSSL) AESGCM:
        // encrypt(nonce = MessageId || role word, plaintext = b"", aad =
        // message with the Signature field zeroed).
        let key = SigningKey::new(SigningAlgorithm::AesGmac, hex16(SMB311_SIGNING_KEY));
        let response = hex(SIGNED_SESSION_SETUP_RESPONSE);
        assert_eq!(
            key.signature(&response),
            hex16("75d05bac99ff7fcc52a44c354381d559")
        );

        let mut request = response.clone();
        request[16..20].copy_from_slice(&8u32.to_le_bytes());
        assert_eq!(
            key.signature(&request),
            hex16("2547509958dbdf8c9d1a2fffc2d92333")
        );

        let mut cancel = request.clone();
        cancel[12..14].copy_from_slice(&SMB2_CANCEL.to_le_bytes());
        assert_eq!(
            key.signature(&cancel),
            hex16("6ca1cfa270156aec1a6e50334aede82c")
        );
    }

    #[test]
    fn gmac_nonce_carries_message_id_role_and_cancel() {
        let request = sample_message(false, 8, 0x0102_0304_0506_0708, 0);
        let response = sample_message(true, 8, 0x0102_0304_0506_0708, 0);
        let cancel = sample_message(false, SMB2_CANCEL, 0x0102_0304_0506_0708, 0);
        let id = [0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01];
        assert_eq!(gmac_nonce(&request)[..8], id);
        assert_eq!(gmac_nonce(&request)[8..], [0, 0, 0, 0]);
        assert_eq!(gmac_nonce(&response)[..8], id);
        assert_eq!(gmac_nonce(&response)[8..], [1, 0, 0, 0]);
        assert_eq!(gmac_nonce(&cancel)[8..], [2, 0, 0, 0]);
        assert_ne!(gmac_nonce(&request), gmac_nonce(&response));
        assert_ne!(gmac_nonce(&request), gmac_nonce(&cancel));
    }

    #[test]
    fn gmac_nonce_is_what_the_signature_uses() {
        // Sign with an explicit nonce through aws-lc and compare: proves the
        // role and cancel bits reach the MAC, not just the nonce helper.
        let raw = hex16("00112233445566778899aabbccddeeff");
        let key = SigningKey::new(SigningAlgorithm::AesGmac, raw);
        let direct =
            aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &raw).expect("key"));
        for (server, command, role) in [(false, 8, 0u8), (true, 8, 1), (false, SMB2_CANCEL, 2)] {
            let msg = sample_message(server, command, 42, 33);
            let mut nonce = [0u8; 12];
            nonce[0] = 42;
            nonce[8] = role;
            assert_eq!(
                key.signature(&msg),
                gmac(&direct, nonce, &msg),
                "role {role}"
            );
        }
    }

    #[test]
    fn sign_then_verify_for_every_algorithm() {
        for algo in ALL {
            let key = SigningKey::new(algo, hex16("0f0e0d0c0b0a09080706050403020100"));
            assert_eq!(key.algorithm(), algo);
            for body_len in [0, 1, 15, 16, 17, 4096] {
                let mut msg = sample_message(true, 8, 9, body_len);
                key.sign(&mut msg);
                assert_ne!(msg[48..64], ZERO_SIGNATURE, "{algo:?}");
                assert!(key.verify(&msg), "{algo:?} body {body_len}");
                assert!(
                    key.verify_in_place(&mut msg.clone()),
                    "{algo:?} body {body_len}"
                );
                assert_eq!(key.signature(&msg), msg[48..64], "{algo:?}");
            }
        }
    }

    #[test]
    fn flipped_bit_fails_for_every_algorithm() {
        for algo in ALL {
            let key = SigningKey::new(algo, hex16("0f0e0d0c0b0a09080706050403020100"));
            let mut msg = sample_message(false, 9, 77, 200);
            key.sign(&mut msg);
            // A bit in the header, in the signature itself, and in the body.
            for byte in [0, 16, 24, 50, 63, 64, msg.len() - 1] {
                let mut tampered = msg.clone();
                tampered[byte] ^= 0x01;
                assert!(!key.verify(&tampered), "{algo:?} byte {byte}");
                assert!(!key.verify_in_place(&mut tampered), "{algo:?} byte {byte}");
            }
            // A longer or shorter message fails too.
            let mut longer = msg.clone();
            longer.push(0);
            assert!(!key.verify(&longer), "{algo:?} longer");
            assert!(!key.verify(&msg[..msg.len() - 1]), "{algo:?} shorter");
        }
    }

    #[test]
    fn wrong_key_fails() {
        for algo in ALL {
            let signer = SigningKey::new(algo, [1; 16]);
            let other = SigningKey::new(algo, [2; 16]);
            let mut msg = sample_message(true, 5, 3, 50);
            signer.sign(&mut msg);
            assert!(!other.verify(&msg), "{algo:?}");
        }
    }

    #[test]
    fn verify_in_place_restores_the_message() {
        for algo in ALL {
            let key = SigningKey::new(algo, [3; 16]);
            let mut msg = sample_message(false, 8, 1, 64);
            key.sign(&mut msg);
            let before = msg.clone();
            assert!(key.verify_in_place(&mut msg));
            assert_eq!(msg, before);
            msg[70] ^= 0x80;
            let tampered = msg.clone();
            assert!(!key.verify_in_place(&mut msg));
            assert_eq!(msg, tampered);
        }
    }

    #[test]
    fn signature_ignores_the_signature_field() {
        for algo in ALL {
            let key = SigningKey::new(algo, [4; 16]);
            let mut a = sample_message(true, 8, 11, 40);
            let mut b = a.clone();
            a[48..64].fill(0);
            b[48..64].fill(0xff);
            assert_eq!(key.signature(&a), key.signature(&b), "{algo:?}");
        }
    }

    #[test]
    fn short_messages_do_not_panic_and_never_verify() {
        for algo in ALL {
            let key = SigningKey::new(algo, [5; 16]);
            for len in [0, 1, 20, 47, 48, 63] {
                let mut msg = vec![0x11u8; len];
                let _ = key.signature(&msg);
                key.sign(&mut msg);
                assert_eq!(
                    msg,
                    vec![0x11u8; len],
                    "sign must not touch a short message"
                );
                assert!(!key.verify(&msg), "{algo:?} len {len}");
                assert!(!key.verify_in_place(&mut msg), "{algo:?} len {len}");
            }
        }
    }

    #[test]
    fn debug_does_not_show_key_material() {
        let key = SigningKey::new(SigningAlgorithm::AesCmac, [0xab; 16]);
        let text = format!("{key:?}");
        assert!(text.contains("AesCmac"));
        assert!(!text.to_lowercase().contains("ab, "));
        assert!(!text.to_lowercase().contains("abab"));
    }

    #[test]
    fn keys_can_be_shared_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SigningKey>();
    }
}
