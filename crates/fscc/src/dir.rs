//! QUERY_DIRECTORY output: chained directory entries of one information
//! class (MS-FSCC 2.4.8, 2.4.10, 2.4.14, 2.4.17, 2.4.18, 2.4.20, 2.4.28).

use crate::attr;
use crate::class;
use crate::wire::{len_u32, patch_u32, put_u32, put_u64, put_u8, put_zeros, utf16};
use crate::FileInfo;

/// Which entry layout a directory class uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Directory,
    FullDirectory,
    BothDirectory,
    IdBothDirectory,
    IdFullDirectory,
    IdExtdDirectory,
    Names,
}

impl Layout {
    fn of(class: u8) -> Option<Layout> {
        Some(match class {
            class::FILE_DIRECTORY_INFORMATION => Layout::Directory,
            class::FILE_FULL_DIRECTORY_INFORMATION => Layout::FullDirectory,
            class::FILE_BOTH_DIRECTORY_INFORMATION => Layout::BothDirectory,
            class::FILE_ID_BOTH_DIRECTORY_INFORMATION => Layout::IdBothDirectory,
            class::FILE_ID_FULL_DIRECTORY_INFORMATION => Layout::IdFullDirectory,
            class::FILE_ID_EXTD_DIRECTORY_INFORMATION => Layout::IdExtdDirectory,
            class::FILE_NAMES_INFORMATION => Layout::Names,
            _ => return None,
        })
    }

    /// Bytes before FileName.
    fn fixed_len(self) -> usize {
        match self {
            Layout::Directory => 64,
            Layout::FullDirectory => 68,
            Layout::BothDirectory => 94,
            Layout::IdBothDirectory => 104,
            Layout::IdFullDirectory => 80,
            Layout::IdExtdDirectory => 88,
            Layout::Names => 12,
        }
    }
}

/// Builds the output buffer of one QUERY_DIRECTORY response.
///
/// Entries after the first start on 8-byte boundaries from the start of the
/// buffer, each NextEntryOffset points at the next entry, the last one's is
/// 0, and the buffer never grows beyond `max_len` (the request's
/// OutputBufferLength). Padding is only inserted before an entry, so the
/// finished buffer ends right after the last entry's name.
#[derive(Debug, Clone)]
pub struct DirWriter {
    layout: Layout,
    max_len: usize,
    buf: Vec<u8>,
    /// Offset of the last entry pushed, whose NextEntryOffset is patched
    /// when another entry follows.
    last: Option<usize>,
}

impl DirWriter {
    /// A writer for directory class `class`; None if `class` is not one.
    pub fn new(class: u8, max_len: usize) -> Option<DirWriter> {
        Some(DirWriter {
            layout: Layout::of(class)?,
            max_len,
            buf: Vec::new(),
            last: None,
        })
    }

    /// Appends one entry; false, with nothing appended, if it does not fit.
    /// `file_index` goes in FileIndex.
    pub fn push(&mut self, name: &str, info: &FileInfo, file_index: u32) -> bool {
        self.push_with_short_name(name, None, info, file_index)
    }

    /// As [`DirWriter::push`], with the 8.3 name that the Both and IdBoth
    /// classes carry (at most 12 characters; longer ones are left out).
    pub fn push_with_short_name(
        &mut self,
        name: &str,
        short_name: Option<&str>,
        info: &FileInfo,
        file_index: u32,
    ) -> bool {
        let short = short_name.map(utf16).filter(|s| s.len() <= 24);
        let name = utf16(name);
        let start = match self.last {
            None => 0,
            Some(_) => self.buf.len().next_multiple_of(8),
        };
        let end = start
            .checked_add(self.layout.fixed_len())
            .and_then(|n| n.checked_add(name.len()));
        match end {
            Some(end) if end <= self.max_len => {}
            _ => return false,
        }
        if let Some(prev) = self.last {
            // start - prev is bounded by max_len, which fits a wire length
            // in practice; refuse rather than truncate if it ever does not.
            let Ok(next) = u32::try_from(start - prev) else {
                return false;
            };
            patch_u32(&mut self.buf, prev, next);
        }
        self.buf.resize(start, 0);
        self.write_entry(&name, short.as_deref(), info, file_index);
        self.last = Some(start);
        true
    }

    /// True while no entry has been pushed.
    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// Bytes used so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// The finished buffer: last NextEntryOffset 0, no trailing padding.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    fn write_entry(&mut self, name: &[u8], short: Option<&[u8]>, info: &FileInfo, file_index: u32) {
        let out = &mut self.buf;
        put_u32(out, 0); // NextEntryOffset, patched by the next push
        put_u32(out, file_index);
        if self.layout == Layout::Names {
            put_u32(out, len_u32(name));
            out.extend_from_slice(name);
            return;
        }
        let (eof, alloc) = sizes(info);
        put_u64(out, info.creation_time);
        put_u64(out, info.last_access_time);
        put_u64(out, info.last_write_time);
        put_u64(out, info.change_time);
        put_u64(out, eof);
        put_u64(out, alloc);
        put_u32(out, attr::on_wire(info.attributes, info.is_dir));
        put_u32(out, len_u32(name));
        match self.layout {
            Layout::Directory | Layout::Names => {}
            Layout::FullDirectory => put_u32(out, info.ea_size),
            Layout::BothDirectory => {
                put_u32(out, info.ea_size);
                put_short_name(out, short);
            }
            Layout::IdBothDirectory => {
                put_u32(out, info.ea_size);
                put_short_name(out, short);
                put_zeros(out, 2); // Reserved2
                put_u64(out, info.file_id);
            }
            Layout::IdFullDirectory => {
                put_u32(out, info.ea_size);
                put_u32(out, 0); // Reserved
                put_u64(out, info.file_id);
            }
            Layout::IdExtdDirectory => {
                put_u32(out, info.ea_size);
                put_u32(out, 0); // ReparsePointTag
                put_u64(out, info.file_id); // FileId is 128 bits: low half
                put_u64(out, 0);
            }
        }
        out.extend_from_slice(name);
    }
}

/// ShortNameLength, Reserved, and the 24-byte ShortName field (UTF-16,
/// zero padded; empty when there is no short name).
fn put_short_name(out: &mut Vec<u8>, short: Option<&[u8]>) {
    let short = short.unwrap_or(&[]);
    put_u8(out, short.len() as u8);
    put_u8(out, 0);
    out.extend_from_slice(short);
    put_zeros(out, 24 - short.len());
}

/// EndOfFile and AllocationSize as Windows reports them: NTFS gives 0 for
/// both on a directory, whatever the directory occupies on disk.
pub(crate) fn sizes(info: &FileInfo) -> (u64, u64) {
    if info.is_dir {
        (0, 0)
    } else {
        (info.end_of_file, info.allocation_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::get_u32;

    fn file() -> FileInfo {
        FileInfo {
            creation_time: 0x0102_0304_0506_0708,
            last_access_time: 0x1112_1314_1516_1718,
            last_write_time: 0x2122_2324_2526_2728,
            change_time: 0x3132_3334_3536_3738,
            end_of_file: 1000,
            allocation_size: 4096,
            attributes: attr::FILE_ATTRIBUTE_ARCHIVE,
            file_id: 0xAABB_CCDD_EEFF_0011,
            nlink: 1,
            ..FileInfo::default()
        }
    }

    fn times() -> Vec<u8> {
        let mut v = Vec::new();
        for t in [
            0x0102_0304_0506_0708u64,
            0x1112_1314_1516_1718,
            0x2122_2324_2526_2728,
            0x3132_3334_3536_3738,
        ] {
            v.extend_from_slice(&t.to_le_bytes());
        }
        v
    }

    #[test]
    fn non_directory_classes_rejected() {
        assert!(DirWriter::new(class::FILE_BASIC_INFORMATION, 1000).is_none());
        assert!(DirWriter::new(0, 1000).is_none());
        assert!(DirWriter::new(class::FILE_ALL_INFORMATION, 1000).is_none());
    }

    #[test]
    fn directory_information_exact_bytes() {
        let mut w = DirWriter::new(class::FILE_DIRECTORY_INFORMATION, 1000).unwrap();
        assert!(w.is_empty());
        assert!(w.push("ab", &file(), 7));
        assert!(!w.is_empty());
        let mut want = vec![0, 0, 0, 0, 7, 0, 0, 0];
        want.extend(times());
        want.extend(1000u64.to_le_bytes());
        want.extend(4096u64.to_le_bytes());
        want.extend([0x20, 0, 0, 0]); // ARCHIVE
        want.extend([4, 0, 0, 0]); // FileNameLength
        want.extend([b'a', 0, b'b', 0]);
        assert_eq!(w.finish(), want);
    }

    #[test]
    fn id_both_directory_exact_bytes() {
        let mut w = DirWriter::new(class::FILE_ID_BOTH_DIRECTORY_INFORMATION, 1000).unwrap();
        let mut info = file();
        info.is_dir = true;
        info.attributes = 0;
        assert!(w.push("d", &info, 0));
        let mut want = vec![0; 8];
        want.extend(times());
        want.extend([0; 16]); // directories: EndOfFile, AllocationSize 0
        want.extend([0x10, 0, 0, 0]); // DIRECTORY
        want.extend([2, 0, 0, 0]); // FileNameLength
        want.extend([0; 4]); // EaSize
        want.extend([0, 0]); // ShortNameLength, Reserved1
        want.extend([0; 24]); // ShortName
        want.extend([0; 2]); // Reserved2
        want.extend(0xAABB_CCDD_EEFF_0011u64.to_le_bytes());
        want.extend([b'd', 0]);
        assert_eq!(want.len(), 104 + 2);
        assert_eq!(w.finish(), want);
    }

    #[test]
    fn both_full_idfull_idextd_names_layouts() {
        let cases = [
            (class::FILE_FULL_DIRECTORY_INFORMATION, 68),
            (class::FILE_BOTH_DIRECTORY_INFORMATION, 94),
            (class::FILE_ID_FULL_DIRECTORY_INFORMATION, 80),
            (class::FILE_ID_EXTD_DIRECTORY_INFORMATION, 88),
            (class::FILE_NAMES_INFORMATION, 12),
        ];
        for (c, fixed) in cases {
            let mut w = DirWriter::new(c, 1000).unwrap();
            assert!(w.push("xyz", &file(), 3));
            let b = w.finish();
            assert_eq!(b.len(), fixed + 6, "class {c}");
            assert_eq!(&b[fixed..], &[b'x', 0, b'y', 0, b'z', 0], "class {c}");
            assert_eq!(get_u32(&b, 4), Some(3), "class {c}");
            let name_len_at = if c == class::FILE_NAMES_INFORMATION {
                8
            } else {
                60
            };
            assert_eq!(get_u32(&b, name_len_at), Some(6), "class {c}");
        }
        // FileId position in the id classes.
        let mut w = DirWriter::new(class::FILE_ID_FULL_DIRECTORY_INFORMATION, 1000).unwrap();
        w.push("a", &file(), 0);
        let b = w.finish();
        assert_eq!(&b[72..80], &0xAABB_CCDD_EEFF_0011u64.to_le_bytes());
        let mut w = DirWriter::new(class::FILE_ID_EXTD_DIRECTORY_INFORMATION, 1000).unwrap();
        w.push("a", &file(), 0);
        let b = w.finish();
        assert_eq!(&b[72..80], &0xAABB_CCDD_EEFF_0011u64.to_le_bytes());
        assert_eq!(&b[80..88], &[0; 8]);
    }

    #[test]
    fn entries_chain_on_8_byte_boundaries() {
        let mut w = DirWriter::new(class::FILE_DIRECTORY_INFORMATION, 1000).unwrap();
        assert!(w.push("a", &file(), 0)); // 66 bytes, next at 72
        assert!(w.push("bcd", &file(), 1)); // 72..142, next at 144
        assert!(w.push("e", &file(), 2)); // 144..210
        let b = w.finish();
        assert_eq!(b.len(), 210);
        assert_eq!(get_u32(&b, 0), Some(72));
        assert_eq!(get_u32(&b, 72), Some(72));
        assert_eq!(get_u32(&b, 144), Some(0));
        assert_eq!(&b[66..72], &[0; 6]);
        assert_eq!(get_u32(&b, 72 + 4), Some(1));
        assert_eq!(&b[72 + 64..72 + 70], &[b'b', 0, b'c', 0, b'd', 0]);
    }

    #[test]
    fn entry_that_does_not_fit_is_refused_and_buffer_unchanged() {
        // First entry 66 bytes; second would span 72..138.
        let mut w = DirWriter::new(class::FILE_DIRECTORY_INFORMATION, 137).unwrap();
        assert!(w.push("a", &file(), 0));
        let before = w.clone().finish();
        assert!(!w.push("b", &file(), 1));
        assert_eq!(w.len(), 66);
        let after = w.clone().finish();
        assert_eq!(before, after);
        assert_eq!(get_u32(&after, 0), Some(0));
        // Exactly fitting is accepted.
        let mut w = DirWriter::new(class::FILE_DIRECTORY_INFORMATION, 138).unwrap();
        assert!(w.push("a", &file(), 0));
        assert!(w.push("b", &file(), 1));
        assert_eq!(w.finish().len(), 138);
    }

    #[test]
    fn first_entry_too_big_leaves_writer_empty() {
        let mut w = DirWriter::new(class::FILE_NAMES_INFORMATION, 13).unwrap();
        assert!(!w.push("ab", &file(), 0));
        assert!(w.is_empty());
        assert!(w.finish().is_empty());
        let mut w = DirWriter::new(class::FILE_NAMES_INFORMATION, 0).unwrap();
        assert!(!w.push("", &file(), 0));
    }

    #[test]
    fn non_ascii_names_are_utf16() {
        let mut w = DirWriter::new(class::FILE_NAMES_INFORMATION, 100).unwrap();
        assert!(w.push("\u{e9}\u{1F600}", &file(), 0));
        let b = w.finish();
        assert_eq!(get_u32(&b, 8), Some(6));
        assert_eq!(&b[12..], &[0xe9, 0, 0x3d, 0xd8, 0x00, 0xde]);
    }
}
