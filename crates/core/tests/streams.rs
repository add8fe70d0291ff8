//! Alternate data streams as NTFS keeps them: a data stream is no
//! directory, a stream is renamed within its file, and a file deleted while
//! one of its streams is open goes when that stream closes.

use std::sync::Arc;

use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{create_request_with, file_contents, read_request, Client, Request, Users};
use copyless_vfs::memory::MemoryVfs;

const FILE_RENAME_INFORMATION: u8 = 10;
const DIRECTORY_FILE: u32 = 0x1;
const NON_DIRECTORY_FILE: u32 = 0x40;
const DELETE_ON_CLOSE: u32 = 0x1000;
const OPEN: u32 = 1;
const OPEN_IF: u32 = 3;
const SUPERSEDE: u32 = 0;
const OVERWRITE: u32 = 4;
const OVERWRITE_IF: u32 = 5;
/// Read, write and delete, as the tests below open everything.
const ALL: u32 = wire::ACCESS_DELETE | 0x0012_019f;

fn login() -> (Arc<MemoryVfs>, Client) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    (vfs, Client::login(server, "u", "pw"))
}

fn open(c: &mut Client, name: &str, disposition: u32, options: u32) -> Result<FileId, u32> {
    c.open(create_request_with(name, ALL, 7, disposition, options))
}

fn write(c: &mut Client, id: FileId, data: &[u8]) {
    let r = c.call(Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, id, 0, data.len() as u32, 0);
        w.bytes(data);
    }));
    assert_eq!(r.status(), status::SUCCESS, "WRITE");
}

fn read(c: &mut Client, id: FileId) -> Vec<u8> {
    let r = c.call(read_request(id, 0, 100, 1));
    match r.status() {
        status::SUCCESS => wire::read_response_data(&r.msg).unwrap().to_vec(),
        status::END_OF_FILE => Vec::new(),
        s => panic!("READ: {s:#x}"),
    }
}

/// FILE_RENAME_INFORMATION for SMB2 of the open `id` to `new_name`.
fn rename(c: &mut Client, id: FileId, new_name: &str, replace: bool) -> u32 {
    let name = copyless_proto::utf16::encode(new_name);
    let mut b = vec![0u8; 20];
    b[0] = u8::from(replace);
    b[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, 1, FILE_RENAME_INFORMATION, 0, id, &b).unwrap()
    }))
    .status()
}

/// Creates `name` (a stream) holding `data`, closed again.
fn put(c: &mut Client, name: &str, data: &[u8]) {
    let id = open(c, name, OPEN_IF, 0).unwrap();
    write(c, id, data);
    assert_eq!(c.close(id), status::SUCCESS);
}

#[test]
fn a_data_stream_is_no_directory() {
    let (_vfs, mut c) = login();
    let d = c.create("d", true).unwrap();
    assert_eq!(
        open(&mut c, "d::$DATA", OPEN, DIRECTORY_FILE),
        Err(status::NOT_A_DIRECTORY)
    );
    assert_eq!(
        open(&mut c, "d:s", OPEN_IF, DIRECTORY_FILE),
        Err(status::NOT_A_DIRECTORY)
    );
    assert_eq!(
        open(&mut c, "d::$DATA", OPEN, 0),
        Err(status::FILE_IS_A_DIRECTORY)
    );
    // Without the type, the name is the directory's.
    let again = open(&mut c, "d", OPEN, 0).unwrap();
    assert_eq!(c.close(again), status::SUCCESS);
    // A named stream of a directory is a data stream like any other.
    put(&mut c, "d:s", b"on a directory");
    assert_eq!(c.close(d), status::SUCCESS);
    let f = open(&mut c, "f::$DATA", OPEN_IF, NON_DIRECTORY_FILE).unwrap();
    assert_eq!(c.close(f), status::SUCCESS);
}

#[test]
fn a_stream_is_renamed_within_its_file() {
    let (vfs, mut c) = login();
    put(&mut c, "f:one", b"first");
    let h = open(&mut c, "f:one", OPEN, 0).unwrap();
    // A path is no new name for a stream.
    assert_eq!(rename(&mut c, h, "f:two", true), status::SHARING_VIOLATION);
    for bad in [":", ":two:", "::", ":a:b:$DATA", ":a/b"] {
        assert_eq!(
            rename(&mut c, h, bad, true),
            status::INVALID_PARAMETER,
            "{bad}"
        );
    }
    assert_eq!(
        rename(&mut c, h, ":two:$INDEX_ALLOCATION", true),
        status::OBJECT_TYPE_MISMATCH
    );
    // Its own name, in another case.
    assert_eq!(rename(&mut c, h, ":ONE:$DATA", false), status::SUCCESS);
    assert_eq!(rename(&mut c, h, ":two", false), status::SUCCESS);
    assert_eq!(
        open(&mut c, "f:one", OPEN, 0),
        Err(status::OBJECT_NAME_NOT_FOUND)
    );
    // The open follows the stream to its new name.
    assert_eq!(read(&mut c, h), b"first");
    write(&mut c, h, b"FIRST");
    let other = open(&mut c, "f:TWO", OPEN, 0).unwrap();
    assert_eq!(read(&mut c, other), b"FIRST");
    // Nor is a stream renamed while another open has it.
    assert_eq!(
        rename(&mut c, h, ":three", false),
        status::SHARING_VIOLATION
    );
    assert_eq!(c.close(other), status::SUCCESS);

    // A target that exists is replaced only when asked, and only when
    // empty.
    put(&mut c, "f:full", b"data");
    assert_eq!(
        rename(&mut c, h, ":full", false),
        status::OBJECT_NAME_COLLISION
    );
    assert_eq!(rename(&mut c, h, ":full", true), status::INVALID_PARAMETER);
    let full = open(&mut c, "f:full", OPEN, 0).unwrap();
    assert_eq!(rename(&mut c, h, ":full", true), status::ACCESS_DENIED);
    assert_eq!(c.close(full), status::SUCCESS);
    let empty = open(&mut c, "f:empty", OPEN_IF, 0).unwrap();
    assert_eq!(c.close(empty), status::SUCCESS);
    assert_eq!(rename(&mut c, h, ":Empty", true), status::SUCCESS);
    assert_eq!(read(&mut c, h), b"FIRST");

    // The main data always exists; empty, it takes the stream's data.
    assert_eq!(
        rename(&mut c, h, "::$DATA", false),
        status::OBJECT_NAME_COLLISION
    );
    assert_eq!(rename(&mut c, h, "::$DATA", true), status::SUCCESS);
    write(&mut c, h, b"F");
    assert_eq!(c.close(h), status::SUCCESS);
    assert_eq!(file_contents(&*vfs, "f"), b"FIRST");
    assert_eq!(
        open(&mut c, "f:Empty", OPEN, 0),
        Err(status::OBJECT_NAME_NOT_FOUND)
    );
    // Not empty, it takes nothing.
    let h = open(&mut c, "f:full", OPEN, 0).unwrap();
    assert_eq!(
        rename(&mut c, h, "::$DATA", true),
        status::INVALID_PARAMETER
    );
    assert_eq!(read(&mut c, h), b"data");
    assert_eq!(c.close(h), status::SUCCESS);
}

#[test]
fn a_deleted_file_goes_when_its_last_open_stream_closes() {
    let (_vfs, mut c) = login();
    put(&mut c, "f:s", b"kept");
    let s = open(&mut c, "f:s", OPEN, 0).unwrap();
    let f = open(&mut c, "f", OPEN, DELETE_ON_CLOSE).unwrap();
    assert_eq!(c.close(f), status::SUCCESS);
    // Until the stream closes, the name answers DELETE_PENDING...
    assert_eq!(open(&mut c, "f", OPEN_IF, 0), Err(status::DELETE_PENDING));
    assert_eq!(open(&mut c, "f:s", OPEN_IF, 0), Err(status::DELETE_PENDING));
    assert_eq!(open(&mut c, "f:t", OPEN_IF, 0), Err(status::DELETE_PENDING));
    // ...and the stream's data is still there for its open.
    assert_eq!(read(&mut c, s), b"kept");
    assert_eq!(c.close(s), status::SUCCESS);
    assert_eq!(
        open(&mut c, "f", OPEN, 0),
        Err(status::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn an_overwrite_refused_by_share_modes_leaves_the_stream_as_it_was() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    let mut a = Client::login(server.clone(), "u", "pw");
    let mut b = Client::login(server, "u", "pw");
    let held = a
        .open(create_request_with(
            "f:s",
            ALL,
            0,
            OPEN_IF,
            NON_DIRECTORY_FILE,
        ))
        .unwrap();
    write(&mut a, held, b"precious");
    for disposition in [SUPERSEDE, OVERWRITE, OVERWRITE_IF] {
        let r = b.open(create_request_with("f:s", ALL, 7, disposition, 0));
        assert_eq!(
            r,
            Err(status::SHARING_VIOLATION),
            "disposition {disposition}"
        );
    }
    assert_eq!(read(&mut a, held), b"precious");
}
