//! Security descriptors through the protocol core: what SET_INFO stores,
//! what a new file or directory inherits from its directory's descriptor,
//! and what a creator's SecD context gives it, each read back with
//! QUERY_INFO as a client sees it.

use std::sync::Arc;

use copyless_fscc::access::{FILE_ALL_ACCESS, FILE_GENERIC_READ};
use copyless_fscc::descriptor::{
    sids, Ace, Descriptor, ACCESS_ALLOWED_ACE_TYPE, ALL_PARTS, CONTAINER_INHERIT_ACE,
    INHERITED_ACE, INHERIT_ONLY_ACE, OBJECT_INHERIT_ACE, SE_DACL_AUTO_INHERITED,
    SE_DACL_AUTO_INHERIT_REQ, SE_DACL_PRESENT,
};
use copyless_proto::client::{self as wire};
use copyless_proto::create_context as cc;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{config, memory_server, Client, Request, Users};

const INFO_SECURITY: u8 = 3;
const DACL_AND_OWNER: u32 = 0x5;
const DACL: u32 = 0x4;
const GENERIC_ALL: u32 = 0x1000_0000;
const GENERIC_READ: u32 = 0x8000_0000;
const OI_CI: u8 = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;

fn login() -> Client {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, _) = memory_server(config(), users);
    Client::login(server, "alice", "pw")
}

/// CREATE (FILE_CREATE, all rights) of a file or directory, with the
/// creator's descriptor when given.
fn create(c: &mut Client, name: &str, dir: bool, sd: Option<&Descriptor>) -> Result<FileId, u32> {
    let contexts = match sd {
        Some(sd) => cc::build_chain(&[(cc::SECD, sd.encode(ALL_PARTS))]),
        None => Vec::new(),
    };
    create_with(c, name, dir, &contexts)
}

fn create_with(c: &mut Client, name: &str, dir: bool, contexts: &[u8]) -> Result<FileId, u32> {
    c.open(copyless_scripted::create_request_from(
        &wire::CreateParams {
            oplock_level: 0,
            desired_access: FILE_ALL_ACCESS,
            file_attributes: 0,
            share_access: 7,
            disposition: 2,
            options: if dir { 1 } else { 0x40 },
            name,
            contexts,
        },
    ))
}

fn query(c: &mut Client, id: FileId, parts: u32) -> Descriptor {
    let r = c.call(Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, INFO_SECURITY, 0, 4096, parts, 0, id)
    }));
    assert_eq!(r.status(), status::SUCCESS, "QUERY_INFO security");
    Descriptor::parse(wire::buffer_response_data(&r.msg).unwrap()).unwrap()
}

/// SET_INFO of `parts` from a descriptor whose raw control is `control`
/// (SE_DACL_AUTO_INHERIT_REQ included, which a stored descriptor never
/// holds).
fn set(c: &mut Client, id: FileId, parts: u32, control: u16, sd: &Descriptor) {
    let mut raw = sd.encode(ALL_PARTS);
    raw[2..4].copy_from_slice(&(0x8000 | control).to_le_bytes());
    let r = c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_SECURITY, 0, parts, id, &raw).unwrap()
    }));
    assert_eq!(r.status(), status::SUCCESS, "SET_INFO security");
}

fn dacl(aces: &[(&[u8], u32, u8)]) -> Descriptor {
    Descriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(
            aces.iter()
                .map(|&(sid, mask, flags)| Ace::new(ACCESS_ALLOWED_ACE_TYPE, flags, mask, sid))
                .collect(),
        ),
        ..Descriptor::default()
    }
}

fn aces(sd: &Descriptor) -> Vec<(Vec<u8>, u32, u8)> {
    sd.dacl
        .as_ref()
        .expect("a DACL")
        .iter()
        .map(|a| (a.sid().unwrap().to_vec(), a.mask(), a.flags()))
        .collect()
}

#[test]
fn new_objects_inherit_their_directorys_dacl_as_windows_builds_it() {
    let mut c = login();
    let d = create(&mut c, "d", true, None).unwrap();
    let owner = query(&mut c, d, DACL_AND_OWNER).owner.unwrap();
    let parent = dacl(&[
        (sids::CREATOR_OWNER, GENERIC_ALL, OI_CI | INHERIT_ONLY_ACE),
        (sids::EVERYONE, GENERIC_READ, OBJECT_INHERIT_ACE),
        (sids::AUTHENTICATED_USERS, FILE_ALL_ACCESS, 0),
    ]);
    let auto = SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ;
    set(&mut c, d, DACL, auto, &parent);

    // The request bit is gone, generic rights that apply are mapped, and
    // inherit-only ones kept for the children.
    let stored = query(&mut c, d, DACL);
    assert_eq!(stored.control, SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED);
    assert_eq!(
        aces(&stored),
        [
            (
                sids::CREATOR_OWNER.to_vec(),
                GENERIC_ALL,
                OI_CI | INHERIT_ONLY_ACE
            ),
            (
                sids::EVERYONE.to_vec(),
                FILE_GENERIC_READ,
                OBJECT_INHERIT_ACE
            ),
            (sids::AUTHENTICATED_USERS.to_vec(), FILE_ALL_ACCESS, 0),
        ]
    );

    let f = create(&mut c, "d\\f", false, None).unwrap();
    let file = query(&mut c, f, DACL_AND_OWNER);
    assert_eq!(file.control, SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED);
    assert_eq!(file.owner.as_ref(), Some(&owner));
    assert_eq!(
        aces(&file),
        [
            (owner.clone(), FILE_ALL_ACCESS, INHERITED_ACE),
            (sids::EVERYONE.to_vec(), FILE_GENERIC_READ, INHERITED_ACE),
        ]
    );

    let s = create(&mut c, "d\\s", true, None).unwrap();
    let sub = query(&mut c, s, DACL);
    assert_eq!(
        aces(&sub),
        [
            (owner.clone(), FILE_ALL_ACCESS, INHERITED_ACE),
            (
                sids::CREATOR_OWNER.to_vec(),
                GENERIC_ALL,
                OI_CI | INHERIT_ONLY_ACE | INHERITED_ACE
            ),
            (
                sids::EVERYONE.to_vec(),
                FILE_GENERIC_READ,
                OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
            ),
        ]
    );
    // A grandchild inherits what the subdirectory passes on.
    let g = create(&mut c, "d\\s\\g", false, None).unwrap();
    assert_eq!(aces(&query(&mut c, g, DACL)), aces(&file));

    // Below a DACL that is not auto-inherited nothing is marked inherited.
    set(&mut c, d, DACL, SE_DACL_PRESENT, &parent);
    let f2 = create(&mut c, "d\\f2", false, None).unwrap();
    let file = query(&mut c, f2, DACL);
    assert_eq!(file.control, SE_DACL_PRESENT);
    assert_eq!(
        aces(&file),
        [
            (owner, FILE_ALL_ACCESS, 0),
            (sids::EVERYONE.to_vec(), FILE_GENERIC_READ, 0),
        ]
    );
}

#[test]
fn a_creators_descriptor_is_the_new_objects_and_a_null_dacl_shows_as_one() {
    let mut c = login();
    let wanted = dacl(&[(sids::AUTHENTICATED_USERS, GENERIC_READ, 0)]);
    let f = create(&mut c, "f", false, Some(&wanted)).unwrap();
    let got = query(&mut c, f, DACL_AND_OWNER);
    assert_eq!(
        aces(&got),
        [(sids::AUTHENTICATED_USERS.to_vec(), FILE_GENERIC_READ, 0)]
    );
    assert!(got.owner.is_some(), "the owner the creator left open shows");

    // A descriptor without a DACL leaves the new object's DACL to its mode.
    let d = create(&mut c, "d", true, Some(&Descriptor::default())).unwrap();
    let got = query(&mut c, d, DACL);
    assert_eq!(got.control, SE_DACL_PRESENT);
    assert!(!aces(&got).is_empty());

    // Naming the DACL without one sets a NULL DACL: present, no ACL.
    set(&mut c, d, DACL, 0, &Descriptor::default());
    let got = query(&mut c, d, DACL);
    assert_eq!((got.control, got.dacl), (SE_DACL_PRESENT, None));

    // A descriptor that does not parse refuses the create, as SET_INFO
    // refuses it.
    let mut bad = wanted.encode(ALL_PARTS);
    bad[0] = 2;
    let r = create_with(&mut c, "bad", false, &cc::build_chain(&[(cc::SECD, bad)]));
    assert_eq!(r, Err(0xC000_0058), "STATUS_UNKNOWN_REVISION");
}

#[test]
fn each_part_of_a_descriptor_needs_its_right_and_no_part_needs_none() {
    const READ_ATTRIBUTES: u32 = 0x80;
    let mut c = login();
    let id = create(&mut c, "f", false, None).unwrap();
    assert_eq!(c.close(id), status::SUCCESS);
    let id = c
        .open(copyless_scripted::create_request_from(
            &wire::CreateParams {
                oplock_level: 0,
                desired_access: READ_ATTRIBUTES,
                file_attributes: 0,
                share_access: 7,
                disposition: 1,
                options: 0,
                name: "f",
                contexts: &[],
            },
        ))
        .unwrap();
    // Owner, group, DACL: READ_CONTROL; the SACL: ACCESS_SYSTEM_SECURITY.
    for part in [0x1, 0x2, 0x4, 0x8] {
        let r = c.call(Request::new(command::QUERY_INFO, 1, |w| {
            wire::write_query_info_request(w, INFO_SECURITY, 0, 4096, part, 0, id)
        }));
        assert_eq!(r.status(), status::ACCESS_DENIED, "part {part:#x}");
    }
    let sd = query(&mut c, id, 0);
    assert!(sd.owner.is_none() && sd.group.is_none() && sd.dacl.is_none() && sd.sacl.is_none());
    assert_eq!(c.close(id), status::SUCCESS);
}

#[test]
fn access_based_enumeration_shows_only_what_a_stored_dacl_lets_the_reader_read() {
    const READ_CONTROL: u32 = 0x0002_0000;
    const WRITE_DAC: u32 = 0x0004_0000;
    const SYNCHRONIZE: u32 = 0x0010_0000;
    const READ_DATA: u32 = 0x1;
    const READ_EA: u32 = 0x8;
    const READ_ATTRIBUTES: u32 = 0x80;
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let abe = copyless_core::ShareAccess {
        access_based_enumeration: true,
        ..Default::default()
    };
    let server = copyless_scripted::shares_over(
        Arc::new(copyless_vfs::memory::MemoryVfs::new()),
        "memory",
        config(),
        users,
        &[("share", false, abe)],
    );
    let mut c = Client::login(server, "alice", "pw");
    let d = create(&mut c, "d", true, None).unwrap();
    let owner = query(&mut c, d, DACL_AND_OWNER).owner.unwrap();
    let reading = READ_CONTROL | READ_DATA | READ_EA | READ_ATTRIBUTES | SYNCHRONIZE | WRITE_DAC;
    // Each lacks one right reading takes, but the last, which has all.
    for (name, mask) in [
        ("no-data", reading & !READ_DATA),
        ("no-ea", reading & !READ_EA),
        ("no-attributes", reading & !READ_ATTRIBUTES),
        ("all", reading),
    ] {
        let f = create(&mut c, &format!("d\\{name}"), false, None).unwrap();
        set(
            &mut c,
            f,
            DACL,
            SE_DACL_PRESENT,
            &dacl(&[(&owner, mask, 0)]),
        );
        assert_eq!(c.close(f), status::SUCCESS);
    }
    let r = c.call(copyless_scripted::names_request(d, 0, "*", 4096));
    assert_eq!(r.status(), status::SUCCESS);
    let names = copyless_scripted::names_in(wire::buffer_response_data(&r.msg).unwrap());
    assert_eq!(names, [".", "..", "all"]);
}
