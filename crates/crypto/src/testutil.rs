//! Helpers shared by the unit tests.

/// Decodes hex, ignoring whitespace, so long vectors can be pasted as they
/// were published (wrapped over several lines).
pub fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|pair| {
            let text = std::str::from_utf8(pair).expect("ascii");
            u8::from_str_radix(text, 16).expect("hex digit")
        })
        .collect()
}

pub fn hex16(s: &str) -> [u8; 16] {
    hex(s).try_into().expect("16 bytes")
}
