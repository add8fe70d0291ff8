//! A client works on a share that lives in memory: files are created,
//! written, read back, listed, renamed and deleted through the protocol
//! core, and what it did is then seen in the VFS itself. No disk, and the
//! same script gives the same bytes on every run.

use std::sync::Arc;

use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{
    create_request_with, file_contents, names_in, put_file, read_request, rename_info, Client,
    Request, Users,
};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::{Identity, Vfs, VfsError};

const FILE_RENAME_INFORMATION: u8 = 10;
const FILE_NAMES_INFORMATION: u8 = 12;
const FILE_DISPOSITION_INFORMATION: u8 = 13;
const INFO_FILE: u8 = 1;

fn login() -> (Arc<MemoryVfs>, Client) {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    (vfs, Client::login(server, "alice", "pw"))
}

/// CREATE with DELETE access (which the scripted client's own lacks).
fn open_for_delete(c: &mut Client, name: &str, options: u32) -> Result<FileId, u32> {
    // FILE_OPEN, sharing read, write and delete.
    c.open(create_request_with(
        name,
        wire::ACCESS_DELETE | 0x0012_019f,
        7,
        1,
        options,
    ))
}

fn write(c: &mut Client, id: FileId, offset: u64, data: &[u8]) -> u32 {
    let r = c.call(Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, id, offset, data.len() as u32, 0);
        w.bytes(data);
    }));
    assert_eq!(r.status(), status::SUCCESS, "WRITE");
    wire::parse_write_response(&r.msg).unwrap()
}

fn read(c: &mut Client, id: FileId, offset: u64, len: u32) -> Vec<u8> {
    let r = c.call(read_request(id, offset, len, 1));
    assert_eq!(r.status(), status::SUCCESS, "READ");
    wire::read_response_data(&r.msg).unwrap().to_vec()
}

fn set_info(c: &mut Client, id: FileId, class: u8, buffer: &[u8]) -> u32 {
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_FILE, class, 0, id, buffer).unwrap()
    }))
    .status()
}

/// Every name a QUERY_DIRECTORY of `dir` lists, in order.
fn list(c: &mut Client, dir: &str) -> Vec<String> {
    let id = c.create(dir, true).unwrap();
    let r = c.call(Request::new(command::QUERY_DIRECTORY, 1, |w| {
        wire::write_query_directory_request(w, FILE_NAMES_INFORMATION, 0, id, "*", 65536).unwrap()
    }));
    assert_eq!(r.status(), status::SUCCESS, "QUERY_DIRECTORY");
    let names = names_in(wire::buffer_response_data(&r.msg).unwrap());
    assert_eq!(c.close(id), status::SUCCESS);
    names
}

#[test]
fn files_written_by_the_client_are_in_the_share() {
    let (vfs, mut c) = login();
    c.create("Docs", true).unwrap();
    let id = c.create("Docs\\Report.TXT", false).unwrap();
    assert_eq!(write(&mut c, id, 0, b"hello memory"), 12);
    assert_eq!(write(&mut c, id, 6, b"MEMORY"), 6);
    assert_eq!(read(&mut c, id, 6, 100), b"MEMORY");
    assert_eq!(c.close(id), status::SUCCESS);
    // Found again in any case; stored in the case it was created with.
    let id = c.create("docs\\report.txt", false).unwrap();
    assert_eq!(read(&mut c, id, 0, 100), b"hello MEMORY");
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(
        vfs.resolve(&Identity::Server, "DOCS/REPORT.txt").unwrap(),
        "Docs/Report.TXT"
    );
    assert_eq!(file_contents(&*vfs, "Docs/Report.TXT"), b"hello MEMORY");
}

#[test]
fn files_put_in_the_share_are_served() {
    let (vfs, mut c) = login();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    put_file(&*vfs, "big.bin", &data);
    let id = c.create("BIG.BIN", false).unwrap();
    assert_eq!(read(&mut c, id, 0, 65536), &data[..65536]);
    assert_eq!(read(&mut c, id, 199_990, 100), &data[199_990..]);
    let r = c.call(read_request(id, 300_000, 10, 1));
    assert_eq!(r.status(), status::END_OF_FILE);
}

#[test]
fn listing_renaming_and_deleting() {
    let (vfs, mut c) = login();
    let top = c.create("dir", true).unwrap();
    assert_eq!(c.close(top), status::SUCCESS);
    for name in ["b.txt", "A.txt", "c.txt"] {
        let id = c.create(&format!("dir\\{name}"), false).unwrap();
        write(&mut c, id, 0, name.as_bytes());
        assert_eq!(c.close(id), status::SUCCESS);
    }
    let names = list(&mut c, "dir");
    assert_eq!(names, [".", "..", "A.txt", "b.txt", "c.txt"]);

    // Renamed by a handle with DELETE access, within and out of the
    // directory, and onto an existing name only when asked to replace.
    let id = open_for_delete(&mut c, "DIR\\B.TXT", 0x40).unwrap();
    assert_eq!(
        set_info(
            &mut c,
            id,
            FILE_RENAME_INFORMATION,
            &rename_info("dir\\c.txt", false)
        ),
        status::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        set_info(
            &mut c,
            id,
            FILE_RENAME_INFORMATION,
            &rename_info("dir\\Moved.txt", false)
        ),
        status::SUCCESS
    );
    assert_eq!(c.close(id), status::SUCCESS);
    let id = open_for_delete(&mut c, "dir\\a.txt", 0x40).unwrap();
    assert_eq!(
        set_info(
            &mut c,
            id,
            FILE_RENAME_INFORMATION,
            &rename_info("dir\\C.TXT", true)
        ),
        status::SUCCESS
    );
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(list(&mut c, "dir"), [".", "..", "C.TXT", "Moved.txt"]);
    assert_eq!(file_contents(&*vfs, "dir/c.txt"), b"A.txt");
    assert_eq!(file_contents(&*vfs, "dir/moved.txt"), b"b.txt");
    // FILE_OPEN_IF makes a new one where the old name was.
    let id = c.create("dir\\b.txt", false).unwrap();
    assert_eq!(c.close(id), status::SUCCESS);

    // A directory with files in it cannot be deleted; its files can.
    let d = open_for_delete(&mut c, "dir", 1).unwrap();
    assert_eq!(
        set_info(&mut c, d, FILE_DISPOSITION_INFORMATION, &[1]),
        status::DIRECTORY_NOT_EMPTY
    );
    for name in ["dir\\C.TXT", "dir\\Moved.txt", "dir\\b.txt"] {
        let id = open_for_delete(&mut c, name, 0x40 | wire::OPTION_DELETE_ON_CLOSE).unwrap();
        assert_eq!(c.close(id), status::SUCCESS);
    }
    assert_eq!(list(&mut c, "dir"), [".", ".."]);
    assert_eq!(
        set_info(&mut c, d, FILE_DISPOSITION_INFORMATION, &[1]),
        status::SUCCESS
    );
    assert_eq!(c.close(d), status::SUCCESS);
    assert!(matches!(
        vfs.resolve(&Identity::Server, "dir"),
        Err(VfsError::NameNotFound)
    ));
    assert_eq!(
        open_for_delete(&mut c, "dir\\b.txt", 0x40).err(),
        Some(status::OBJECT_PATH_NOT_FOUND)
    );
}

/// The same script on two fresh servers: every reply byte is the same,
/// times and file ids included.
#[test]
fn a_script_replays_byte_for_byte() {
    let run = || {
        let (_vfs, mut c) = login();
        let mut replies = Vec::new();
        let id = c.create("f", false).unwrap();
        let frames = [
            vec![Request::new(command::WRITE, 1, |w| {
                wire::write_write_request_head(w, id, 0, 5, 0);
                w.bytes(b"bytes");
            })],
            vec![read_request(id, 0, 5, 1)],
            // FILE_ALL_INFORMATION: every time and the file id.
            vec![Request::new(command::QUERY_INFO, 1, |w| {
                wire::write_query_info_request(w, INFO_FILE, 18, 4096, 0, 0, id)
            })],
            vec![Request::new(command::CLOSE, 1, |w| {
                wire::write_close_request(w, 1, id)
            })],
        ];
        for reqs in frames {
            for r in c.send(reqs) {
                assert_eq!(r.status(), status::SUCCESS, "{:?}", r.header);
                replies.push(r.msg);
            }
        }
        replies
    };
    assert_eq!(run(), run());
}

/// A rename adds a name to its target's folder through an open that
/// shares reading and writing, never deletion, as Windows makes it: an
/// open of that folder that holds DELETE, or that shares no writing,
/// refuses it (smbtorture smb2.rename.*_delete_access).
#[test]
fn a_rename_meets_the_opens_of_its_target_folder() {
    const READING: u32 = 0x0012_0089;
    let (_vfs, mut c) = login();
    c.create("d", true).map(|id| c.close(id)).unwrap();
    for (i, (access, share, refused)) in [
        (READING, 7, false),
        (READING, 3, false),
        (READING, 1, true),
        (READING, 0, true),
        (wire::ACCESS_DELETE | 0x80, 7, true),
    ]
    .into_iter()
    .enumerate()
    {
        let d = c
            .open(create_request_with("d", access, share, 1, 1))
            .unwrap();
        let f = c
            .open(create_request_with(
                &format!("d\\f{i}"),
                wire::ACCESS_DELETE | 0x0012_019f,
                7,
                2,
                0x40,
            ))
            .unwrap();
        let renamed = set_info(
            &mut c,
            f,
            FILE_RENAME_INFORMATION,
            &rename_info(&format!("d\\g{i}"), false),
        );
        let want = if refused {
            status::SHARING_VIOLATION
        } else {
            status::SUCCESS
        };
        assert_eq!(renamed, want, "folder opened {access:#x}, sharing {share}");
        assert_eq!(c.close(f), status::SUCCESS);
        assert_eq!(c.close(d), status::SUCCESS);
    }
}
