//! QUERY_INFO for files (InfoType SMB2_0_INFO_FILE, MS-FSCC 2.4).

use crate::attr;
use crate::class;
use crate::dir::sizes;
use crate::wire::{
    get_u32, len_u32, patch_u32, put_u16, put_u32, put_u64, put_u8, put_zeros, utf16,
};
use crate::{FileInfo, InfoError};

/// What a file query needs beyond [`FileInfo`]: facts about the open.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueryContext<'a> {
    /// Path from the share root with backslashes and a leading backslash
    /// (`\dir\file.txt`; the root is `\`), as Windows returns it in
    /// FileAllInformation.
    pub name: &'a str,
    /// The open's granted access (FileAccessInformation).
    pub access_mask: u32,
    /// CurrentByteOffset (FilePositionInformation); MS-SMB2 3.3.5.20.1 says
    /// an SMB2 server SHOULD report 0.
    pub position: u64,
    /// FILE_MODE flags of the open (FileModeInformation).
    pub mode: u32,
    /// AlignmentRequirement (FileAlignmentInformation); 0 is byte alignment.
    pub alignment: u32,
    /// Named alternate data streams and their sizes
    /// (FileStreamInformation lists them after `::$DATA`).
    pub streams: &'a [(String, u64)],
}

/// A query answer fitted to the client's OutputBufferLength.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryOutput {
    pub data: Vec<u8>,
    /// The answer was cut short: reply STATUS_BUFFER_OVERFLOW with `data`.
    pub overflow: bool,
}

/// The smallest OutputBufferLength Windows accepts for a file class (the C
/// `sizeof` of its structure, MS-FSA 2.1.5.12); below it the answer is
/// STATUS_INFO_LENGTH_MISMATCH. None for classes this crate does not encode.
pub fn min_file_info_size(class: u8) -> Option<usize> {
    Some(match class {
        class::FILE_BASIC_INFORMATION => 40,
        class::FILE_STANDARD_INFORMATION => 24,
        class::FILE_INTERNAL_INFORMATION => 8,
        class::FILE_EA_INFORMATION => 4,
        class::FILE_ACCESS_INFORMATION => 4,
        class::FILE_POSITION_INFORMATION => 8,
        class::FILE_MODE_INFORMATION => 4,
        class::FILE_ALIGNMENT_INFORMATION => 4,
        // BlockAlign(FieldOffset(NameInformation.FileName) + 2, 8)
        class::FILE_ALL_INFORMATION => 104,
        class::FILE_NETWORK_OPEN_INFORMATION => 56,
        class::FILE_ATTRIBUTE_TAG_INFORMATION => 8,
        class::FILE_STREAM_INFORMATION => 32,
        class::FILE_COMPRESSION_INFORMATION => 16,
        // BlockAlign(FieldOffset(FILE_NAME_INFORMATION.FileName) + 2, 4)
        class::FILE_NORMALIZED_NAME_INFORMATION => 8,
        class::FILE_ID_INFORMATION => 24,
        _ => return None,
    })
}

/// Encodes file information class `class` for `info`, complete (not fitted
/// to any buffer; see [`query_file_info`]).
///
/// Directories report EndOfFile and AllocationSize 0 and carry
/// FILE_ATTRIBUTE_DIRECTORY, as NTFS does. Classes:
/// Basic, Standard, Internal, Ea, Access, Position, Mode, Alignment, All,
/// NetworkOpen, AttributeTag, Stream (one `::$DATA` entry for a file, empty
/// for a directory), Compression (uncompressed), NormalizedName (the path
/// without its leading backslash; the root is empty).
///
/// FileNameInformation is NotSupported (MS-FSA 2.1.5.12.19: not served to
/// remote clients). FileAlternateNameInformation and FileFullEaInformation
/// are InvalidClass here: we keep no short names, and EAs are the core's.
/// FileIdInformation needs the volume serial: use [`encode_file_id_info`].
pub fn encode_file_info(
    class: u8,
    info: &FileInfo,
    ctx: &QueryContext,
) -> Result<Vec<u8>, InfoError> {
    let mut out = Vec::with_capacity(64);
    match class {
        class::FILE_BASIC_INFORMATION => put_basic(&mut out, info),
        class::FILE_STANDARD_INFORMATION => put_standard(&mut out, info),
        class::FILE_INTERNAL_INFORMATION => put_u64(&mut out, info.file_id),
        class::FILE_EA_INFORMATION => put_u32(&mut out, info.ea_size),
        class::FILE_ACCESS_INFORMATION => put_u32(&mut out, ctx.access_mask),
        class::FILE_POSITION_INFORMATION => put_u64(&mut out, ctx.position),
        class::FILE_MODE_INFORMATION => put_u32(&mut out, ctx.mode),
        class::FILE_ALIGNMENT_INFORMATION => put_u32(&mut out, ctx.alignment),
        class::FILE_ALL_INFORMATION => {
            put_basic(&mut out, info);
            put_standard(&mut out, info);
            put_u64(&mut out, info.file_id);
            put_u32(&mut out, info.ea_size);
            put_u32(&mut out, ctx.access_mask);
            put_u64(&mut out, ctx.position);
            put_u32(&mut out, ctx.mode);
            put_u32(&mut out, ctx.alignment);
            put_name(&mut out, ctx.name);
        }
        class::FILE_NETWORK_OPEN_INFORMATION => {
            let (eof, alloc) = sizes(info);
            put_times(&mut out, info);
            put_u64(&mut out, alloc);
            put_u64(&mut out, eof);
            put_u32(&mut out, attr::on_wire(info.attributes, info.is_dir));
            put_u32(&mut out, 0); // Reserved
        }
        class::FILE_ATTRIBUTE_TAG_INFORMATION => {
            put_u32(&mut out, attr::on_wire(info.attributes, info.is_dir));
            put_u32(&mut out, 0); // ReparseTag: we serve no reparse points
        }
        class::FILE_STREAM_INFORMATION => {
            // A directory has no unnamed data stream, so no entry for it.
            let main = (!info.is_dir).then(|| ("::$DATA".to_owned(), info.end_of_file));
            let named = ctx
                .streams
                .iter()
                .map(|(n, size)| (format!(":{n}:$DATA"), *size));
            let mut prev: Option<usize> = None;
            for (name, size) in main.into_iter().chain(named) {
                if let Some(p) = prev {
                    out.resize(out.len().next_multiple_of(8), 0);
                    let next = len_u32(&out[p..]);
                    patch_u32(&mut out, p, next);
                }
                prev = Some(out.len());
                let name = utf16(&name);
                put_u32(&mut out, 0); // NextEntryOffset
                put_u32(&mut out, len_u32(&name));
                put_u64(&mut out, size);
                let alloc = if size == info.end_of_file && !info.is_dir {
                    info.allocation_size
                } else {
                    size.next_multiple_of(4096)
                };
                put_u64(&mut out, alloc);
                out.extend_from_slice(&name);
            }
        }
        class::FILE_COMPRESSION_INFORMATION => {
            let (eof, _) = sizes(info);
            put_u64(&mut out, eof); // CompressedFileSize of an uncompressed file
            put_u16(&mut out, 0); // CompressionFormat: COMPRESSION_FORMAT_NONE
            put_u8(&mut out, 0); // CompressionUnitShift
            put_u8(&mut out, 0); // ChunkShift
            put_u8(&mut out, 0); // ClusterShift
            put_zeros(&mut out, 3);
        }
        class::FILE_NORMALIZED_NAME_INFORMATION => {
            put_name(&mut out, ctx.name.strip_prefix('\\').unwrap_or(ctx.name));
        }
        class::FILE_NAME_INFORMATION => return Err(InfoError::NotSupported),
        _ => return Err(InfoError::InvalidClass),
    }
    Ok(out)
}

/// FileIdInformation (MS-FSCC 2.4.21): VolumeSerialNumber and a 128-bit
/// FileId whose low 64 bits are `info.file_id`.
pub fn encode_file_id_info(info: &FileInfo, volume_serial: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    put_u64(&mut out, volume_serial);
    put_u64(&mut out, info.file_id);
    put_u64(&mut out, 0);
    out
}

/// Encodes `class` and fits it to `output_buffer_length` the way Windows
/// does: BufferTooSmall below [`min_file_info_size`]; a name cut at a
/// character boundary with its full FileNameLength kept; stream entries
/// that do not fit left out. Either way `overflow` asks for
/// STATUS_BUFFER_OVERFLOW.
pub fn query_file_info(
    class: u8,
    info: &FileInfo,
    ctx: &QueryContext,
    output_buffer_length: usize,
) -> Result<QueryOutput, InfoError> {
    let data = encode_file_info(class, info, ctx)?;
    fit(class, data, output_buffer_length, min_file_info_size(class))
}

fn fit(
    class: u8,
    mut data: Vec<u8>,
    max: usize,
    min: Option<usize>,
) -> Result<QueryOutput, InfoError> {
    if max < min.unwrap_or(0) {
        return Err(InfoError::BufferTooSmall);
    }
    if data.len() <= max {
        return Ok(QueryOutput {
            data,
            overflow: false,
        });
    }
    let keep = match class {
        class::FILE_STREAM_INFORMATION => {
            // Whole entries only; the last kept one ends the chain.
            let mut at = 0;
            let mut keep = 0;
            let mut last = None;
            loop {
                let next = get_u32(&data, at).unwrap_or(0) as usize;
                let name_len = get_u32(&data, at + 4).unwrap_or(0) as usize;
                if at + 24 + name_len > max {
                    break;
                }
                keep = at + 24 + name_len;
                last = Some(at);
                if next == 0 {
                    break;
                }
                at += next;
            }
            if let Some(last) = last {
                patch_u32(&mut data, last, 0);
            }
            keep
        }
        class::FILE_ALL_INFORMATION | class::FILE_NORMALIZED_NAME_INFORMATION => {
            let fixed = if class == class::FILE_ALL_INFORMATION {
                100
            } else {
                4
            };
            fixed + (max.saturating_sub(fixed) & !1)
        }
        _ => max,
    };
    data.truncate(keep);
    Ok(QueryOutput {
        data,
        overflow: true,
    })
}

fn put_times(out: &mut Vec<u8>, info: &FileInfo) {
    put_u64(out, info.creation_time);
    put_u64(out, info.last_access_time);
    put_u64(out, info.last_write_time);
    put_u64(out, info.change_time);
}

/// FILE_BASIC_INFORMATION, 40 bytes.
fn put_basic(out: &mut Vec<u8>, info: &FileInfo) {
    put_times(out, info);
    put_u32(out, attr::on_wire(info.attributes, info.is_dir));
    put_u32(out, 0); // Reserved
}

/// FILE_STANDARD_INFORMATION, 24 bytes.
fn put_standard(out: &mut Vec<u8>, info: &FileInfo) {
    let (eof, alloc) = sizes(info);
    put_u64(out, alloc);
    put_u64(out, eof);
    put_u32(out, info.nlink);
    put_u8(out, u8::from(info.delete_pending));
    put_u8(out, u8::from(info.is_dir));
    put_zeros(out, 2);
}

/// FILE_NAME_INFORMATION: FileNameLength and the UTF-16LE name.
fn put_name(out: &mut Vec<u8>, name: &str) {
    let n = utf16(name);
    put_u32(out, len_u32(&n));
    out.extend_from_slice(&n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::get_u32;

    fn file() -> FileInfo {
        FileInfo {
            creation_time: 0x01D0_0000_0000_0001,
            last_access_time: 0x01D0_0000_0000_0002,
            last_write_time: 0x01D0_0000_0000_0003,
            change_time: 0x01D0_0000_0000_0004,
            end_of_file: 0x1234,
            allocation_size: 0x2000,
            attributes: attr::FILE_ATTRIBUTE_ARCHIVE,
            file_id: 0x0000_0001_0000_0042,
            nlink: 2,
            delete_pending: false,
            is_dir: false,
            ea_size: 0,
        }
    }

    fn dir() -> FileInfo {
        FileInfo {
            is_dir: true,
            attributes: 0,
            nlink: 3,
            ..file()
        }
    }

    fn ctx(name: &str) -> QueryContext<'_> {
        QueryContext {
            name,
            access_mask: 0x0012_019F,
            position: 0,
            mode: attr::FILE_SYNCHRONOUS_IO_NONALERT,
            alignment: 0,
            streams: &[],
        }
    }

    fn times() -> Vec<u8> {
        let mut v = Vec::new();
        for t in 1..=4u64 {
            v.extend((0x01D0_0000_0000_0000 | t).to_le_bytes());
        }
        v
    }

    #[test]
    fn basic_exact_bytes() {
        let b = encode_file_info(class::FILE_BASIC_INFORMATION, &file(), &ctx("\\f")).unwrap();
        let mut want = times();
        want.extend([0x20, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b, want);
    }

    #[test]
    fn standard_exact_bytes_file_and_directory() {
        let b = encode_file_info(class::FILE_STANDARD_INFORMATION, &file(), &ctx("")).unwrap();
        let mut want = Vec::new();
        want.extend(0x2000u64.to_le_bytes());
        want.extend(0x1234u64.to_le_bytes());
        want.extend([2, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b, want);

        let mut d = dir();
        d.delete_pending = true;
        let b = encode_file_info(class::FILE_STANDARD_INFORMATION, &d, &ctx("")).unwrap();
        let mut want = vec![0; 16];
        want.extend([3, 0, 0, 0, 1, 1, 0, 0]);
        assert_eq!(b, want);
    }

    #[test]
    fn small_fixed_classes() {
        let c = QueryContext {
            position: 0x55,
            alignment: 1,
            ..ctx("")
        };
        let f = FileInfo {
            ea_size: 9,
            ..file()
        };
        let enc = |class| encode_file_info(class, &f, &c).unwrap();
        assert_eq!(
            enc(class::FILE_INTERNAL_INFORMATION),
            0x0000_0001_0000_0042u64.to_le_bytes()
        );
        assert_eq!(enc(class::FILE_EA_INFORMATION), [9, 0, 0, 0]);
        assert_eq!(
            enc(class::FILE_ACCESS_INFORMATION),
            [0x9F, 0x01, 0x12, 0x00]
        );
        assert_eq!(enc(class::FILE_POSITION_INFORMATION), 0x55u64.to_le_bytes());
        assert_eq!(enc(class::FILE_MODE_INFORMATION), [0x20, 0, 0, 0]);
        assert_eq!(enc(class::FILE_ALIGNMENT_INFORMATION), [1, 0, 0, 0]);
        assert_eq!(
            enc(class::FILE_ATTRIBUTE_TAG_INFORMATION),
            [0x20, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn all_information_exact_bytes() {
        let b = encode_file_info(class::FILE_ALL_INFORMATION, &file(), &ctx("\\a\\b")).unwrap();
        let mut want = times();
        want.extend([0x20, 0, 0, 0, 0, 0, 0, 0]); // attributes, reserved
        want.extend(0x2000u64.to_le_bytes());
        want.extend(0x1234u64.to_le_bytes());
        want.extend([2, 0, 0, 0, 0, 0, 0, 0]); // links, delete, dir, reserved
        want.extend(0x0000_0001_0000_0042u64.to_le_bytes());
        want.extend([0, 0, 0, 0]); // EaSize
        want.extend([0x9F, 0x01, 0x12, 0x00]); // AccessFlags
        want.extend([0; 8]); // CurrentByteOffset
        want.extend([0x20, 0, 0, 0]); // Mode
        want.extend([0, 0, 0, 0]); // AlignmentRequirement
        want.extend([8, 0, 0, 0]);
        want.extend([b'\\', 0, b'a', 0, b'\\', 0, b'b', 0]);
        assert_eq!(want.len(), 108);
        assert_eq!(b, want);
    }

    #[test]
    fn network_open_exact_bytes() {
        let b = encode_file_info(class::FILE_NETWORK_OPEN_INFORMATION, &file(), &ctx("")).unwrap();
        let mut want = times();
        want.extend(0x2000u64.to_le_bytes()); // AllocationSize first
        want.extend(0x1234u64.to_le_bytes());
        want.extend([0x20, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b, want);

        let b = encode_file_info(class::FILE_NETWORK_OPEN_INFORMATION, &dir(), &ctx("")).unwrap();
        assert_eq!(&b[32..48], &[0; 16]);
        assert_eq!(get_u32(&b, 48), Some(attr::FILE_ATTRIBUTE_DIRECTORY));
    }

    #[test]
    fn stream_information() {
        let b = encode_file_info(class::FILE_STREAM_INFORMATION, &file(), &ctx("")).unwrap();
        let mut want = vec![0, 0, 0, 0, 14, 0, 0, 0];
        want.extend(0x1234u64.to_le_bytes());
        want.extend(0x2000u64.to_le_bytes());
        for c in "::$DATA".bytes() {
            want.extend([c, 0]);
        }
        assert_eq!(b, want);
        let b = encode_file_info(class::FILE_STREAM_INFORMATION, &dir(), &ctx("")).unwrap();
        assert!(b.is_empty());

        let streams = [("Zone.Identifier".to_string(), 26u64), ("x".to_string(), 0)];
        let c = QueryContext {
            streams: &streams,
            ..ctx("")
        };
        let b = encode_file_info(class::FILE_STREAM_INFORMATION, &file(), &c).unwrap();
        // ::$DATA (24 + 14 bytes, padded to 40), :Zone.Identifier:$DATA
        // (24 + 44, padded to 72), :x:$DATA (24 + 16).
        assert_eq!(get_u32(&b, 0), Some(40));
        assert_eq!(get_u32(&b, 40), Some(72));
        assert_eq!(get_u32(&b, 44), Some(44));
        assert_eq!(&b[48..56], &26u64.to_le_bytes());
        assert_eq!(get_u32(&b, 112), Some(0));
        assert_eq!(b.len(), 112 + 24 + 16);
        // Cut to what fits: whole entries, the last one ending the chain.
        let fitted = fit(class::FILE_STREAM_INFORMATION, b, 120, Some(24)).unwrap();
        assert!(fitted.overflow);
        assert_eq!(fitted.data.len(), 40 + 68);
        assert_eq!(get_u32(&fitted.data, 40), Some(0));
    }

    #[test]
    fn compression_and_normalized_name() {
        let b = encode_file_info(class::FILE_COMPRESSION_INFORMATION, &file(), &ctx("")).unwrap();
        let mut want = 0x1234u64.to_le_bytes().to_vec();
        want.extend([0; 8]);
        assert_eq!(b, want);

        let b = encode_file_info(
            class::FILE_NORMALIZED_NAME_INFORMATION,
            &file(),
            &ctx("\\d\\f"),
        )
        .unwrap();
        assert_eq!(b, [6, 0, 0, 0, b'd', 0, b'\\', 0, b'f', 0]);
        let b =
            encode_file_info(class::FILE_NORMALIZED_NAME_INFORMATION, &dir(), &ctx("\\")).unwrap();
        assert_eq!(b, [0, 0, 0, 0]);
    }

    #[test]
    fn unserved_classes() {
        let e = |class| encode_file_info(class, &file(), &ctx("\\f")).unwrap_err();
        assert_eq!(e(class::FILE_NAME_INFORMATION), InfoError::NotSupported);
        assert_eq!(
            e(class::FILE_ALTERNATE_NAME_INFORMATION),
            InfoError::InvalidClass
        );
        assert_eq!(e(class::FILE_RENAME_INFORMATION), InfoError::InvalidClass);
        assert_eq!(
            e(class::FILE_DIRECTORY_INFORMATION),
            InfoError::InvalidClass
        );
        assert_eq!(e(200), InfoError::InvalidClass);
        assert_eq!(min_file_info_size(200), None);
    }

    #[test]
    fn fixed_classes_match_their_minimum_size() {
        for class in [
            class::FILE_BASIC_INFORMATION,
            class::FILE_STANDARD_INFORMATION,
            class::FILE_INTERNAL_INFORMATION,
            class::FILE_EA_INFORMATION,
            class::FILE_ACCESS_INFORMATION,
            class::FILE_POSITION_INFORMATION,
            class::FILE_MODE_INFORMATION,
            class::FILE_ALIGNMENT_INFORMATION,
            class::FILE_NETWORK_OPEN_INFORMATION,
            class::FILE_ATTRIBUTE_TAG_INFORMATION,
            class::FILE_COMPRESSION_INFORMATION,
        ] {
            let b = encode_file_info(class, &file(), &ctx("\\x")).unwrap();
            assert_eq!(Some(b.len()), min_file_info_size(class), "class {class}");
        }
    }

    #[test]
    fn file_id_information() {
        let b = encode_file_id_info(&file(), 0x1122_3344_5566_7788);
        let mut want = 0x1122_3344_5566_7788u64.to_le_bytes().to_vec();
        want.extend(0x0000_0001_0000_0042u64.to_le_bytes());
        want.extend([0; 8]);
        assert_eq!(b, want);
        assert_eq!(min_file_info_size(class::FILE_ID_INFORMATION), Some(24));
    }

    #[test]
    fn query_fits_output_buffer() {
        let c = ctx("\\abc");
        let q = |class, max| query_file_info(class, &file(), &c, max);
        assert_eq!(
            q(class::FILE_BASIC_INFORMATION, 39),
            Err(InfoError::BufferTooSmall)
        );
        let ok = q(class::FILE_BASIC_INFORMATION, 40).unwrap();
        assert!(!ok.overflow);
        assert_eq!(ok.data.len(), 40);

        // All: 100 fixed + 8 name bytes.
        assert_eq!(
            q(class::FILE_ALL_INFORMATION, 103),
            Err(InfoError::BufferTooSmall)
        );
        let cut = q(class::FILE_ALL_INFORMATION, 105).unwrap();
        assert!(cut.overflow);
        assert_eq!(cut.data.len(), 104); // whole characters only
        assert_eq!(get_u32(&cut.data, 96), Some(8)); // full length kept
        let whole = q(class::FILE_ALL_INFORMATION, 108).unwrap();
        assert!(!whole.overflow);
        assert_eq!(whole.data.len(), 108);

        let s = q(class::FILE_STREAM_INFORMATION, 32).unwrap();
        assert!(s.overflow);
        assert!(s.data.is_empty());
        assert_eq!(
            q(class::FILE_STREAM_INFORMATION, 38).unwrap().data.len(),
            38
        );

        assert_eq!(
            q(class::FILE_NAME_INFORMATION, 1000),
            Err(InfoError::NotSupported)
        );
        assert_eq!(q(250, 1000), Err(InfoError::InvalidClass));
    }
}
