//! What CREATE refuses before it looks at the file, as Windows does
//! (smbtorture smb2.create.gentest): attributes no file has, options no
//! server serves, access nobody asks for or holds; and the attributes a
//! new file keeps, which SET_INFO sets likewise.

use std::sync::Arc;

use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::{command, status};
use copyless_scripted::{config, memory_server, Client, Request, Users};

const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
const SYNCHRONIZE: u32 = 0x0010_0000;
const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
const OPEN_IF: u32 = 3;
const OVERWRITE_IF: u32 = 5;

fn setup() -> Client {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    Client::login(server, "u", "pw")
}

/// A CREATE, closed again: the attributes of what it opened, or its
/// status.
fn create(
    c: &mut Client,
    name: &str,
    access: u32,
    attributes: u32,
    disposition: u32,
    options: u32,
) -> Result<u32, u32> {
    let r = c.call(copyless_scripted::create_request_from(
        &wire::CreateParams {
            oplock_level: 0,
            desired_access: access,
            file_attributes: attributes,
            share_access: 7,
            disposition,
            options,
            name,
            contexts: &[],
        },
    ));
    match r.status() {
        status::SUCCESS => {
            let reply = CreateReply::parse(&r.msg).unwrap();
            assert_eq!(c.close(reply.file_id), status::SUCCESS);
            Ok(reply.times.attributes)
        }
        s => Err(s),
    }
}

#[test]
fn attributes_no_file_has_are_invalid() {
    let mut c = setup();
    // VOLUME, DEVICE, INTEGRITY_STREAM, and every bit above.
    for bit in [0x8, 0x40, 0x8000, 0x1_0000, 0x8000_0000] {
        assert_eq!(
            create(&mut c, "f", MAXIMUM_ALLOWED, bit, OVERWRITE_IF, 0).err(),
            Some(status::INVALID_PARAMETER),
            "attribute {bit:#x}"
        );
    }
    // The access mask is checked first.
    assert_eq!(
        create(&mut c, "f", 0x0800_0000, 0x8, OVERWRITE_IF, 0).err(),
        Some(status::ACCESS_DENIED)
    );
    // A directory cannot be temporary.
    assert_eq!(
        create(&mut c, "d", MAXIMUM_ALLOWED, 0x100, OPEN_IF, 1).err(),
        Some(status::INVALID_PARAMETER)
    );
}

#[test]
fn a_new_file_keeps_temporary_offline_and_not_indexed() {
    let mut c = setup();
    for (i, bit) in [0x100u32, 0x1000, 0x2000, 0x1].into_iter().enumerate() {
        let name = format!("f{i}");
        let got = create(&mut c, &name, MAXIMUM_ALLOWED, bit, OPEN_IF, 0).unwrap();
        assert_eq!(got, bit | 0x20, "attribute {bit:#x}");
    }
    // Sparse, compressed and the like are the filesystem's to say.
    let got = create(&mut c, "g", MAXIMUM_ALLOWED, 0x200 | 0x800, OPEN_IF, 0).unwrap();
    assert_eq!(got, 0x20);
    // There is no EFS to encrypt a file with.
    assert_eq!(
        create(&mut c, "h", MAXIMUM_ALLOWED, 0x4000, OPEN_IF, 0).err(),
        Some(status::ACCESS_DENIED)
    );
}

#[test]
fn options_no_server_serves_are_not_supported() {
    let mut c = setup();
    create(&mut c, "f", MAXIMUM_ALLOWED, 0, OVERWRITE_IF, 0).unwrap();
    // FILE_CREATE_TREE_CONNECTION, FILE_OPEN_BY_FILE_ID,
    // FILE_RESERVE_OPFILTER.
    for option in [0x80, 0x2000, 0x10_0000] {
        assert_eq!(
            create(&mut c, "f", MAXIMUM_ALLOWED, 0, OPEN_IF, option).err(),
            Some(status::NOT_SUPPORTED),
            "option {option:#x}"
        );
    }
    for option in [0x2, 0x4, 0x8, 0x10, 0x20, 0x200, 0x4000, 0x20_0000] {
        assert!(
            create(&mut c, "f", MAXIMUM_ALLOWED, 0, OPEN_IF, option).is_ok(),
            "option {option:#x}"
        );
    }
}

#[test]
fn access_nobody_asks_for_or_holds_is_refused() {
    let mut c = setup();
    create(&mut c, "f", MAXIMUM_ALLOWED, 0, OVERWRITE_IF, 0).unwrap();
    assert_eq!(
        create(&mut c, "f", 0, 0, OPEN_IF, 0).err(),
        Some(status::ACCESS_DENIED)
    );
    // SYNCHRONIZE alone is a stat open like any other since Windows 7
    // (Windows Server 2008 refused it over SMB 2.0.2).
    assert!(create(&mut c, "f", SYNCHRONIZE, 0, OPEN_IF, 0).is_ok());
    assert_eq!(
        create(&mut c, "f", ACCESS_SYSTEM_SECURITY, 0, OPEN_IF, 0).err(),
        Some(status::PRIVILEGE_NOT_HELD)
    );
}

#[test]
fn set_info_makes_no_directory_temporary() {
    let mut c = setup();
    let basic = |attributes: u32| {
        let mut b = vec![0u8; 40];
        b[32..36].copy_from_slice(&attributes.to_le_bytes());
        b
    };
    let set = |c: &mut Client, id, buffer: &[u8]| {
        c.call(Request::new(command::SET_INFO, 1, |w| {
            wire::write_set_info_request(w, 1, 4, 0, id, buffer).unwrap()
        }))
        .status()
    };
    let d = c.create("d", true).unwrap();
    assert_eq!(set(&mut c, d, &basic(0x100)), status::INVALID_PARAMETER);
    assert_eq!(set(&mut c, d, &basic(0x2)), status::SUCCESS);
    let f = c.create("f", false).unwrap();
    assert_eq!(set(&mut c, f, &basic(0x100 | 0x1000)), status::SUCCESS);
    assert_eq!(set(&mut c, f, &basic(0x10)), status::INVALID_PARAMETER);
}

#[test]
fn a_hidden_or_system_file_is_overwritten_only_by_a_create_that_keeps_it_so() {
    const HIDDEN: u32 = 0x2;
    const SYSTEM: u32 = 0x4;
    const OVERWRITE: u32 = 4;
    const SUPERSEDE: u32 = 0;
    let mut c = setup();
    for kept in [HIDDEN, SYSTEM, HIDDEN | SYSTEM] {
        let name = format!("f{kept}");
        create(&mut c, &name, MAXIMUM_ALLOWED, kept, OVERWRITE_IF, 0).unwrap();
        for disposition in [OVERWRITE, OVERWRITE_IF, SUPERSEDE] {
            assert_eq!(
                create(&mut c, &name, MAXIMUM_ALLOWED, 0, disposition, 0).err(),
                Some(status::ACCESS_DENIED),
                "{kept:#x} overwritten by {disposition} without it"
            );
        }
        // Opening it is no overwrite.
        assert!(create(&mut c, &name, MAXIMUM_ALLOWED, 0, OPEN_IF, 0).is_ok());
        let got = create(&mut c, &name, MAXIMUM_ALLOWED, kept, OVERWRITE, 0).unwrap();
        assert_eq!(got, kept | 0x20);
    }
}

#[test]
fn a_slash_separates_components_as_a_backslash_does() {
    const DIRECTORY: u32 = 1;
    let mut c = setup();
    create(&mut c, "d", MAXIMUM_ALLOWED, 0, OPEN_IF, DIRECTORY).unwrap();
    create(&mut c, "d/f", MAXIMUM_ALLOWED, 0, OPEN_IF, 0).unwrap();
    assert!(create(&mut c, "d\\f", MAXIMUM_ALLOWED, 0, 1, 0).is_ok());
    assert_eq!(
        create(&mut c, "d/f/", MAXIMUM_ALLOWED, 0, 1, 0).err(),
        Some(status::OBJECT_NAME_INVALID)
    );
    assert_eq!(
        create(&mut c, "/d", MAXIMUM_ALLOWED, 0, 1, 0).err(),
        Some(status::INVALID_PARAMETER)
    );
}

#[test]
fn a_file_opens_by_its_short_name() {
    let mut c = setup();
    create(
        &mut c,
        "A long file name.text",
        MAXIMUM_ALLOWED,
        0,
        OPEN_IF,
        0,
    )
    .unwrap();
    let short = copyless_vfs::shortname::short_name("A long file name.text");
    assert!(short.contains('~'), "{short}");
    assert!(create(&mut c, &short.to_lowercase(), MAXIMUM_ALLOWED, 0, 1, 0).is_ok());
    // Nothing else of that form is found.
    assert_eq!(
        create(&mut c, "ALON~ZZZ.TEX", MAXIMUM_ALLOWED, 0, 1, 0).err(),
        Some(status::OBJECT_NAME_NOT_FOUND)
    );
}
