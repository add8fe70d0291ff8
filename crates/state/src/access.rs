//! Access masks (MS-SMB2 2.2.13.1) and share-mode conflicts (MS-FSA
//! 2.1.5.1.2).

pub use copyless_fscc::access::*;

/// FILE_READ_DATA, as a directory's right to be listed.
pub const FILE_LIST_DIRECTORY: u32 = FILE_READ_DATA;
/// FILE_WRITE_DATA, as a directory's right to take a new file.
pub const FILE_ADD_FILE: u32 = FILE_WRITE_DATA;
/// FILE_APPEND_DATA, as a directory's right to take a new subdirectory.
pub const FILE_ADD_SUBDIRECTORY: u32 = FILE_APPEND_DATA;

/// Rights that change a file or its directory entry.
pub const MODIFYING: u32 = FILE_WRITE_DATA
    | FILE_APPEND_DATA
    | FILE_WRITE_EA
    | FILE_WRITE_ATTRIBUTES
    | FILE_DELETE_CHILD
    | DELETE
    | WRITE_DAC
    | WRITE_OWNER;

/// Bits a client may ask for; others are invalid.
const VALID: u32 = FILE_ALL_ACCESS
    | ACCESS_SYSTEM_SECURITY
    | MAXIMUM_ALLOWED
    | GENERIC_ALL
    | GENERIC_EXECUTE
    | GENERIC_WRITE
    | GENERIC_READ;

pub const SHARE_READ: u32 = 0x1;
pub const SHARE_WRITE: u32 = 0x2;
pub const SHARE_DELETE: u32 = 0x4;

pub fn is_valid(desired: u32) -> bool {
    desired & !VALID == 0
}

/// Replaces generic rights by the specific ones and MAXIMUM_ALLOWED by
/// `maximal`.
pub fn map_generic(desired: u32, maximal: u32) -> u32 {
    let a = copyless_fscc::descriptor::map_generic(desired & !MAXIMUM_ALLOWED);
    if desired & MAXIMUM_ALLOWED != 0 {
        a | maximal
    } else {
        a
    }
}

pub fn reads(access: u32) -> bool {
    access & (FILE_READ_DATA | FILE_EXECUTE) != 0
}

pub fn writes(access: u32) -> bool {
    access & (FILE_WRITE_DATA | FILE_APPEND_DATA) != 0
}

pub fn deletes(access: u32) -> bool {
    access & DELETE != 0
}

/// Opens that ask for none of these take no part in share-mode checks.
pub const SHARE_CHECKED: u32 =
    FILE_READ_DATA | FILE_EXECUTE | FILE_WRITE_DATA | FILE_APPEND_DATA | DELETE;

/// Whether a new open (access, share) conflicts with an existing one: the
/// per-open rule that the file table's share counts must answer exactly as
/// (checked in file_table's tests).
pub fn share_conflict(new_access: u32, new_share: u32, old_access: u32, old_share: u32) -> bool {
    if new_access & SHARE_CHECKED == 0 || old_access & SHARE_CHECKED == 0 {
        return false;
    }
    (reads(new_access) && old_share & SHARE_READ == 0)
        || (writes(new_access) && old_share & SHARE_WRITE == 0)
        || (deletes(new_access) && old_share & SHARE_DELETE == 0)
        || (reads(old_access) && new_share & SHARE_READ == 0)
        || (writes(old_access) && new_share & SHARE_WRITE == 0)
        || (deletes(old_access) && new_share & SHARE_DELETE == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts() {
        assert!(!share_conflict(
            FILE_READ_DATA,
            SHARE_READ,
            FILE_READ_DATA,
            SHARE_READ
        ));
        assert!(share_conflict(
            FILE_WRITE_DATA,
            SHARE_READ | SHARE_WRITE,
            FILE_READ_DATA,
            SHARE_READ
        ));
        assert!(share_conflict(
            FILE_READ_DATA,
            SHARE_READ,
            FILE_WRITE_DATA,
            SHARE_READ | SHARE_WRITE
        ));
        assert!(!share_conflict(FILE_READ_ATTRIBUTES, 0, FILE_READ_DATA, 0));
        assert!(share_conflict(DELETE, 7, FILE_READ_DATA, SHARE_READ));
        assert_eq!(map_generic(GENERIC_READ, 0), FILE_GENERIC_READ);
        assert_eq!(
            map_generic(MAXIMUM_ALLOWED, FILE_ALL_ACCESS),
            FILE_ALL_ACCESS
        );
    }
}
