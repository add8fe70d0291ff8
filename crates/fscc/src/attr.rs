//! File attributes (MS-FSCC 2.6), FileModeInformation flags (MS-FSCC 2.4.26)
//! and FileDispositionInformationEx flags (MS-FSCC 2.4.12).

pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
pub const FILE_ATTRIBUTE_HIDDEN: u32 = 0x0000_0002;
pub const FILE_ATTRIBUTE_SYSTEM: u32 = 0x0000_0004;
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
pub const FILE_ATTRIBUTE_NORMAL: u32 = 0x0000_0080;
pub const FILE_ATTRIBUTE_TEMPORARY: u32 = 0x0000_0100;
pub const FILE_ATTRIBUTE_SPARSE_FILE: u32 = 0x0000_0200;
pub const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x0000_0400;
pub const FILE_ATTRIBUTE_COMPRESSED: u32 = 0x0000_0800;
pub const FILE_ATTRIBUTE_OFFLINE: u32 = 0x0000_1000;
pub const FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
pub const FILE_ATTRIBUTE_ENCRYPTED: u32 = 0x0000_4000;
pub const FILE_ATTRIBUTE_INTEGRITY_STREAM: u32 = 0x0000_8000;
pub const FILE_ATTRIBUTE_NO_SCRUB_DATA: u32 = 0x0002_0000;

pub const FILE_WRITE_THROUGH: u32 = 0x0000_0002;
pub const FILE_SEQUENTIAL_ONLY: u32 = 0x0000_0004;
pub const FILE_NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
pub const FILE_SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
pub const FILE_SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;

pub const FILE_DISPOSITION_DELETE: u32 = 0x0000_0001;
pub const FILE_DISPOSITION_POSIX_SEMANTICS: u32 = 0x0000_0002;
pub const FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK: u32 = 0x0000_0004;
pub const FILE_DISPOSITION_ON_CLOSE: u32 = 0x0000_0008;
pub const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0010;

/// The attributes a reply carries for `attributes` of a file or directory.
///
/// Directories always carry FILE_ATTRIBUTE_DIRECTORY, and a file with no
/// attribute at all is reported as FILE_ATTRIBUTE_NORMAL, as Windows and
/// Samba do: clients treat a bare 0 inconsistently.
pub fn on_wire(attributes: u32, is_dir: bool) -> u32 {
    let a = if is_dir {
        (attributes | FILE_ATTRIBUTE_DIRECTORY) & !FILE_ATTRIBUTE_NORMAL
    } else {
        attributes
    };
    if a == 0 {
        FILE_ATTRIBUTE_NORMAL
    } else {
        a
    }
}
