//! SP800-108 key derivation in counter mode with HMAC-SHA256 (MS-SMB2 3.1.4.2).

use aws_lc_rs::hmac;

/// SP800-108 counter mode with HMAC-SHA256, r=32, L=128 (MS-SMB2 3.1.4.2).
/// `label` and `context` are passed exactly as given (the caller includes
/// trailing NULs, e.g. `b"SMB2AESCMAC\0"`).
pub fn kdf128(key: &[u8], label: &[u8], context: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    derive(key, label, context, &mut out);
    out
}

/// Same as [`kdf128`] with L=256, for AES-256 encryption keys. The key
/// may be longer than 16 bytes: a Kerberos session's full key is used.
pub fn kdf256(key: &[u8], label: &[u8], context: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    derive(key, label, context, &mut out);
    out
}

/// Fills `out` with blocks K(1), K(2), ... where
/// K(i) = HMAC-SHA256(key, [i]_32 || label || 0x00 || context || [L]_32).
fn derive(key: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    // `out` is 16 or 32 bytes, so the bit length always fits in 32 bits.
    let bits = u32::try_from(out.len() * 8).unwrap_or(u32::MAX);
    for (counter, chunk) in (1u32..).zip(out.chunks_mut(32)) {
        let mut ctx = hmac::Context::with_key(&key);
        ctx.update(&counter.to_be_bytes());
        ctx.update(label);
        ctx.update(&[0]);
        ctx.update(context);
        ctx.update(&bits.to_be_bytes());
        let tag = ctx.sign();
        let block = tag.as_ref();
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hex, hex16};
    use aws_lc_rs::kdf::{get_kbkdf_ctr_hmac_algorithm, kbkdf_ctr_hmac, KbkdfCtrHmacAlgorithmId};

    // Key derivation examples from Microsoft's "SMB 2 and SMB 3 security in
    // Windows 10: the anatomy of signing and cryptographic keys", appendix.
    // Keys are named from the client's side there: the client's
    // EncryptionKey is the server's DecryptionKey.

    #[test]
    fn smb30_keys_match_microsoft_example() {
        let session_key = hex16("7CD451825D0450D235424E44BA6E78CC");
        assert_eq!(
            kdf128(&session_key, b"SMB2AESCMAC\0", b"SmbSign\0"),
            hex16("0B7E9C5CAC36C0F6EA9AB275298CEDCE")
        );
        assert_eq!(
            kdf128(&session_key, b"SMB2AESCCM\0", b"ServerIn \0"),
            hex16("FAD27796665B313EBB578F388632B4F7")
        );
        assert_eq!(
            kdf128(&session_key, b"SMB2AESCCM\0", b"ServerOut\0"),
            hex16("B0F0427F7CEB416D1D9DCC0CD4F99447")
        );
        assert_eq!(
            kdf128(&session_key, b"SMB2APP\0", b"SmbRpc\0"),
            hex16("BB23A4575AA26C721AF525AF15A87B4F")
        );
    }

    #[test]
    fn smb30_second_channel_signing_key_matches_microsoft_example() {
        let session_key = hex16("4E01A2B313BCF660CC250BEF021AEDE6");
        assert_eq!(
            kdf128(&session_key, b"SMB2AESCMAC\0", b"SmbSign\0"),
            hex16("BA1A17DBBFEC349BCA105563D598952F")
        );
    }

    #[test]
    fn smb311_keys_match_microsoft_example() {
        let session_key = hex16("270E1BA896585EEB7AF3472D3B4C75A7");
        let preauth = hex(
            "0DD13628CC3ED218EF9DF9772D436D0887AB9814BFAE63A80AA845F36909DB79
             28622DDDAD522D9751640A459762C5A9D6BB084CBB3CE6BDADEF5D5BCE3C6C01",
        );
        assert_eq!(
            kdf128(&session_key, b"SMBSigningKey\0", &preauth),
            hex16("73FE7A9A77BEF0BDE49C650D8CCB5F76")
        );
        assert_eq!(
            kdf128(&session_key, b"SMBC2SCipherKey\0", &preauth),
            hex16("629BCBC54422A0F572B97F45989B6073")
        );
        assert_eq!(
            kdf128(&session_key, b"SMBS2CCipherKey\0", &preauth),
            hex16("E2AF0DCEFAC68DA71A0DFBD0D1350D74")
        );
        assert_eq!(
            kdf128(&session_key, b"SMBAppKey\0", &preauth),
            hex16("6D7AD7954E9EC61E907B4D473DC178FF")
        );
    }

    /// Our framing must equal the generic SP800-108 KBKDF of aws-lc with
    /// fixed input `label || 0x00 || context || [L]_32`, for both lengths.
    fn reference(key: &[u8; 16], label: &[u8], context: &[u8], out: &mut [u8]) {
        let alg = get_kbkdf_ctr_hmac_algorithm(KbkdfCtrHmacAlgorithmId::Sha256).expect("sha256");
        let mut info = Vec::new();
        info.extend_from_slice(label);
        info.push(0);
        info.extend_from_slice(context);
        let bits = u32::try_from(out.len() * 8).expect("small");
        info.extend_from_slice(&bits.to_be_bytes());
        kbkdf_ctr_hmac(alg, key, &info, out).expect("kbkdf");
    }

    #[test]
    fn kdf256_matches_generic_sp800_108() {
        let key = hex16("270E1BA896585EEB7AF3472D3B4C75A7");
        let context = [0x5a; 64];
        let mut want = [0u8; 32];
        reference(&key, b"SMBS2CCipherKey\0", &context, &mut want);
        let got = kdf256(&key, b"SMBS2CCipherKey\0", &context);
        assert_eq!(got, want);
        // L is part of the PRF input, so the 256-bit key does not start with the 128-bit one.
        assert_ne!(got[..16], kdf128(&key, b"SMBS2CCipherKey\0", &context));
    }

    #[test]
    fn kdf128_matches_generic_sp800_108() {
        let key = hex16("7CD451825D0450D235424E44BA6E78CC");
        let mut want = [0u8; 16];
        reference(&key, b"SMB2AESCMAC\0", b"SmbSign\0", &mut want);
        assert_eq!(kdf128(&key, b"SMB2AESCMAC\0", b"SmbSign\0"), want);
    }
}
