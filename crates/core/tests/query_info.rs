//! QUERY_INFO and SET_INFO of what a getinfo or setinfo client checks:
//! the smallest buffers a class takes, FileFsControlInformation, the
//! normalized name of a stream, a change time the client set and the
//! links of a file to be deleted. On a share in memory.

use std::sync::Arc;

use copyless_proto::client::{self as wire, ACCESS_DELETE, ACCESS_WRITE_ATTRIBUTES};
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{create_request_with, write_request, Client, Dialect, Request, Users};
use copyless_vfs::memory::MemoryVfs;

const INFO_FILE: u8 = 1;
const INFO_FILESYSTEM: u8 = 2;
const FILE_BASIC_INFORMATION: u8 = 4;
const FILE_DISPOSITION_INFORMATION: u8 = 13;
const FILE_ALL_INFORMATION: u8 = 18;
const FILE_ALTERNATE_NAME_INFORMATION: u8 = 21;
const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;
const FS_ATTRIBUTE_INFORMATION: u8 = 5;
const FS_CONTROL_INFORMATION: u8 = 6;
/// Everything the scripted client's own CREATE asks for, and DELETE.
const ALL_ACCESS: u32 = 0x001f_01ff;

fn login(dialect: Dialect) -> (Arc<MemoryVfs>, Client) {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    (vfs, Client::login_with(server, dialect, "alice", "pw"))
}

/// QUERY_INFO of `class`: the status and the data.
fn query(
    c: &mut Client,
    id: FileId,
    info_type: u8,
    class: u8,
    room: u32,
    flags: u32,
) -> (u32, Vec<u8>) {
    let r = c.call(Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, info_type, class, room, 0, flags, id)
    }));
    let data = wire::buffer_response_data(&r.msg)
        .map(<[u8]>::to_vec)
        .unwrap_or_default();
    (r.status(), data)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn a_buffer_below_the_fixed_part_is_a_length_mismatch() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let root = c.create("", true).unwrap();
    let fs =
        |c: &mut Client, room| query(c, root, INFO_FILESYSTEM, FS_ATTRIBUTE_INFORMATION, room, 0);
    assert_eq!(fs(&mut c, 15).0, status::INFO_LENGTH_MISMATCH);
    let (st, data) = fs(&mut c, 16);
    assert_eq!((st, data.len()), (status::BUFFER_OVERFLOW, 16));
    assert_eq!(fs(&mut c, 4096).0, status::SUCCESS);

    let f = c.create("some file.txt", false).unwrap();
    let alt =
        |c: &mut Client, room| query(c, f, INFO_FILE, FILE_ALTERNATE_NAME_INFORMATION, room, 0);
    assert_eq!(alt(&mut c, 7).0, status::INFO_LENGTH_MISMATCH);
    let (st, data) = alt(&mut c, 8);
    assert_eq!((st, data.len()), (status::BUFFER_OVERFLOW, 8));
    assert_eq!(alt(&mut c, 4096).0, status::SUCCESS);
}

#[test]
fn fs_control_information_reports_quotas_unset() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let root = c.create("", true).unwrap();
    let q = |c: &mut Client, room| query(c, root, INFO_FILESYSTEM, FS_CONTROL_INFORMATION, room, 0);
    assert_eq!(q(&mut c, 47).0, status::INFO_LENGTH_MISMATCH);
    let (st, data) = q(&mut c, 4096);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(data.len(), 48);
    assert_eq!(&data[..24], &[0; 24]);
    assert_eq!(u64_at(&data, 24), u64::MAX); // DefaultQuotaThreshold
    assert_eq!(u64_at(&data, 32), u64::MAX); // DefaultQuotaLimit
    assert_eq!(u32_at(&data, 40), 0); // FileSystemControlFlags
}

#[test]
fn the_normalized_name_of_a_stream_names_the_stream() {
    let (_vfs, mut c) = login(Dialect::Smb311);
    c.create("Dir", true).unwrap();
    c.create("Dir\\File", false).unwrap();
    c.create("Dir\\File:Strm", false).unwrap();
    let s = c.create("DIR\\file:STRM", false).unwrap();
    let (st, data) = query(
        &mut c,
        s,
        INFO_FILE,
        FILE_NORMALIZED_NAME_INFORMATION,
        4096,
        0,
    );
    assert_eq!(st, status::SUCCESS);
    let name = copyless_proto::utf16::encode("Dir\\File:Strm");
    assert_eq!(u32_at(&data, 0) as usize, name.len());
    assert_eq!(&data[4..], &name[..]);
    // The file's own open names the file alone.
    let f = c.create("dir\\FILE", false).unwrap();
    let (_, data) = query(
        &mut c,
        f,
        INFO_FILE,
        FILE_NORMALIZED_NAME_INFORMATION,
        4096,
        0,
    );
    assert_eq!(&data[4..], &copyless_proto::utf16::encode("Dir\\File")[..]);
}

#[test]
fn the_normalized_name_is_for_smb_3_1_1() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let f = c.create("f", false).unwrap();
    let (st, _) = query(
        &mut c,
        f,
        INFO_FILE,
        FILE_NORMALIZED_NAME_INFORMATION,
        4096,
        0,
    );
    assert_eq!(st, status::NOT_SUPPORTED);
}

fn set(c: &mut Client, id: FileId, class: u8, buffer: &[u8]) -> u32 {
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_FILE, class, 0, id, buffer).unwrap()
    }))
    .status()
}

/// FileBasicInformation to set: times (0 leaves one) and attributes.
fn basic(change_time: u64, attributes: u32) -> Vec<u8> {
    let mut b = vec![0; 24];
    b.extend(change_time.to_le_bytes());
    b.extend(attributes.to_le_bytes());
    b.extend([0; 4]);
    b
}

#[test]
fn a_change_time_set_stays_through_attribute_changes_until_a_write() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let f = c
        .open(create_request_with(
            "f",
            ALL_ACCESS | ACCESS_WRITE_ATTRIBUTES,
            7,
            3,
            0,
        ))
        .unwrap();
    let change_time = |c: &mut Client| {
        let (st, data) = query(c, f, INFO_FILE, FILE_BASIC_INFORMATION, 4096, 0);
        assert_eq!(st, status::SUCCESS);
        u64_at(&data, 24)
    };
    let set_at = 0x01D0_0000_0000_0000;
    assert_eq!(
        set(&mut c, f, FILE_BASIC_INFORMATION, &basic(set_at, 0x01)),
        status::SUCCESS
    );
    assert_eq!(change_time(&mut c), set_at);
    // Attributes alone (times 0: left as they are).
    assert_eq!(
        set(&mut c, f, FILE_BASIC_INFORMATION, &basic(0, 0x80)),
        status::SUCCESS
    );
    assert_eq!(change_time(&mut c), set_at);
    // New data is a change the set time no longer covers.
    assert_eq!(
        c.call(write_request(f, 0, b"data")).status(),
        status::SUCCESS
    );
    assert_ne!(change_time(&mut c), set_at);
}

#[test]
fn a_file_to_be_deleted_counts_one_link_less() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let f = c
        .open(create_request_with(
            "f",
            ALL_ACCESS | ACCESS_DELETE,
            7,
            3,
            0,
        ))
        .unwrap();
    let links = |c: &mut Client| {
        let (_, all) = query(c, f, INFO_FILE, FILE_ALL_INFORMATION, 4096, 0);
        (u32_at(&all, 56), all[60])
    };
    assert_eq!(links(&mut c), (1, 0));
    assert_eq!(
        set(&mut c, f, FILE_DISPOSITION_INFORMATION, &[1]),
        status::SUCCESS
    );
    assert_eq!(links(&mut c), (0, 1));
    assert_eq!(
        set(&mut c, f, FILE_DISPOSITION_INFORMATION, &[0]),
        status::SUCCESS
    );
    assert_eq!(links(&mut c), (1, 0));
}
