//! UTF-16LE strings as SMB carries them.

use crate::wire::Error;

/// Decodes UTF-16LE; an odd length or an unpaired surrogate is an error.
pub fn decode(bytes: &[u8]) -> Result<String, Error> {
    if !bytes.len().is_multiple_of(2) {
        return Err(Error("odd UTF-16 length"));
    }
    let units = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| Error("invalid UTF-16"))
}

pub fn encode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 2);
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let s = "dir\\Fïle😀.txt";
        assert_eq!(super::decode(&super::encode(s)).unwrap(), s);
        assert!(super::decode(&[0x41]).is_err());
        assert!(super::decode(&[0x00, 0xd8]).is_err());
    }
}
