//! What the file-system controls a server carries out for its clients
//! take and give back in an IOCTL's buffers: server-side copy (MS-SMB2
//! 2.2.31.1, 2.2.32.1, 2.2.32.3), sparse files and block cloning
//! (MS-FSCC 2.3).

use crate::messages::FileId;
use crate::wire::{Reader, Result, Writer};

pub const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
pub const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
pub const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
pub const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
pub const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;
pub const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
pub const FSCTL_DUPLICATE_EXTENTS_TO_FILE: u32 = 0x0009_8344;
pub const FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX: u32 = 0x0009_83E8;
pub const FSCTL_GET_COMPRESSION: u32 = 0x0009_003C;
pub const FSCTL_SET_COMPRESSION: u32 = 0x0009_C040;

/// COMPRESSION_STATE (MS-FSCC 2.3.67): none, the filesystem's default,
/// or LZNT1 (what NTFS uses, and what a compressed file reports).
pub const COMPRESSION_FORMAT_NONE: u16 = 0;
pub const COMPRESSION_FORMAT_DEFAULT: u16 = 1;
pub const COMPRESSION_FORMAT_LZNT1: u16 = 2;

/// The length of a resume key (MS-SMB2 2.2.32.3).
pub const RESUME_KEY_LEN: usize = 24;

/// SRV_REQUEST_RESUME_KEY's response: the key, and a context Windows
/// leaves empty but sends room for (32 bytes in all).
pub fn write_resume_key(w: &mut Writer, key: &[u8; RESUME_KEY_LEN]) {
    w.bytes(key).u32(0).zeros(4);
}

/// The bytes of a SRV_REQUEST_RESUME_KEY response.
pub const RESUME_KEY_RESPONSE_LEN: usize = RESUME_KEY_LEN + 8;

/// One range of a SRV_COPYCHUNK_COPY (MS-SMB2 2.2.31.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub source_offset: u64,
    pub target_offset: u64,
    pub length: u32,
}

/// SRV_COPYCHUNK_COPY (MS-SMB2 2.2.31.1): the source's key and the
/// ranges to copy.
#[derive(Debug)]
pub struct CopyChunkCopy<'a> {
    pub source_key: [u8; RESUME_KEY_LEN],
    pub chunk_count: u32,
    chunks: &'a [u8],
}

/// The bytes of one chunk.
const CHUNK_LEN: usize = 24;

impl<'a> CopyChunkCopy<'a> {
    /// The key and the count; the chunks are read by
    /// [`CopyChunkCopy::chunks`], once the count is known to be sane.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        let source_key = r.array()?;
        let chunk_count = r.u32()?;
        r.skip(4)?;
        let chunks = r.bytes(r.remaining())?;
        Ok(CopyChunkCopy {
            source_key,
            chunk_count,
            chunks,
        })
    }

    /// The chunks, or None when the buffer holds fewer than the count
    /// says (more are ignored).
    pub fn chunks(&self) -> Option<Vec<Chunk>> {
        let count = self.chunk_count as usize;
        let bytes = self.chunks.get(..count.checked_mul(CHUNK_LEN)?)?;
        let mut r = Reader::new(bytes);
        let mut chunks = Vec::with_capacity(count);
        for _ in 0..count {
            let source_offset = r.u64().ok()?;
            let target_offset = r.u64().ok()?;
            let length = r.u32().ok()?;
            r.skip(4).ok()?;
            chunks.push(Chunk {
                source_offset,
                target_offset,
                length,
            });
        }
        Some(chunks)
    }
}

/// SRV_COPYCHUNK_RESPONSE (MS-SMB2 2.2.32.1): what was copied, or (when
/// a request is refused for its size) the server's limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyChunkResponse {
    pub chunks_written: u32,
    pub chunk_bytes_written: u32,
    pub total_bytes_written: u32,
}

/// The bytes of a SRV_COPYCHUNK_RESPONSE.
pub const COPYCHUNK_RESPONSE_LEN: usize = 12;

impl CopyChunkResponse {
    pub fn write(&self, w: &mut Writer) {
        w.u32(self.chunks_written)
            .u32(self.chunk_bytes_written)
            .u32(self.total_bytes_written);
    }

    pub fn to_vec(self) -> Vec<u8> {
        let mut w = Writer::new();
        self.write(&mut w);
        w.into_vec()
    }
}

/// FILE_SET_SPARSE_BUFFER (MS-FSCC 2.3.64): whether to make the file
/// sparse. Without a buffer, yes; a longer one is read for its first
/// byte, as Windows does.
pub fn parse_set_sparse(buf: &[u8]) -> bool {
    buf.first().is_none_or(|&b| b != 0)
}

/// A byte range as MS-FSCC gives it: two signed 64-bit numbers
/// (FILE_ZERO_DATA_INFORMATION's offset and end, 2.3.59;
/// FILE_ALLOCATED_RANGE_BUFFER's offset and length, 2.3.32). Negative
/// values are left to the caller to refuse.
fn parse_pair(buf: &[u8]) -> Result<(i64, i64)> {
    let mut r = Reader::new(buf);
    Ok((r.u64()? as i64, r.u64()? as i64))
}

/// FILE_ZERO_DATA_INFORMATION (MS-FSCC 2.3.59): zero from `offset` up
/// to (not including) `beyond_final_zero`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroData {
    pub offset: i64,
    pub beyond_final_zero: i64,
}

impl ZeroData {
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (offset, beyond_final_zero) = parse_pair(buf)?;
        Ok(ZeroData {
            offset,
            beyond_final_zero,
        })
    }
}

/// FILE_ALLOCATED_RANGE_BUFFER (MS-FSCC 2.3.32): a range asked about,
/// or one that holds data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatedRange {
    pub offset: i64,
    pub length: i64,
}

/// The bytes of a FILE_ALLOCATED_RANGE_BUFFER.
pub const ALLOCATED_RANGE_LEN: usize = 16;

impl AllocatedRange {
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let (offset, length) = parse_pair(buf)?;
        Ok(AllocatedRange { offset, length })
    }

    pub fn write(&self, w: &mut Writer) {
        w.u64(self.offset as u64).u64(self.length as u64);
    }
}

/// SMB2_DUPLICATE_EXTENTS_DATA (MS-FSCC 2.3.7.2) or its _EX form
/// (2.3.9.2): the source open and the range to clone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DuplicateExtents {
    pub source: FileId,
    pub source_offset: i64,
    pub target_offset: i64,
    pub byte_count: i64,
}

impl DuplicateExtents {
    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE's input.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Self::read(&mut Reader::new(buf))
    }

    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX's input: the same after its
    /// size, with flags after it (whether the clone must be atomic,
    /// which a clone on Linux always is).
    pub fn parse_ex(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        r.skip(8)?;
        let d = Self::read(&mut r)?;
        r.u32()?;
        Ok(d)
    }

    fn read(r: &mut Reader<'_>) -> Result<Self> {
        Ok(DuplicateExtents {
            source: FileId::read(r)?,
            source_offset: r.u64()? as i64,
            target_offset: r.u64()? as i64,
            byte_count: r.u64()? as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_request(key: [u8; 24], chunks: &[(u64, u64, u32)], count: u32) -> Vec<u8> {
        let mut w = Writer::new();
        w.bytes(&key).u32(count).u32(0);
        for &(s, t, l) in chunks {
            w.u64(s).u64(t).u32(l).u32(0);
        }
        w.into_vec()
    }

    #[test]
    fn copychunk_request_reads_its_chunks() {
        let buf = copy_request([7; 24], &[(0, 4096, 100), (8, 9, 10)], 2);
        let c = CopyChunkCopy::parse(&buf).unwrap();
        assert_eq!(c.source_key, [7; 24]);
        assert_eq!(
            c.chunks().unwrap(),
            vec![
                Chunk {
                    source_offset: 0,
                    target_offset: 4096,
                    length: 100
                },
                Chunk {
                    source_offset: 8,
                    target_offset: 9,
                    length: 10
                }
            ]
        );
    }

    #[test]
    fn copychunk_request_short_of_its_count_has_no_chunks() {
        let buf = copy_request([0; 24], &[(0, 0, 1)], 2);
        assert_eq!(CopyChunkCopy::parse(&buf).unwrap().chunks(), None);
        let huge = copy_request([0; 24], &[], u32::MAX);
        assert_eq!(CopyChunkCopy::parse(&huge).unwrap().chunks(), None);
        assert!(CopyChunkCopy::parse(&[0; 31]).is_err());
    }

    #[test]
    fn set_sparse_defaults_to_yes() {
        assert!(parse_set_sparse(&[]));
        assert!(parse_set_sparse(&[0xff, 0, 0]));
        assert!(!parse_set_sparse(&[0; 100]));
    }

    #[test]
    fn duplicate_extents_both_forms() {
        let mut w = Writer::new();
        w.u64(1).u64(2).u64(3).u64(4).u64(5);
        let plain = DuplicateExtents::parse(&w.buf).unwrap();
        assert_eq!(plain.source.persistent, 1);
        assert_eq!(plain.source.volatile, 2);
        assert_eq!(
            (plain.source_offset, plain.target_offset, plain.byte_count),
            (3, 4, 5)
        );
        let mut ex = Writer::new();
        ex.u64(0x30).bytes(&w.buf).u32(1).u32(0);
        assert_eq!(DuplicateExtents::parse_ex(&ex.buf).unwrap(), plain);
        assert!(DuplicateExtents::parse(&w.buf[..39]).is_err());
    }

    #[test]
    fn ranges_round_trip() {
        let r = AllocatedRange {
            offset: 512,
            length: -1,
        };
        let mut w = Writer::new();
        r.write(&mut w);
        assert_eq!(AllocatedRange::parse(&w.buf).unwrap(), r);
        assert!(ZeroData::parse(&w.buf[..15]).is_err());
    }
}
