//! The little of ASN.1 DER that SPNEGO needs: single-byte tags and definite
//! lengths, read over borrowed slices and written into vectors.

use crate::acceptor::AuthError;

pub(crate) const SEQUENCE: u8 = 0x30;
pub(crate) const OID: u8 = 0x06;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const ENUMERATED: u8 = 0x0a;
pub(crate) const GENERAL_STRING: u8 = 0x1b;
/// [APPLICATION 0], constructed: the GSS-API InitialContextToken.
pub(crate) const APPLICATION_0: u8 = 0x60;

/// [n], context-specific and constructed.
pub(crate) const fn context(n: u8) -> u8 {
    0xa0 | n
}

/// One element: its tag, its contents, and the whole encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    pub value: &'a [u8],
    pub raw: &'a [u8],
}

/// Reads one element from the front of `input`; returns it and what follows.
pub(crate) fn read(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), AuthError> {
    let (&tag, rest) = input.split_first().ok_or(AuthError::Malformed)?;
    if tag & 0x1f == 0x1f {
        // High tag numbers never occur in SPNEGO.
        return Err(AuthError::Malformed);
    }
    let (&first, rest) = rest.split_first().ok_or(AuthError::Malformed)?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // 0x80 alone is BER's indefinite length, not allowed in DER; more
        // than four length bytes cannot describe a token we would accept.
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return Err(AuthError::Malformed);
        }
        let bytes = rest.get(..count).ok_or(AuthError::Malformed)?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[count..])
    };
    let value = rest.get(..len).ok_or(AuthError::Malformed)?;
    let header_len = input.len() - rest.len();
    let tlv = Tlv {
        tag,
        value,
        raw: &input[..header_len + len],
    };
    Ok((tlv, &rest[len..]))
}

/// Reads one element that must carry `tag`.
pub(crate) fn read_tagged(input: &[u8], tag: u8) -> Result<(Tlv<'_>, &[u8]), AuthError> {
    let (tlv, rest) = read(input)?;
    if tlv.tag != tag {
        return Err(AuthError::Malformed);
    }
    Ok((tlv, rest))
}

/// How deep [`well_formed`] follows constructed elements: Kerberos'
/// messages nest about a dozen deep.
const MAX_DEPTH: usize = 32;

/// Whether `input` is exactly one element whose constructed parts, at
/// every depth, hold only elements whose lengths fit inside them. Decoders
/// of other crates are given only what passes: one of them computes a
/// length as an unchecked sum (picky-asn1-der 0.5.7, de/mod.rs:643), which
/// a length near `usize::MAX` overflows.
pub(crate) fn well_formed(input: &[u8]) -> bool {
    fn walk(mut input: &[u8], depth: usize) -> bool {
        while !input.is_empty() {
            let Ok((tlv, rest)) = read(input) else {
                return false;
            };
            // Bit 6 marks a constructed element: its contents are elements.
            if tlv.tag & 0x20 != 0 && (depth >= MAX_DEPTH || !walk(tlv.value, depth + 1)) {
                return false;
            }
            input = rest;
        }
        true
    }
    matches!(read(input), Ok((_, rest)) if rest.is_empty()) && walk(input, 0)
}

/// Reads a whole sequence of elements.
pub(crate) fn elements(mut input: &[u8]) -> Result<Vec<Tlv<'_>>, AuthError> {
    let mut out = Vec::new();
    while !input.is_empty() {
        let (tlv, rest) = read(input)?;
        out.push(tlv);
        input = rest;
    }
    Ok(out)
}

/// Reads `input` as exactly one element with `tag` and returns its contents.
pub(crate) fn only(input: &[u8], tag: u8) -> Result<&[u8], AuthError> {
    let (tlv, rest) = read_tagged(input, tag)?;
    if !rest.is_empty() {
        return Err(AuthError::Malformed);
    }
    Ok(tlv.value)
}

/// Writes one element.
pub(crate) fn write(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
}

/// Encodes one element into a new vector.
pub(crate) fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 6);
    write(&mut out, tag, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_follows_every_constructed_element() {
        let inner = tlv(SEQUENCE, &tlv(OCTET_STRING, b"ok"));
        assert!(well_formed(&tlv(context(0), &inner)));
        // A length inside that runs past its parent, one that cannot fit
        // in four bytes, and trailing bytes are refused.
        assert!(!well_formed(&[0xa0, 0x04, 0x30, 0x05, 0x04, 0x00]));
        assert!(!well_formed(&[
            0x30, 0x0a, 0x04, 0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff
        ]));
        assert!(!well_formed(&[0x04, 0x00, 0x00]));
        // Nesting deeper than a Kerberos message ever does.
        let mut deep = tlv(OCTET_STRING, b"");
        for _ in 0..40 {
            deep = tlv(SEQUENCE, &deep);
        }
        assert!(!well_formed(&deep));
    }

    #[test]
    fn lengths_round_trip() {
        for len in [0usize, 1, 0x7f, 0x80, 0xff, 0x100, 0x1234, 0x10000] {
            let value = vec![0x5a; len];
            let encoded = tlv(OCTET_STRING, &value);
            let (read_back, rest) = read(&encoded).unwrap();
            assert_eq!(read_back.tag, OCTET_STRING);
            assert_eq!(read_back.value, value.as_slice());
            assert_eq!(read_back.raw, encoded.as_slice());
            assert!(rest.is_empty());
        }
        assert_eq!(tlv(OCTET_STRING, &[0; 0x80])[..3], [0x04, 0x81, 0x80]);
        assert_eq!(
            tlv(OCTET_STRING, &[0; 0x100])[..4],
            [0x04, 0x82, 0x01, 0x00]
        );
    }

    #[test]
    fn bad_encodings_are_malformed() {
        assert_eq!(read(&[]), Err(AuthError::Malformed));
        assert_eq!(read(&[0x04]), Err(AuthError::Malformed));
        assert_eq!(read(&[0x04, 0x05, 1, 2]), Err(AuthError::Malformed));
        assert_eq!(read(&[0x04, 0x80, 0, 0]), Err(AuthError::Malformed));
        assert_eq!(
            read(&[0x04, 0x85, 0, 0, 0, 0, 1]),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            read(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]),
            Err(AuthError::Malformed)
        );
        assert_eq!(read(&[0x1f, 0x01, 0x00]), Err(AuthError::Malformed));
        assert_eq!(
            only(&[0x04, 0x00, 0x00], OCTET_STRING),
            Err(AuthError::Malformed)
        );
        assert_eq!(only(&[0x04, 0x00], SEQUENCE), Err(AuthError::Malformed));
    }
}
