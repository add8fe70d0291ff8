//! Little-endian writing into a `Vec<u8>` and bounds-checked reading from
//! untrusted slices.

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_zeros(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, 0);
}

/// UTF-16LE code units of `s`, without a terminator.
pub(crate) fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Overwrites four bytes at `at` that the writer reserved earlier.
pub(crate) fn patch_u32(out: &mut [u8], at: usize, v: u32) {
    if let Some(slot) = out.get_mut(at..at + 4) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

/// Length of a byte string as a u32 wire field; names longer than 4 GiB cannot
/// occur in a message, so saturating is only a guard.
pub(crate) fn len_u32(b: &[u8]) -> u32 {
    u32::try_from(b.len()).unwrap_or(u32::MAX)
}

pub(crate) fn get_u8(buf: &[u8], at: usize) -> Option<u8> {
    buf.get(at).copied()
}

pub(crate) fn get_u16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

pub(crate) fn get_u32(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

pub(crate) fn get_u64(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

/// Decodes UTF-16LE bytes; None for an odd length or unpaired surrogates.
pub(crate) fn from_utf16(b: &[u8]) -> Option<String> {
    if b.len() % 2 != 0 {
        return None;
    }
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_round_trip() {
        let b = utf16("a\u{e9}\u{1F600}");
        assert_eq!(b, [0x61, 0, 0xe9, 0, 0x3d, 0xd8, 0x00, 0xde]);
        assert_eq!(from_utf16(&b).as_deref(), Some("a\u{e9}\u{1F600}"));
    }

    #[test]
    fn bad_utf16_rejected() {
        assert_eq!(from_utf16(&[0x61]), None);
        assert_eq!(from_utf16(&[0x3d, 0xd8]), None); // lone high surrogate
    }

    #[test]
    fn reads_are_bounds_checked() {
        let b = [1, 2, 3, 4, 5];
        assert_eq!(get_u32(&b, 0), Some(0x0403_0201));
        assert_eq!(get_u32(&b, 2), None);
        assert_eq!(get_u64(&b, 0), None);
        assert_eq!(get_u32(&b, usize::MAX), None);
        assert_eq!(get_u8(&b, 5), None);
    }
}
