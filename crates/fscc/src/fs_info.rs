//! QUERY_INFO for file systems (InfoType SMB2_0_INFO_FILESYSTEM, MS-FSCC 2.5).

use crate::class;
use crate::file_info::QueryOutput;
use crate::wire::{len_u32, put_u32, put_u64, put_u8, put_zeros, utf16};
use crate::InfoError;

/// What the server reports about the volume behind a share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsInfo {
    pub volume_label: String,
    pub serial: u32,
    /// FILETIME.
    pub volume_creation_time: u64,
    pub total_units: u64,
    /// Units available to the calling user.
    pub free_units: u64,
    /// Units free on the volume.
    pub actual_free_units: u64,
    pub sectors_per_unit: u32,
    pub bytes_per_sector: u32,
    /// FileSystemName, such as "NTFS".
    pub fs_name: String,
    /// MaximumComponentNameLength, 255 on most POSIX file systems.
    pub max_name_len: u32,
    /// FileSystemAttributes (MS-FSCC 2.5.1); see [`DEFAULT_FS_ATTRIBUTES`].
    pub fs_attributes: u32,
    pub object_id: [u8; 16],
    /// FileSystemControlFlags of FileFsControlInformation: how users'
    /// quotas are kept ([`FILE_VC_QUOTA_TRACK`], [`FILE_VC_QUOTA_ENFORCE`]).
    pub quota_flags: u32,
}

// FileSystemAttributes flags, MS-FSCC 2.5.1.
pub const FILE_CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
pub const FILE_CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
pub const FILE_UNICODE_ON_DISK: u32 = 0x0000_0004;
pub const FILE_PERSISTENT_ACLS: u32 = 0x0000_0008;
pub const FILE_FILE_COMPRESSION: u32 = 0x0000_0010;
pub const FILE_VOLUME_QUOTAS: u32 = 0x0000_0020;
pub const FILE_SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
pub const FILE_SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
pub const FILE_SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
pub const FILE_NAMED_STREAMS: u32 = 0x0004_0000;
pub const FILE_READ_ONLY_VOLUME: u32 = 0x0008_0000;
pub const FILE_SUPPORTS_HARD_LINKS: u32 = 0x0040_0000;
pub const FILE_SUPPORTS_EXTENDED_ATTRIBUTES: u32 = 0x0080_0000;
pub const FILE_SUPPORTS_OPEN_BY_FILE_ID: u32 = 0x0100_0000;
/// Ranges of files may share blocks (FSCTL_DUPLICATE_EXTENTS_TO_FILE).
pub const FILE_SUPPORTS_BLOCK_REFCOUNTING: u32 = 0x0800_0000;

/// What a share claims, as NTFS and Samba (with acl_xattr and
/// streams_xattr) claim it: names keep their case and are Unicode on
/// disk, files may be sparse, security descriptors are stored (so that
/// Windows shows its Security tab), files have named streams and
/// extended attributes.
/// FILE_CASE_SENSITIVE_SEARCH says the file system can tell names apart by
/// case, which a POSIX one can; lookups stay case-insensitive, as on NTFS.
///
/// Left out: FILE_SUPPORTS_OBJECT_IDS (not served), FILE_READ_ONLY_VOLUME
/// (read-only shares refuse writes themselves).
pub const DEFAULT_FS_ATTRIBUTES: u32 = FILE_CASE_SENSITIVE_SEARCH
    | FILE_CASE_PRESERVED_NAMES
    | FILE_UNICODE_ON_DISK
    | FILE_PERSISTENT_ACLS
    | FILE_SUPPORTS_SPARSE_FILES
    | FILE_NAMED_STREAMS
    | FILE_SUPPORTS_EXTENDED_ATTRIBUTES;

// FileSystemControlFlags, MS-FSCC 2.5.2.
/// Users' use is counted.
pub const FILE_VC_QUOTA_TRACK: u32 = 0x0000_0001;
/// Users' limits are enforced.
pub const FILE_VC_QUOTA_ENFORCE: u32 = 0x0000_0002;

/// DeviceType of a disk share.
pub const FILE_DEVICE_DISK: u32 = 0x0000_0007;
/// Characteristics of a disk share, as Windows and illumos report it.
pub const FILE_DEVICE_IS_MOUNTED: u32 = 0x0000_0020;

/// DefaultQuotaThreshold and DefaultQuotaLimit of FileFsControlInformation
/// (MS-FSCC 2.5.2) when none is set.
const NO_QUOTA: u64 = u64::MAX;

// FileFsSectorSizeInformation flags, MS-FSCC 2.5.7.
const SSINFO_FLAGS_ALIGNED_DEVICE: u32 = 0x0000_0001;
const SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE: u32 = 0x0000_0002;

/// The smallest OutputBufferLength Windows accepts for a file system class
/// (MS-FSA 2.1.5.13); below it the answer is STATUS_INFO_LENGTH_MISMATCH.
/// None for classes this crate does not encode.
pub fn min_fs_info_size(class: u8) -> Option<usize> {
    Some(match class {
        // BlockAlign(FieldOffset(VolumeLabel), 8)
        class::FS_VOLUME_INFORMATION => 24,
        class::FS_SIZE_INFORMATION => 24,
        class::FS_DEVICE_INFORMATION => 8,
        // sizeof(FILE_FS_ATTRIBUTE_INFORMATION): the fixed part and the
        // first character of FileSystemName, padded; Windows refuses less
        // (smbtorture smb2.getinfo.qfs_buffercheck).
        class::FS_ATTRIBUTE_INFORMATION => 16,
        class::FS_CONTROL_INFORMATION => 48,
        class::FS_FULL_SIZE_INFORMATION => 32,
        class::FS_OBJECT_ID_INFORMATION => 64,
        class::FS_SECTOR_SIZE_INFORMATION => 28,
        _ => return None,
    })
}

/// Encodes file system information class `class`, complete.
///
/// Served: Volume, Size, Device, Attribute, Control, FullSize, ObjectId,
/// SectorSize. Label, DriverPath and VolumeFlags are NotSupported
/// (MS-SMB2 3.3.5.20.2); anything else is InvalidClass.
pub fn encode_fs_info(class: u8, info: &FsInfo) -> Result<Vec<u8>, InfoError> {
    let mut out = Vec::with_capacity(64);
    match class {
        class::FS_VOLUME_INFORMATION => {
            let label = utf16(&info.volume_label);
            put_u64(&mut out, info.volume_creation_time);
            put_u32(&mut out, info.serial);
            put_u32(&mut out, len_u32(&label));
            put_u8(&mut out, 0); // SupportsObjects: no object IDs
            put_u8(&mut out, 0); // Reserved
            out.extend_from_slice(&label);
        }
        class::FS_SIZE_INFORMATION => {
            put_u64(&mut out, info.total_units);
            put_u64(&mut out, info.free_units);
            put_u32(&mut out, info.sectors_per_unit);
            put_u32(&mut out, info.bytes_per_sector);
        }
        class::FS_DEVICE_INFORMATION => {
            put_u32(&mut out, FILE_DEVICE_DISK);
            put_u32(&mut out, FILE_DEVICE_IS_MOUNTED);
        }
        class::FS_ATTRIBUTE_INFORMATION => {
            let name = utf16(&info.fs_name);
            put_u32(&mut out, info.fs_attributes);
            put_u32(&mut out, info.max_name_len);
            put_u32(&mut out, len_u32(&name));
            out.extend_from_slice(&name);
        }
        class::FS_FULL_SIZE_INFORMATION => {
            put_u64(&mut out, info.total_units);
            put_u64(&mut out, info.free_units);
            put_u64(&mut out, info.actual_free_units);
            put_u32(&mut out, info.sectors_per_unit);
            put_u32(&mut out, info.bytes_per_sector);
        }
        class::FS_CONTROL_INFORMATION => {
            // The content indexing fields are 0; no default threshold or
            // limit is set (-1): Linux has none for users without an
            // entry of their own (MS-FSA 2.1.5.13.6).
            put_zeros(&mut out, 24);
            put_u64(&mut out, NO_QUOTA);
            put_u64(&mut out, NO_QUOTA);
            put_u32(&mut out, info.quota_flags); // FileSystemControlFlags
            put_u32(&mut out, 0); // Padding
        }
        class::FS_OBJECT_ID_INFORMATION => {
            out.extend_from_slice(&info.object_id);
            out.resize(64, 0); // ExtendedInfo, 48 bytes
        }
        class::FS_SECTOR_SIZE_INFORMATION => {
            let s = info.bytes_per_sector;
            put_u32(&mut out, s); // LogicalBytesPerSector
            put_u32(&mut out, s); // PhysicalBytesPerSectorForAtomicity
            put_u32(&mut out, s); // PhysicalBytesPerSectorForPerformance
            put_u32(&mut out, s); // FileSystemEffectivePhysicalBytesPerSectorForAtomicity
            put_u32(
                &mut out,
                SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
            );
            put_u32(&mut out, 0); // ByteOffsetForSectorAlignment
            put_u32(&mut out, 0); // ByteOffsetForPartitionAlignment
        }
        class::FS_LABEL_INFORMATION
        | class::FS_DRIVER_PATH_INFORMATION
        | class::FS_VOLUME_FLAGS_INFORMATION => return Err(InfoError::NotSupported),
        _ => return Err(InfoError::InvalidClass),
    }
    Ok(out)
}

/// Encodes `class` and fits it to `output_buffer_length`: BufferTooSmall
/// below [`min_fs_info_size`], else the label or name cut short with
/// `overflow` set (STATUS_BUFFER_OVERFLOW), as MS-FSA 2.1.5.13 describes.
pub fn query_fs_info(
    class: u8,
    info: &FsInfo,
    output_buffer_length: usize,
) -> Result<QueryOutput, InfoError> {
    let mut data = encode_fs_info(class, info)?;
    if output_buffer_length < min_fs_info_size(class).unwrap_or(0) {
        return Err(InfoError::BufferTooSmall);
    }
    let overflow = data.len() > output_buffer_length;
    data.truncate(output_buffer_length);
    Ok(QueryOutput { data, overflow })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs() -> FsInfo {
        FsInfo {
            volume_label: "data".into(),
            serial: 0xDEAD_BEEF,
            volume_creation_time: 0x01D9_0000_0000_0000,
            total_units: 1000,
            free_units: 400,
            actual_free_units: 500,
            sectors_per_unit: 8,
            bytes_per_sector: 512,
            fs_name: "NTFS".into(),
            max_name_len: 255,
            fs_attributes: DEFAULT_FS_ATTRIBUTES,
            object_id: [0xA5; 16],
            quota_flags: 0,
        }
    }

    #[test]
    fn volume_exact_bytes() {
        let b = encode_fs_info(class::FS_VOLUME_INFORMATION, &fs()).unwrap();
        let mut want = 0x01D9_0000_0000_0000u64.to_le_bytes().to_vec();
        want.extend([0xEF, 0xBE, 0xAD, 0xDE]);
        want.extend([8, 0, 0, 0]);
        want.extend([0, 0]);
        want.extend([b'd', 0, b'a', 0, b't', 0, b'a', 0]);
        assert_eq!(b, want);
    }

    #[test]
    fn size_classes_exact_bytes() {
        let b = encode_fs_info(class::FS_SIZE_INFORMATION, &fs()).unwrap();
        let mut want = 1000u64.to_le_bytes().to_vec();
        want.extend(400u64.to_le_bytes());
        want.extend([8, 0, 0, 0, 0, 2, 0, 0]);
        assert_eq!(b, want);

        let b = encode_fs_info(class::FS_FULL_SIZE_INFORMATION, &fs()).unwrap();
        let mut want = 1000u64.to_le_bytes().to_vec();
        want.extend(400u64.to_le_bytes());
        want.extend(500u64.to_le_bytes());
        want.extend([8, 0, 0, 0, 0, 2, 0, 0]);
        assert_eq!(b, want);
    }

    #[test]
    fn device_attribute_sector_object_id() {
        assert_eq!(
            encode_fs_info(class::FS_DEVICE_INFORMATION, &fs()).unwrap(),
            [7, 0, 0, 0, 0x20, 0, 0, 0]
        );
        assert_eq!(
            encode_fs_info(class::FS_ATTRIBUTE_INFORMATION, &fs()).unwrap(),
            [0x4F, 0, 0x84, 0, 255, 0, 0, 0, 8, 0, 0, 0, b'N', 0, b'T', 0, b'F', 0, b'S', 0]
        );
        let s = encode_fs_info(class::FS_SECTOR_SIZE_INFORMATION, &fs()).unwrap();
        assert_eq!(
            s,
            [0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        let o = encode_fs_info(class::FS_OBJECT_ID_INFORMATION, &fs()).unwrap();
        assert_eq!(o.len(), 64);
        assert_eq!(&o[..16], &[0xA5; 16]);
        assert_eq!(&o[16..], &[0; 48]);
    }

    #[test]
    fn control_reports_no_quotas() {
        let b = encode_fs_info(class::FS_CONTROL_INFORMATION, &fs()).unwrap();
        let mut want = vec![0; 24];
        want.extend([0xFF; 16]);
        want.extend([0; 8]);
        assert_eq!(b, want);
        let tracked = FsInfo {
            quota_flags: FILE_VC_QUOTA_TRACK | FILE_VC_QUOTA_ENFORCE,
            ..fs()
        };
        let b = encode_fs_info(class::FS_CONTROL_INFORMATION, &tracked).unwrap();
        assert_eq!(b[40..44], [3, 0, 0, 0]);
    }

    #[test]
    fn unserved_fs_classes() {
        let e = |c| encode_fs_info(c, &fs()).unwrap_err();
        assert_eq!(e(class::FS_LABEL_INFORMATION), InfoError::NotSupported);
        assert_eq!(e(0), InfoError::InvalidClass);
        assert_eq!(e(12), InfoError::InvalidClass);
        assert_eq!(min_fs_info_size(12), None);
    }

    #[test]
    fn query_fits_output_buffer() {
        let q = |c, n| query_fs_info(c, &fs(), n);
        assert_eq!(
            q(class::FS_VOLUME_INFORMATION, 23),
            Err(InfoError::BufferTooSmall)
        );
        let cut = q(class::FS_VOLUME_INFORMATION, 24).unwrap();
        assert!(cut.overflow);
        assert_eq!(cut.data.len(), 24);
        assert_eq!(&cut.data[12..16], &[8, 0, 0, 0]); // full length kept
        let whole = q(class::FS_VOLUME_INFORMATION, 4096).unwrap();
        assert!(!whole.overflow);
        assert_eq!(whole.data.len(), 26);
        assert_eq!(
            q(class::FS_ATTRIBUTE_INFORMATION, 15),
            Err(InfoError::BufferTooSmall)
        );
        let cut = q(class::FS_ATTRIBUTE_INFORMATION, 16).unwrap();
        assert!(cut.overflow);
        assert_eq!(cut.data.len(), 16);
        assert_eq!(
            q(class::FS_CONTROL_INFORMATION, 47),
            Err(InfoError::BufferTooSmall)
        );
        assert!(!q(class::FS_CONTROL_INFORMATION, 48).unwrap().overflow);
        assert_eq!(q(class::FS_SIZE_INFORMATION, 24).unwrap().data.len(), 24);
        assert_eq!(q(99, 4096), Err(InfoError::InvalidClass));
    }
}
