//! The string conventions of NTLM: UTF-16LE on the wire, and Windows' notion
//! of upper case.

/// Encodes `s` as UTF-16LE.
pub(crate) fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Decodes a UTF-16LE byte string; `None` for an odd length or a lone
/// surrogate.
pub(crate) fn from_utf16le(bytes: &[u8]) -> Option<String> {
    let pairs = bytes.chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    let units: Vec<u16> = pairs
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
        .collect();
    String::from_utf16(&units).ok()
}

/// Decodes an OEM (8-bit) string. The OEM code page is unknown to us; Latin-1
/// keeps ASCII names right, which is what clients that still send OEM use.
pub(crate) fn from_oem(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// Upper-cases one character at a time, keeping characters whose upper case
/// is longer than one character (like 'ß') as they are: Windows upcases per
/// UTF-16 unit and never changes a string's length, and the NTOWFv2 key must
/// match what the client computed.
pub(crate) fn upcase(s: &str) -> String {
    s.chars().map(upcase_char).collect()
}

fn upcase_char(c: char) -> char {
    let mut upper = c.to_uppercase();
    match (upper.next(), upper.next()) {
        (Some(u), None) => u,
        _ => c,
    }
}

/// Case-insensitive name comparison, in the same sense as [`upcase`].
pub(crate) fn eq_ignore_case(a: &str, b: &str) -> bool {
    a.chars().map(upcase_char).eq(b.chars().map(upcase_char))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_round_trip() {
        let bytes = utf16le("Us\u{e9}r");
        assert_eq!(bytes, [0x55, 0, 0x73, 0, 0xe9, 0, 0x72, 0]);
        assert_eq!(from_utf16le(&bytes).as_deref(), Some("Us\u{e9}r"));
        assert_eq!(from_utf16le(&bytes[..3]), None);
        assert_eq!(from_utf16le(&[0x00, 0xd8]), None);
    }

    #[test]
    fn upcase_keeps_length() {
        assert_eq!(upcase("user\u{e9}"), "USER\u{c9}");
        assert_eq!(upcase("stra\u{df}e"), "STRA\u{df}E");
        assert!(eq_ignore_case("Alice", "aLICE"));
        assert!(!eq_ignore_case("Alice", "Alicia"));
    }
}
