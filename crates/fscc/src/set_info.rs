//! SET_INFO buffers for files (InfoType SMB2_0_INFO_FILE, MS-FSCC 2.4).
//!
//! A buffer shorter than its structure is BufferTooSmall
//! (STATUS_INFO_LENGTH_MISMATCH); lengths inside it that do not add up are
//! InvalidParameter. Bytes after the structure are ignored, as Windows does.

use crate::wire::{from_utf16, get_u32, get_u64, get_u8};
use crate::InfoError;

/// FILE_BASIC_INFORMATION as sent in SET_INFO, raw: a time of 0 means
/// "leave unchanged", -1 (u64::MAX) "stop updating it for this open" and
/// -2 "resume updating"; attributes 0 means "leave unchanged".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BasicInfo {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub attributes: u32,
}

/// FILE_RENAME_INFORMATION_TYPE_2 (MS-FSCC 2.4.42.2), also the layout of
/// FileLinkInformation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenameInfo {
    pub replace_if_exists: bool,
    /// MUST be 0 over SMB2; kept so the core can refuse anything else.
    pub root_directory: u64,
    /// Target path from the share root, backslash-separated, as sent.
    pub file_name: String,
}

/// FileRenameInformationEx flag: replace an existing target.
pub const FILE_RENAME_REPLACE_IF_EXISTS: u32 = 0x0000_0001;
/// FileRenameInformationEx flag: POSIX semantics (replace even if open).
pub const FILE_RENAME_POSIX_SEMANTICS: u32 = 0x0000_0002;

/// Offset of FileName in FILE_RENAME_INFORMATION_TYPE_2.
const RENAME_FIXED: usize = 20;

/// FileBasicInformation, 40 bytes (the trailing 4 are reserved).
pub fn decode_basic(buf: &[u8]) -> Result<BasicInfo, InfoError> {
    if buf.len() < 40 {
        return Err(InfoError::BufferTooSmall);
    }
    let u64_at = |at| get_u64(buf, at).ok_or(InfoError::BufferTooSmall);
    Ok(BasicInfo {
        creation_time: u64_at(0)?,
        last_access_time: u64_at(8)?,
        last_write_time: u64_at(16)?,
        change_time: u64_at(24)?,
        attributes: get_u32(buf, 32).ok_or(InfoError::BufferTooSmall)?,
    })
}

/// FileRenameInformation (and FileLinkInformation) in the SMB2 form:
/// ReplaceIfExists (1), Reserved (7), RootDirectory (8),
/// FileNameLength (4), FileName.
pub fn decode_rename(buf: &[u8]) -> Result<RenameInfo, InfoError> {
    let replace = get_u8(buf, 0).ok_or(InfoError::BufferTooSmall)?;
    decode_rename_tail(buf, replace != 0)
}

/// FileRenameInformationEx: as [`decode_rename`] with a 4-byte Flags field
/// (FILE_RENAME_*) in place of ReplaceIfExists; returns the flags too.
/// `replace_if_exists` reflects FILE_RENAME_REPLACE_IF_EXISTS.
pub fn decode_rename_ex(buf: &[u8]) -> Result<(u32, RenameInfo), InfoError> {
    let flags = get_u32(buf, 0).ok_or(InfoError::BufferTooSmall)?;
    let info = decode_rename_tail(buf, flags & FILE_RENAME_REPLACE_IF_EXISTS != 0)?;
    Ok((flags, info))
}

fn decode_rename_tail(buf: &[u8], replace_if_exists: bool) -> Result<RenameInfo, InfoError> {
    if buf.len() < RENAME_FIXED {
        return Err(InfoError::BufferTooSmall);
    }
    let root_directory = get_u64(buf, 8).ok_or(InfoError::BufferTooSmall)?;
    let name_len = get_u32(buf, 16).ok_or(InfoError::BufferTooSmall)?;
    let name_len = usize::try_from(name_len).map_err(|_| InfoError::InvalidParameter)?;
    let name = RENAME_FIXED
        .checked_add(name_len)
        .and_then(|end| buf.get(RENAME_FIXED..end))
        .ok_or(InfoError::InvalidParameter)?;
    let file_name = from_utf16(name).ok_or(InfoError::InvalidParameter)?;
    Ok(RenameInfo {
        replace_if_exists,
        root_directory,
        file_name,
    })
}

/// FileDispositionInformation: DeletePending (1 byte, non-zero is true).
/// FileDispositionInformationEx carries 4 bytes of flags: use [`decode_u32`].
pub fn decode_disposition(buf: &[u8]) -> Result<bool, InfoError> {
    get_u8(buf, 0)
        .map(|b| b != 0)
        .ok_or(InfoError::BufferTooSmall)
}

/// An 8-byte value: FileEndOfFileInformation, FileAllocationInformation,
/// FilePositionInformation, FileValidDataLengthInformation.
pub fn decode_u64(buf: &[u8]) -> Result<u64, InfoError> {
    get_u64(buf, 0).ok_or(InfoError::BufferTooSmall)
}

/// A 4-byte value: FileModeInformation, FileDispositionInformationEx.
pub fn decode_u32(buf: &[u8]) -> Result<u32, InfoError> {
    get_u32(buf, 0).ok_or(InfoError::BufferTooSmall)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rename_buf(replace: u8, root: u64, name_len: u32, name: &[u8]) -> Vec<u8> {
        let mut b = vec![replace, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE];
        b.extend(root.to_le_bytes());
        b.extend(name_len.to_le_bytes());
        b.extend(name);
        b
    }

    #[test]
    fn basic_decodes_raw_values() {
        let mut b = Vec::new();
        b.extend(0u64.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes());
        b.extend(0x01D0_0000_0000_0003u64.to_le_bytes());
        b.extend((u64::MAX - 1).to_le_bytes());
        b.extend(0x21u32.to_le_bytes());
        b.extend([0xFF; 4]); // Reserved, ignored
        assert_eq!(
            decode_basic(&b),
            Ok(BasicInfo {
                creation_time: 0,
                last_access_time: u64::MAX,
                last_write_time: 0x01D0_0000_0000_0003,
                change_time: u64::MAX - 1,
                attributes: 0x21,
            })
        );
    }

    #[test]
    fn short_buffers_are_errors() {
        for n in 0..40 {
            assert_eq!(decode_basic(&vec![0; n]), Err(InfoError::BufferTooSmall));
        }
        for n in 0..20 {
            assert_eq!(decode_rename(&vec![0; n]), Err(InfoError::BufferTooSmall));
            assert_eq!(
                decode_rename_ex(&vec![0; n]),
                Err(InfoError::BufferTooSmall)
            );
        }
        assert_eq!(decode_disposition(&[]), Err(InfoError::BufferTooSmall));
        for n in 0..8 {
            assert_eq!(decode_u64(&vec![0; n]), Err(InfoError::BufferTooSmall));
        }
        for n in 0..4 {
            assert_eq!(decode_u32(&vec![0; n]), Err(InfoError::BufferTooSmall));
        }
    }

    #[test]
    fn rename_decodes() {
        let name = [b'd', 0, b'\\', 0, b'n', 0, 0xe9, 0];
        let b = rename_buf(1, 0, 8, &name);
        assert_eq!(
            decode_rename(&b),
            Ok(RenameInfo {
                replace_if_exists: true,
                root_directory: 0,
                file_name: "d\\n\u{e9}".into(),
            })
        );
        let b = rename_buf(0, 5, 0, &[]);
        let r = decode_rename(&b).unwrap();
        assert!(!r.replace_if_exists);
        assert_eq!(r.root_directory, 5);
        assert_eq!(r.file_name, "");
        // Trailing padding after the name is ignored.
        let mut b = rename_buf(0, 0, 2, &[b'x', 0]);
        b.extend([0; 6]);
        assert_eq!(decode_rename(&b).unwrap().file_name, "x");
    }

    #[test]
    fn rename_bad_lengths_and_names() {
        // Name length past the buffer, including a huge one.
        let b = rename_buf(0, 0, 4, &[b'x', 0]);
        assert_eq!(decode_rename(&b), Err(InfoError::InvalidParameter));
        let b = rename_buf(0, 0, u32::MAX, &[b'x', 0]);
        assert_eq!(decode_rename(&b), Err(InfoError::InvalidParameter));
        // Odd length.
        let b = rename_buf(0, 0, 1, &[b'x', 0]);
        assert_eq!(decode_rename(&b), Err(InfoError::InvalidParameter));
        // Unpaired surrogate.
        let b = rename_buf(0, 0, 2, &[0x00, 0xDC]);
        assert_eq!(decode_rename(&b), Err(InfoError::InvalidParameter));
    }

    #[test]
    fn rename_ex_flags() {
        let mut b = rename_buf(0, 0, 2, &[b'y', 0]);
        b[..4].copy_from_slice(&3u32.to_le_bytes());
        let (flags, r) = decode_rename_ex(&b).unwrap();
        assert_eq!(
            flags,
            FILE_RENAME_REPLACE_IF_EXISTS | FILE_RENAME_POSIX_SEMANTICS
        );
        assert!(r.replace_if_exists);
        assert_eq!(r.file_name, "y");
        b[..4].copy_from_slice(&2u32.to_le_bytes());
        assert!(!decode_rename_ex(&b).unwrap().1.replace_if_exists);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small linear congruential generator: deterministic, no dependency.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = (x >> 56) as usize % 64;
            let buf: Vec<u8> = (0..len)
                .map(|i| (x.rotate_left(i as u32 * 7) & 0xFF) as u8)
                .collect();
            let _ = decode_basic(&buf);
            let _ = decode_disposition(&buf);
            let _ = decode_u32(&buf);
            let _ = decode_u64(&buf);
            if let Ok(r) = decode_rename(&buf) {
                assert!(20 + 2 * r.file_name.encode_utf16().count() <= buf.len());
            }
            let _ = decode_rename_ex(&buf);
        }
    }

    #[test]
    fn small_values() {
        assert_eq!(decode_disposition(&[1]), Ok(true));
        assert_eq!(decode_disposition(&[0x80, 0, 0]), Ok(true));
        assert_eq!(decode_disposition(&[0]), Ok(false));
        assert_eq!(
            decode_u64(&[1, 2, 3, 4, 5, 6, 7, 8, 9]),
            Ok(0x0807_0605_0403_0201)
        );
        assert_eq!(decode_u32(&[0x20, 0, 0, 0]), Ok(0x20));
    }
}
