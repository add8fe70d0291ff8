//! Which frames an engine may handle on the thread that serves sockets
//! (`Connection::may_block` false): those whose requests reach file data
//! only through intents, or the filesystem only to close a descriptor. A
//! CLOSE that deletes, reports a change to a watcher, asks attributes
//! back, ends a watch or may let a held request run again reaches the
//! filesystem while it is handled, and must go elsewhere.

use std::sync::Arc;

use copyless_proto::client::{self as wire, OPTION_DELETE_ON_CLOSE};
use copyless_proto::command;
use copyless_proto::messages::{FileId, CLOSE_FLAG_POSTQUERY_ATTRIB};
use copyless_proto::status;
use copyless_scripted::{
    close_request, config, create_request, create_request_with, memory_server, notify_request,
    write_request, Client, Request, Users,
};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::{Identity, Kind, OpenRequest, Vfs};

/// Read, write and delete, shared every way.
const ALL: u32 = 0x0013_019f;
const SHARE_ALL: u32 = 7;
const OPEN_IF: u32 = 3;
const NON_DIRECTORY: u32 = 0x40;
/// FILE_NOTIFY_CHANGE_FILE_NAME | LAST_WRITE | SIZE.
const FILTER: u32 = 0x1 | 0x8 | 0x10;

fn client() -> (Client, Arc<MemoryVfs>) {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, vfs) = memory_server(config(), users);
    (Client::login(server, "alice", "pw"), vfs)
}

fn postquery_close(id: FileId) -> Request {
    Request::new(command::CLOSE, 1, |w| {
        wire::write_close_request(w, CLOSE_FLAG_POSTQUERY_ATTRIB, id)
    })
}

/// An open of `name` that deletes it at its close.
fn doomed(name: &str) -> Request {
    create_request_with(
        name,
        ALL,
        SHARE_ALL,
        OPEN_IF,
        NON_DIRECTORY | OPTION_DELETE_ON_CLOSE,
    )
}

fn exists(vfs: &MemoryVfs, path: &str) -> bool {
    vfs.open(&OpenRequest::look(&Identity::Server, path, Kind::Any))
        .is_ok()
}

/// Whether the frame of `reqs` may block; then sends it, and returns
/// that with the statuses of its replies.
fn sent(c: &mut Client, reqs: Vec<Request>) -> (bool, Vec<u32>) {
    let frame = c.frame(reqs);
    let blocks = c.conn.may_block(&frame);
    let statuses = c.handle_frame(&frame).iter().map(|r| r.status()).collect();
    (blocks, statuses)
}

#[test]
fn a_close_that_only_gives_its_open_back_is_handled_in_place() {
    let (mut c, vfs) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(
        c.call(write_request(id, 0, b"kept")).status(),
        status::SUCCESS
    );
    assert_eq!(
        sent(&mut c, vec![close_request(id)]),
        (false, vec![status::SUCCESS])
    );
    assert!(exists(&vfs, "doc"), "a plain close deletes nothing");
    let id = c.create("doc", false).unwrap();
    assert_eq!(c.close(id), status::SUCCESS, "and its open was given back");
}

#[test]
fn a_close_that_asks_for_attributes_goes_elsewhere() {
    let (mut c, _) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(
        sent(&mut c, vec![postquery_close(id)]),
        (true, vec![status::SUCCESS])
    );
}

#[test]
fn a_close_that_deletes_goes_elsewhere() {
    let (mut c, vfs) = client();
    let id = c.open(doomed("doc")).unwrap();
    assert_eq!(
        sent(&mut c, vec![close_request(id)]),
        (true, vec![status::SUCCESS])
    );
    assert!(!exists(&vfs, "doc"));
}

#[test]
fn the_last_close_of_a_file_another_open_doomed_goes_elsewhere() {
    let (mut c, vfs) = client();
    let keeper = c.create("doc", false).unwrap();
    let id = c.open(doomed("doc")).unwrap();
    assert_eq!(c.close(id), status::SUCCESS);
    assert!(exists(&vfs, "doc"), "another open keeps it for now");
    assert_eq!(
        sent(&mut c, vec![close_request(keeper)]),
        (true, vec![status::SUCCESS])
    );
    assert!(!exists(&vfs, "doc"), "the last close deleted it");
}

#[test]
fn a_close_with_a_change_to_report_goes_elsewhere() {
    let (mut c, _) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(
        c.call(write_request(id, 0, b"news")).status(),
        status::SUCCESS
    );
    let dir = c.create("", true).unwrap();
    // The watch begins; its request waits for a change.
    let waiting = c.send(vec![notify_request(dir, FILTER, true, 4096)]);
    assert!(waiting.iter().all(|r| r.status() == status::PENDING));
    let (blocks, statuses) = sent(&mut c, vec![close_request(id)]);
    assert!(blocks, "watchers may have to be looked up on disk");
    assert!(
        statuses.contains(&status::SUCCESS) && statuses.len() == 2,
        "the close, and the watcher told: {statuses:x?}"
    );
    let (blocks, _) = sent(&mut c, vec![close_request(dir)]);
    assert!(blocks, "a watch ends");
}

#[test]
fn a_compound_that_opens_goes_elsewhere() {
    let (mut c, _) = client();
    let mut close = close_request(FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    });
    close.related = true;
    let (blocks, statuses) = sent(&mut c, vec![create_request("doc", false), close]);
    assert!(blocks);
    assert_eq!(statuses, vec![status::SUCCESS, status::SUCCESS]);
}

#[test]
fn a_close_of_an_open_that_is_not_there_goes_elsewhere_and_fails() {
    let (mut c, _) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(
        sent(&mut c, vec![close_request(id)]),
        (true, vec![status::FILE_CLOSED])
    );
}
