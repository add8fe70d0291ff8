//! A self-relative security descriptor (MS-DTYP 2.4.6) derived from POSIX
//! ownership and mode bits, for QUERY_INFO with InfoType SMB2_0_INFO_SECURITY.
//!
//! Owner and group are Samba's Unix SIDs (S-1-22-1-uid, S-1-22-2-gid), so
//! clients that already meet Samba see the same identities. The DACL holds
//! allow ACEs only: owner, then group and Everyone when they have any right.
//! POSIX's "the owner class shadows the group class" has no allow-only
//! equivalent, so a group member whose class has fewer bits than Everyone
//! is shown Everyone's rights; enforcement stays with the file system.

use crate::wire::{put_u16, put_u32, put_u8};

/// SecurityInformation bits of QUERY_INFO's AdditionalInformation.
pub mod additional_info {
    pub const OWNER_SECURITY_INFORMATION: u32 = 0x0000_0001;
    pub const GROUP_SECURITY_INFORMATION: u32 = 0x0000_0002;
    pub const DACL_SECURITY_INFORMATION: u32 = 0x0000_0004;
    pub const SACL_SECURITY_INFORMATION: u32 = 0x0000_0008;
}

/// Access mask bits (MS-DTYP 2.4.3, MS-SMB2 2.2.13.1.1).
pub mod access {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;
    pub const FILE_GENERIC_READ: u32 =
        READ_CONTROL | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA | SYNCHRONIZE;
    pub const FILE_GENERIC_WRITE: u32 = READ_CONTROL
        | FILE_WRITE_DATA
        | FILE_WRITE_ATTRIBUTES
        | FILE_WRITE_EA
        | FILE_APPEND_DATA
        | SYNCHRONIZE;
    pub const FILE_GENERIC_EXECUTE: u32 =
        READ_CONTROL | FILE_READ_ATTRIBUTES | FILE_EXECUTE | SYNCHRONIZE;
    /// 0x001F01FF.
    pub const FILE_ALL_ACCESS: u32 = FILE_GENERIC_READ
        | FILE_GENERIC_WRITE
        | FILE_GENERIC_EXECUTE
        | FILE_DELETE_CHILD
        | DELETE
        | WRITE_DAC
        | WRITE_OWNER;
}

use access::*;
use additional_info::*;

const SE_DACL_PRESENT: u16 = 0x0004;
const SE_SELF_RELATIVE: u16 = 0x8000;
const ACCESS_ALLOWED_ACE_TYPE: u8 = 0x00;
const OBJECT_INHERIT_ACE: u8 = 0x01;
const CONTAINER_INHERIT_ACE: u8 = 0x02;
const ACL_REVISION: u8 = 2;
const HEADER_LEN: usize = 20;

/// Identifier authority of Samba's Unix user and group SIDs (S-1-22-...).
const UNIX_AUTHORITY: u8 = 22;
/// Identifier authority of Everyone (S-1-1-0).
const WORLD_AUTHORITY: u8 = 1;

/// The security descriptor of a file owned by `uid`:`gid` with `mode`,
/// holding only the parts `additional_information` asks for (OWNER 1,
/// GROUP 2, DACL 4; SACL 8 is answered with no SACL).
///
/// Rights per class: r gives FILE_GENERIC_READ, w FILE_GENERIC_WRITE and
/// FILE_DELETE_CHILD (on a directory, w allows removing entries), a
/// directory's x FILE_GENERIC_EXECUTE; a file's execute comes with r,
/// since running a file over SMB is reading it. The owner always has
/// READ_CONTROL, WRITE_DAC and WRITE_OWNER, and with w also DELETE, so a
/// file's rw and a directory's rwx are FILE_ALL_ACCESS ("Full control"). A directory's ACEs carry
/// OBJECT_INHERIT | CONTAINER_INHERIT, as Windows gives a folder's ACEs.
pub fn security_descriptor(
    uid: u32,
    gid: u32,
    mode: u32,
    is_dir: bool,
    additional_information: u32,
) -> Vec<u8> {
    let owner = unix_sid(1, uid);
    let group = unix_sid(2, gid);
    let want = |bit: u32| additional_information & bit != 0;

    let mut out = Vec::with_capacity(128);
    let mut control = SE_SELF_RELATIVE;
    let mut body = Vec::new();
    let owner_off = if want(OWNER_SECURITY_INFORMATION) {
        append(&mut body, &owner)
    } else {
        0
    };
    let group_off = if want(GROUP_SECURITY_INFORMATION) {
        append(&mut body, &group)
    } else {
        0
    };
    let dacl_off = if want(DACL_SECURITY_INFORMATION) {
        control |= SE_DACL_PRESENT;
        let dacl = dacl(&owner, &group, mode, is_dir);
        append(&mut body, &dacl)
    } else {
        0
    };

    put_u8(&mut out, 1); // Revision
    put_u8(&mut out, 0); // Sbz1
    put_u16(&mut out, control);
    put_u32(&mut out, owner_off);
    put_u32(&mut out, group_off);
    put_u32(&mut out, 0); // OffsetSacl: none
    put_u32(&mut out, dacl_off);
    out.extend_from_slice(&body);
    out
}

/// Appends `part` to the descriptor body and returns its offset from the
/// start of the descriptor.
fn append(body: &mut Vec<u8>, part: &[u8]) -> u32 {
    let at = HEADER_LEN + body.len();
    body.extend_from_slice(part);
    // A descriptor of a few hundred bytes always fits a u32 offset.
    u32::try_from(at).unwrap_or(0)
}

/// S-1-22-`kind`-`id`: kind 1 for users, 2 for groups.
fn unix_sid(kind: u32, id: u32) -> Vec<u8> {
    sid(UNIX_AUTHORITY, &[kind, id])
}

/// A binary SID (MS-DTYP 2.4.2.2) with a one-byte identifier authority.
fn sid(authority: u8, sub_authorities: &[u32]) -> Vec<u8> {
    let mut s = Vec::with_capacity(8 + 4 * sub_authorities.len());
    put_u8(&mut s, 1); // Revision
                       // At most two sub-authorities here, far below the limit of 15.
    put_u8(&mut s, sub_authorities.len() as u8);
    s.extend_from_slice(&[0, 0, 0, 0, 0, authority]); // big-endian authority
    for &sub in sub_authorities {
        put_u32(&mut s, sub);
    }
    s
}

/// The rights of one class's rwx bits, as the server enforces them
/// (copyless_core::rights::derived): a file's execute comes with reading
/// it, since running a file over SMB is reading it.
fn class_rights(bits: u32, is_dir: bool) -> u32 {
    let mut m = 0;
    if bits & 4 != 0 {
        m |= FILE_GENERIC_READ;
    }
    if bits & 2 != 0 {
        m |= FILE_GENERIC_WRITE | FILE_DELETE_CHILD;
    }
    let execute = if is_dir { bits & 1 } else { bits & 4 };
    if execute != 0 {
        m |= FILE_GENERIC_EXECUTE;
    }
    m
}

fn dacl(owner: &[u8], group: &[u8], mode: u32, is_dir: bool) -> Vec<u8> {
    let flags = if is_dir {
        OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
    } else {
        0
    };
    let mut owner_mask = class_rights(mode >> 6, is_dir) | READ_CONTROL | WRITE_DAC | WRITE_OWNER;
    if mode & 0o200 != 0 {
        owner_mask |= DELETE | FILE_DELETE_CHILD;
    }
    let everyone = sid(WORLD_AUTHORITY, &[0]);
    let aces = [
        (owner_mask, owner),
        (class_rights(mode >> 3, is_dir), group),
        (class_rights(mode, is_dir), &everyone[..]),
    ];

    let mut body = Vec::new();
    let mut count: u16 = 0;
    for (mask, who) in aces {
        if mask == 0 {
            continue;
        }
        put_u8(&mut body, ACCESS_ALLOWED_ACE_TYPE);
        put_u8(&mut body, flags);
        put_u16(&mut body, (8 + who.len()) as u16); // SIDs here are 12 or 16 bytes
        put_u32(&mut body, mask);
        body.extend_from_slice(who);
        count += 1;
    }
    let mut acl = Vec::with_capacity(8 + body.len());
    put_u8(&mut acl, ACL_REVISION);
    put_u8(&mut acl, 0); // Sbz1
    put_u16(&mut acl, (8 + body.len()) as u16); // at most 3 ACEs of 24 bytes
    put_u16(&mut acl, count);
    put_u16(&mut acl, 0); // Sbz2
    acl.extend_from_slice(&body);
    acl
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u32 = OWNER_SECURITY_INFORMATION
        | GROUP_SECURITY_INFORMATION
        | DACL_SECURITY_INFORMATION
        | SACL_SECURITY_INFORMATION;

    #[test]
    fn generic_masks_match_ms_dtyp() {
        assert_eq!(FILE_GENERIC_READ, 0x0012_0089);
        assert_eq!(FILE_GENERIC_WRITE, 0x0012_0116);
        assert_eq!(FILE_GENERIC_EXECUTE, 0x0012_00A0);
        assert_eq!(FILE_ALL_ACCESS, 0x001F_01FF);
    }

    #[test]
    fn file_0644_exact_bytes() {
        let sd = security_descriptor(1000, 100, 0o100644, false, ALL);
        #[rustfmt::skip]
        let want: Vec<u8> = vec![
            1, 0, 0x04, 0x80,   // revision, sbz1, control DACL_PRESENT|SELF_RELATIVE
            20, 0, 0, 0,        // owner at 20
            36, 0, 0, 0,        // group at 36
            0, 0, 0, 0,         // no SACL
            52, 0, 0, 0,        // DACL at 52
            // S-1-22-1-1000
            1, 2, 0, 0, 0, 0, 0, 22, 1, 0, 0, 0, 0xE8, 0x03, 0, 0,
            // S-1-22-2-100
            1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 100, 0, 0, 0,
            // ACL: revision 2, size 8 + 24 + 24 + 20 = 76, 3 ACEs
            2, 0, 76, 0, 3, 0, 0, 0,
            // owner: rw- -> FILE_ALL_ACCESS (a file's execute comes with r)
            0, 0, 24, 0, 0xFF, 0x01, 0x1F, 0x00,
            1, 2, 0, 0, 0, 0, 0, 22, 1, 0, 0, 0, 0xE8, 0x03, 0, 0,
            // group: r-- -> FILE_GENERIC_READ | FILE_GENERIC_EXECUTE
            0, 0, 24, 0, 0xA9, 0x00, 0x12, 0x00,
            1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 100, 0, 0, 0,
            // Everyone: r--
            0, 0, 20, 0, 0xA9, 0x00, 0x12, 0x00,
            1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        ];
        assert_eq!(sd, want);
    }

    #[test]
    fn directory_0750_has_inheritance_and_omits_empty_everyone() {
        let sd = security_descriptor(0, 0, 0o040750, true, DACL_SECURITY_INFORMATION);
        assert_eq!(
            &sd[..20],
            &[1, 0, 0x04, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0]
        );
        let acl = &sd[20..];
        assert_eq!(&acl[..8], &[2, 0, 56, 0, 2, 0, 0, 0]);
        assert_eq!(acl.len(), 56);
        // owner rwx on a directory: full control, inheritable
        assert_eq!(&acl[8..16], &[0, 3, 24, 0, 0xFF, 0x01, 0x1F, 0x00]);
        // group r-x: GENERIC_READ | GENERIC_EXECUTE = 0x001200A9
        assert_eq!(&acl[32..40], &[0, 3, 24, 0, 0xA9, 0x00, 0x12, 0x00]);
        assert_eq!(
            &acl[40..56],
            &[1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn group_write_on_directory_includes_delete_child() {
        let sd = security_descriptor(1, 2, 0o070, true, DACL_SECURITY_INFORMATION);
        let acl = &sd[20..];
        // owner has only the ownership rights, group everything but DELETE/WDAC/WO
        assert_eq!(&acl[12..16], &0x000E_0000u32.to_le_bytes());
        let g = u32::from_le_bytes(acl[36..40].try_into().unwrap());
        assert_eq!(
            g,
            FILE_GENERIC_READ | FILE_GENERIC_WRITE | FILE_GENERIC_EXECUTE | FILE_DELETE_CHILD
        );
        assert_eq!(&acl[..8], &[2, 0, 56, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn only_requested_parts() {
        let sd = security_descriptor(5, 6, 0o644, false, OWNER_SECURITY_INFORMATION);
        assert_eq!(sd.len(), 36);
        assert_eq!(&sd[2..4], &[0, 0x80]); // no DACL_PRESENT
        assert_eq!(&sd[4..8], &[20, 0, 0, 0]);
        assert_eq!(&sd[8..20], &[0; 12]);
        assert_eq!(
            &sd[20..],
            &[1, 2, 0, 0, 0, 0, 0, 22, 1, 0, 0, 0, 5, 0, 0, 0]
        );

        let sd = security_descriptor(5, 6, 0o644, false, GROUP_SECURITY_INFORMATION);
        assert_eq!(&sd[4..12], &[0, 0, 0, 0, 20, 0, 0, 0]);
        assert_eq!(
            &sd[20..],
            &[1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 6, 0, 0, 0]
        );

        let sd = security_descriptor(5, 6, 0o644, false, SACL_SECURITY_INFORMATION);
        assert_eq!(
            sd,
            [1, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(security_descriptor(5, 6, 0o644, false, 0).len(), 20);
    }
}
