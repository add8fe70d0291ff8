//! SMB2 command names (MS-SMB2 2.2.1), the keys of the per-command views.

use copyless_proto::command as cmd;

/// Number of known command codes (0 to COUNT-1), named by the wire crate.
const KNOWN: usize = cmd::COUNT;

/// Slots for the known commands plus one for any other code.
pub const SLOTS: usize = KNOWN + 1;
const OTHER: &str = "OTHER";

/// The slot a command code is counted in.
pub fn slot(code: u16) -> usize {
    usize::from(code).min(KNOWN)
}

pub fn slot_name(slot: usize) -> &'static str {
    match u16::try_from(slot) {
        Ok(code) if slot < KNOWN => cmd::name(code),
        _ => OTHER,
    }
}

/// The code of a slot; None for the catch-all.
pub fn slot_code(slot: usize) -> Option<u16> {
    if slot < KNOWN {
        u16::try_from(slot).ok()
    } else {
        None
    }
}

pub fn name(code: u16) -> &'static str {
    slot_name(slot(code))
}

/// Parses a command name as a user types it: any case, `-` or `_`, or the
/// number.
pub fn parse(text: &str) -> Option<u16> {
    let wanted = text.trim().to_ascii_uppercase().replace('-', "_");
    if let Some(code) = (0..KNOWN as u16).find(|c| cmd::name(*c) == wanted) {
        return Some(code);
    }
    let code = match wanted.strip_prefix("0X") {
        Some(hex) => u16::from_str_radix(hex, 16).ok()?,
        None => wanted.parse().ok()?,
    };
    (usize::from(code) < KNOWN).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_specification() {
        assert_eq!(name(0x0000), "NEGOTIATE");
        assert_eq!(name(0x0005), "CREATE");
        assert_eq!(name(0x0008), "READ");
        assert_eq!(name(0x0009), "WRITE");
        assert_eq!(name(0x0010), "QUERY_INFO");
        assert_eq!(name(0x0012), "OPLOCK_BREAK");
        assert_eq!(name(0x0013), "OTHER");
        assert_eq!(name(u16::MAX), "OTHER");
        assert_eq!(slot_code(slot(0x0013)), None);
        assert_eq!(slot_code(9), Some(9));
    }

    #[test]
    fn parses_what_users_type() {
        assert_eq!(parse("write"), Some(9));
        assert_eq!(parse("Query-Info"), Some(0x10));
        assert_eq!(parse("QUERY_DIRECTORY"), Some(0x0e));
        assert_eq!(parse("8"), Some(8));
        assert_eq!(parse("0x11"), Some(0x11));
        assert_eq!(parse("19"), None);
        assert_eq!(parse("frobnicate"), None);
        assert_eq!(parse(""), None);
    }
}
