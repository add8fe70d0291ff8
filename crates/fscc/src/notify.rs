//! FILE_NOTIFY_INFORMATION (MS-FSCC 2.4.42): the changes a CHANGE_NOTIFY
//! response reports, and the completion filter and action values.

use crate::wire::{len_u32, patch_u32, put_u32, utf16};

/// CompletionFilter bits (MS-SMB2 2.2.35).
pub mod filter {
    pub const FILE_NAME: u32 = 0x0001;
    pub const DIR_NAME: u32 = 0x0002;
    pub const ATTRIBUTES: u32 = 0x0004;
    pub const SIZE: u32 = 0x0008;
    pub const LAST_WRITE: u32 = 0x0010;
    pub const LAST_ACCESS: u32 = 0x0020;
    pub const CREATION: u32 = 0x0040;
    pub const EA: u32 = 0x0080;
    pub const SECURITY: u32 = 0x0100;
    pub const STREAM_NAME: u32 = 0x0200;
    pub const STREAM_SIZE: u32 = 0x0400;
    pub const STREAM_WRITE: u32 = 0x0800;
    /// Every bit a filter may hold.
    pub const ALL: u32 = 0x0FFF;
}

/// Action values.
pub mod action {
    pub const ADDED: u32 = 1;
    pub const REMOVED: u32 = 2;
    pub const MODIFIED: u32 = 3;
    pub const RENAMED_OLD_NAME: u32 = 4;
    pub const RENAMED_NEW_NAME: u32 = 5;
    pub const ADDED_STREAM: u32 = 6;
    pub const REMOVED_STREAM: u32 = 7;
    pub const MODIFIED_STREAM: u32 = 8;
}

/// Bytes one entry for `name` takes, padded to the next entry.
pub fn entry_size(name: &str) -> usize {
    (12 + name.encode_utf16().count() * 2).next_multiple_of(4)
}

/// Encodes `changes` (action, name relative to the watched directory, in
/// `\`-separated form) as a chain of entries, each 4-byte aligned.
pub fn encode_changes<'a>(changes: impl IntoIterator<Item = (u32, &'a str)>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    for (action, name) in changes {
        let at = out.len().next_multiple_of(4);
        out.resize(at, 0);
        if let Some(prev) = last {
            patch_u32(&mut out, prev, (at - prev) as u32);
        }
        let name = utf16(name);
        put_u32(&mut out, 0);
        put_u32(&mut out, action);
        put_u32(&mut out, len_u32(&name));
        out.extend_from_slice(&name);
        last = Some(at);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_chain_on_four_byte_boundaries() {
        let b = encode_changes([(action::ADDED, "a"), (action::REMOVED, "bc")]);
        // 12 + 2 = 14, padded to 16 for the next entry.
        assert_eq!(&b[0..4], &16u32.to_le_bytes());
        assert_eq!(&b[4..8], &action::ADDED.to_le_bytes());
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        assert_eq!(&b[12..14], b"a\0");
        assert_eq!(
            &b[16..20],
            &0u32.to_le_bytes(),
            "the last says none follows"
        );
        assert_eq!(&b[20..24], &action::REMOVED.to_le_bytes());
        assert_eq!(b.len(), 16 + 12 + 4);
        assert_eq!(entry_size("a"), 16);
        assert_eq!(entry_size("bc"), 16);
        assert!(encode_changes([]).is_empty());
    }
}
