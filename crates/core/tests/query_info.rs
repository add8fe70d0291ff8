//! QUERY_INFO and SET_INFO of what a getinfo or setinfo client checks:
//! the smallest buffers a class takes, FileFsControlInformation, the
//! normalized name of a stream, extended attributes, a change time the
//! client set and the links of a file to be deleted. On a share in
//! memory.

use std::sync::Arc;

use copyless_fscc::ea::{encode_full_ea_list, full_ea_list_size, parse_full_ea_list, FullEa};
use copyless_proto::client::{
    self as wire, CreateParams, ACCESS_DELETE, ACCESS_READ_ATTRIBUTES, ACCESS_READ_EA,
    ACCESS_SYNCHRONIZE, ACCESS_WRITE_ATTRIBUTES, ACCESS_WRITE_EA,
};
use copyless_proto::create_context::{build_chain, EXTA};
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{
    create_request_from, create_request_with, write_request, Client, Dialect, Request, Users,
};
use copyless_vfs::memory::MemoryVfs;

const INFO_FILE: u8 = 1;
const INFO_FILESYSTEM: u8 = 2;
const FILE_FULL_DIRECTORY_INFORMATION: u8 = 2;
const FILE_BASIC_INFORMATION: u8 = 4;
const FILE_EA_INFORMATION: u8 = 7;
const FILE_DISPOSITION_INFORMATION: u8 = 13;
const FILE_FULL_EA_INFORMATION: u8 = 15;
const FILE_ALL_INFORMATION: u8 = 18;
const FILE_ALTERNATE_NAME_INFORMATION: u8 = 21;
const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;
const FS_ATTRIBUTE_INFORMATION: u8 = 5;
const FS_CONTROL_INFORMATION: u8 = 6;
const SL_RESTART_SCAN: u32 = 1;
const SL_RETURN_SINGLE_ENTRY: u32 = 2;
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

fn set(c: &mut Client, id: FileId, class: u8, buffer: &[u8]) -> u32 {
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_FILE, class, 0, id, buffer).unwrap()
    }))
    .status()
}

fn ea(name: &str, value: &[u8]) -> FullEa {
    FullEa {
        flags: 0,
        name: name.into(),
        value: value.to_vec(),
    }
}

/// Opens (FILE_OPEN_IF) `name` with `access`, giving `contexts`.
fn open(c: &mut Client, name: &str, access: u32, contexts: &[u8]) -> Result<FileId, u32> {
    c.open(create_request_from(&CreateParams {
        oplock_level: 0,
        desired_access: access,
        file_attributes: 0,
        share_access: 7,
        disposition: 3,
        options: 0,
        name,
        contexts,
    }))
}

/// Every EA of open `id`, from the first.
fn all_eas(c: &mut Client, id: FileId) -> Result<Vec<FullEa>, u32> {
    let (st, data) = query(
        c,
        id,
        INFO_FILE,
        FILE_FULL_EA_INFORMATION,
        4096,
        SL_RESTART_SCAN,
    );
    match st {
        status::SUCCESS => Ok(parse_full_ea_list(&data).unwrap()),
        st => Err(st),
    }
}

/// FileBasicInformation to set: times (0 leaves one) and attributes.
fn basic(change_time: u64, attributes: u32) -> Vec<u8> {
    let mut b = vec![0; 24];
    b.extend(change_time.to_le_bytes());
    b.extend(attributes.to_le_bytes());
    b.extend([0; 4]);
    b
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

#[test]
fn eas_given_at_create_are_listed_and_changed_by_set_info() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let given = encode_full_ea_list(&[ea("EaOne", b"VALUE1"), ea("second", b"ValueTwo")]);
    let ctx = build_chain(&[(EXTA, given)]);
    let f = open(&mut c, "with eas", ALL_ACCESS, &ctx).unwrap();
    // Names in capitals, as NTFS keeps them.
    let listed = vec![ea("EAONE", b"VALUE1"), ea("SECOND", b"ValueTwo")];
    assert_eq!(all_eas(&mut c, f).unwrap(), listed);
    let size = full_ea_list_size(&listed) as u32;
    let (st, data) = query(&mut c, f, INFO_FILE, FILE_EA_INFORMATION, 4096, 0);
    assert_eq!((st, u32_at(&data, 0)), (status::SUCCESS, size));
    let (_, all) = query(&mut c, f, INFO_FILE, FILE_ALL_INFORMATION, 4096, 0);
    assert_eq!(u32_at(&all, 72), size);
    // A listing tells the same (FileFullDirectoryInformation's EaSize).
    let root = c.create("", true).unwrap();
    let r = c.call(Request::new(command::QUERY_DIRECTORY, 1, |w| {
        wire::write_query_directory_request(
            w,
            FILE_FULL_DIRECTORY_INFORMATION,
            0,
            root,
            "with eas",
            4096,
        )
        .unwrap()
    }));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(
        u32_at(wire::buffer_response_data(&r.msg).unwrap(), 64),
        size
    );

    // An empty value removes the EA of its name, in any case; one that
    // is not there is not made.
    let change = encode_full_ea_list(&[ea("eaone", b""), ea("ZeroEA", b"")]);
    assert_eq!(
        set(&mut c, f, FILE_FULL_EA_INFORMATION, &change),
        status::SUCCESS
    );
    assert_eq!(all_eas(&mut c, f).unwrap(), [ea("SECOND", b"ValueTwo")]);
    let change = encode_full_ea_list(&[ea("Second", b"")]);
    assert_eq!(
        set(&mut c, f, FILE_FULL_EA_INFORMATION, &change),
        status::SUCCESS
    );
    assert_eq!(all_eas(&mut c, f), Err(status::NO_EAS_ON_FILE));

    // An open of what is there leaves its EAs as they are.
    let again = encode_full_ea_list(&[ea("other", b"x")]);
    let ctx = build_chain(&[(EXTA, again)]);
    let g = open(&mut c, "with eas", ALL_ACCESS, &ctx).unwrap();
    assert_eq!(all_eas(&mut c, g), Err(status::NO_EAS_ON_FILE));
}

#[test]
fn eas_are_read_with_read_ea_and_written_with_write_ea() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let given = encode_full_ea_list(&[ea("A", b"1")]);
    let ctx = build_chain(&[(EXTA, given.clone())]);
    open(&mut c, "f", ALL_ACCESS, &ctx).unwrap();
    let attrs = open(
        &mut c,
        "f",
        ACCESS_SYNCHRONIZE | ACCESS_READ_ATTRIBUTES,
        &[],
    )
    .unwrap();
    assert_eq!(all_eas(&mut c, attrs), Err(status::ACCESS_DENIED));
    // Its size needs no right at all.
    let (st, _) = query(&mut c, attrs, INFO_FILE, FILE_EA_INFORMATION, 4096, 0);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(
        set(&mut c, attrs, FILE_FULL_EA_INFORMATION, &given),
        status::ACCESS_DENIED
    );
    let eas = open(&mut c, "f", ACCESS_READ_EA | ACCESS_WRITE_EA, &[]).unwrap();
    assert_eq!(all_eas(&mut c, eas).unwrap(), [ea("A", b"1")]);
    assert_eq!(
        set(&mut c, eas, FILE_FULL_EA_INFORMATION, &given),
        status::SUCCESS
    );
}

#[test]
fn an_ea_query_goes_on_where_the_last_left_off() {
    let (_vfs, mut c) = login(Dialect::Smb210);
    let given = encode_full_ea_list(&[ea("A", b"1"), ea("B", b"2")]);
    let ctx = build_chain(&[(EXTA, given)]);
    let f = open(&mut c, "f", ALL_ACCESS, &ctx).unwrap();
    let q =
        |c: &mut Client, room, flags| query(c, f, INFO_FILE, FILE_FULL_EA_INFORMATION, room, flags);
    let single = SL_RETURN_SINGLE_ENTRY;
    let (st, data) = q(&mut c, 4096, single | SL_RESTART_SCAN);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(parse_full_ea_list(&data).unwrap(), [ea("A", b"1")]);
    let (st, data) = q(&mut c, 4096, single);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(parse_full_ea_list(&data).unwrap(), [ea("B", b"2")]);
    assert_eq!(q(&mut c, 4096, single).0, status::NO_MORE_EAS);
    // One entry is 11 bytes: none fits in 10, one in 11.
    assert_eq!(q(&mut c, 10, SL_RESTART_SCAN).0, status::BUFFER_TOO_SMALL);
    let (st, data) = q(&mut c, 11, SL_RESTART_SCAN);
    assert_eq!(st, status::BUFFER_OVERFLOW);
    assert_eq!(parse_full_ea_list(&data).unwrap(), [ea("A", b"1")]);
}

#[test]
fn malformed_ea_lists_are_refused() {
    let (vfs, mut c) = login(Dialect::Smb210);
    let f = open(&mut c, "f", ALL_ACCESS, &[]).unwrap();
    let bad_name = encode_full_ea_list(&[ea("a:b", b"v")]);
    assert_eq!(
        set(&mut c, f, FILE_FULL_EA_INFORMATION, &bad_name),
        status::INVALID_EA_NAME
    );
    let good = encode_full_ea_list(&[ea("ok", b"value")]);
    assert_eq!(
        set(&mut c, f, FILE_FULL_EA_INFORMATION, &good[..good.len() - 1]),
        status::EA_LIST_INCONSISTENT
    );
    // Nothing is made for a CREATE whose EAs are malformed.
    let ctx = build_chain(&[(EXTA, bad_name)]);
    assert_eq!(
        open(&mut c, "never", ALL_ACCESS, &ctx),
        Err(status::INVALID_EA_NAME)
    );
    let root = copyless_vfs::Identity::Server;
    assert!(copyless_vfs::Vfs::resolve(&*vfs, &root, "never").is_err());
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
    let eas = encode_full_ea_list(&[ea("A", b"1")]);
    assert_eq!(
        set(&mut c, f, FILE_FULL_EA_INFORMATION, &eas),
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
