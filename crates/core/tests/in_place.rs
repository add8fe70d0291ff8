//! Which frames an engine may handle on the thread that serves sockets
//! (`Connection::may_block` false): those whose requests reach file data
//! only through intents, the filesystem only through calls, to close a
//! descriptor, or where the kernel answers from memory, and those that
//! need only the server's own memory (byte-range locks, the changes a
//! watch has gathered). A CLOSE that removes its file, an open that may
//! create or truncate, a rename (one that replaces, where the kernel
//! finds what it replaces in its cache), a new size or new times, a
//! listing, a query of what is not in the open file's stat, the open of
//! a named stream (with its file, made if need be) and the first
//! CHANGE_NOTIFY of an open (the engine's watch of the folder) hand their
//! filesystem work on as a call, also while folders are watched (what a
//! call changes stays the server's own change until it is made); the
//! close that ends a watch leaves the engine to let go of it. What
//! reaches the filesystem while it is handled must go elsewhere: a
//! change reported to a watcher of a tree on the request's own
//! connection (whose rights beneath are looked up), attributes asked
//! back at a CLOSE of what only the VFS reaches, a held request a CLOSE
//! may let run again, and a rename onto a name the kernel's cache does
//! not find.

use std::sync::Arc;

use copyless_core::{CallOp, Completion, Server};
use copyless_fscc::notify::action;
use copyless_proto::client::{self as wire, OPTION_DELETE_ON_CLOSE};
use copyless_proto::command;
use copyless_proto::messages::{FileId, CLOSE_FLAG_POSTQUERY_ATTRIB};
use copyless_proto::status;
use copyless_scripted::{
    close_request, config, create_request, create_request_with, lock_request, memory_server,
    names_in, names_request, notify_entries, notify_request, rename_info, write_request, Client,
    Reply, Request, Users,
};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::{Identity, Kind, OpenRequest, Vfs, VfsError};

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
    let (blocks, replies) = replied(c, reqs);
    (blocks, replies.iter().map(|r| r.status()).collect())
}

/// Whether the frame of `reqs` may block; then sends it, and returns
/// that with its replies.
fn replied(c: &mut Client, reqs: Vec<Request>) -> (bool, Vec<Reply>) {
    let frame = c.frame(reqs);
    let blocks = c.conn.may_block(&frame);
    (blocks, c.handle_frame(&frame))
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
fn a_close_that_asks_for_attributes_of_a_local_file_is_handled_in_place() {
    let (mut c, _dir) = posix_client();
    let (_, id) = opened(&mut c, open_request("sub\\doc", OPEN));
    let (blocks, replies) = replied(&mut c, vec![postquery_close(id.unwrap())]);
    assert!(!blocks);
    assert_eq!(replies[0].status(), status::SUCCESS);
    let body = &replies[0].msg[64..];
    let end_of_file = u64::from_le_bytes(body[48..56].try_into().unwrap());
    assert_eq!(end_of_file, 4, "the attributes asked for: \"kept\"");
}

#[test]
fn a_close_that_asks_for_attributes_only_the_vfs_reaches_looks_them_up_by_call() {
    let (mut c, vfs) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(
        c.call(write_request(id, 0, b"kept")).status(),
        status::SUCCESS
    );
    let reply = by_call(&mut c, postquery_close(id), |op| {
        matches!(op, CallOp::Look(_))
    });
    assert_eq!(reply.status(), status::SUCCESS);
    let body = &reply.msg[64..];
    assert_eq!(
        body[2], CLOSE_FLAG_POSTQUERY_ATTRIB as u8,
        "attributes given"
    );
    let end_of_file = u64::from_le_bytes(body[48..56].try_into().unwrap());
    assert_eq!(end_of_file, 4, "the attributes asked for: \"kept\"");
    assert!(exists(&vfs, "doc"));
    let again = c.create("doc", false).unwrap();
    assert_eq!(
        c.close(again),
        status::SUCCESS,
        "and its open was given back"
    );
}

#[test]
fn a_close_that_deletes_is_handled_in_place_and_its_removal_leaves_as_a_call() {
    let (mut c, vfs) = client();
    let id = c.open(doomed("doc")).unwrap();
    let frame = c.frame(vec![close_request(id)]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    assert!(out.frames.is_empty(), "the reply waits for the removal");
    assert!(out.intents.is_empty());
    let call = out.calls.pop().expect("a call");
    assert!(out.calls.is_empty());
    match &call.op {
        CallOp::Unlink { path, is_dir, .. } => assert_eq!((path.as_str(), *is_dir), ("doc", false)),
        op => panic!("{op:?}"),
    }
    assert!(exists(&vfs, "doc"), "not before the engine makes the call");
    let (token, done) = call.perform();
    assert!(!exists(&vfs, "doc"));
    let out = c.complete(token, done);
    let replies = c.take(out);
    let statuses: Vec<u32> = replies.iter().map(|r| r.status()).collect();
    assert_eq!(statuses, vec![status::SUCCESS]);
    assert_eq!(c.open(doomed("doc")).map(|_| ()), Ok(()), "made anew");
}

#[test]
fn a_close_whose_removal_fails_still_succeeds_and_keeps_the_file() {
    let (mut c, vfs) = client();
    let id = c.open(doomed("doc")).unwrap();
    let frame = c.frame(vec![close_request(id)]);
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("a call");
    let done = Completion::Unlinked(Err(VfsError::NotEmpty));
    let replies = c.complete(call.token, done);
    let replies = c.take(replies);
    assert_eq!(replies[0].status(), status::SUCCESS, "as on Windows");
    assert!(exists(&vfs, "doc"));
}

#[test]
fn the_last_close_of_a_file_another_open_doomed_removes_it_by_a_call() {
    let (mut c, vfs) = client();
    let keeper = c.create("doc", false).unwrap();
    let id = c.open(doomed("doc")).unwrap();
    assert_eq!(c.close(id), status::SUCCESS);
    assert!(exists(&vfs, "doc"), "another open keeps it for now");
    assert_eq!(
        sent(&mut c, vec![close_request(keeper)]),
        (false, vec![status::SUCCESS])
    );
    assert!(!exists(&vfs, "doc"), "the last close deleted it");
}

#[test]
fn a_close_with_a_change_to_report_is_handled_in_place() {
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
    assert!(!blocks, "what watchers of a tree may see is a call's look");
    assert!(
        statuses.contains(&status::SUCCESS) && statuses.len() == 2,
        "the close, and the watcher told: {statuses:x?}"
    );
    // The watch's end is in place: the engine lets go of its watches on
    // its own.
    let (blocks, statuses) = sent(&mut c, vec![close_request(dir)]);
    assert_eq!(
        (blocks, statuses),
        (false, vec![status::SUCCESS]),
        "a watch ends"
    );
}

/// A CLOSE of what the request before it in the compound opened.
fn related_close() -> Request {
    related(close_request(CHAINED))
}

/// The file id of a request related to the one before it.
const CHAINED: FileId = FileId {
    persistent: u64::MAX,
    volatile: u64::MAX,
};

fn related(mut req: Request) -> Request {
    req.related = true;
    req
}

#[test]
fn a_compound_that_opens_and_closes_is_handled_in_place_unless_its_close_may_reach_the_disk() {
    let (mut c, vfs) = client();
    let (blocks, statuses) = sent(&mut c, vec![create_request("doc", false), related_close()]);
    assert!(!blocks, "the open is a call, the close gives it back");
    assert_eq!(statuses, vec![status::SUCCESS, status::SUCCESS]);
    let query = related(query(CHAINED, FILE_BASIC_INFORMATION));
    let chain = vec![open_request("doc", OPEN), query, related_close()];
    let (blocks, statuses) = sent(&mut c, chain);
    assert!(!blocks, "Explorer's open, query, close");
    assert_eq!(statuses, vec![status::SUCCESS; 3]);
    // Made to be deleted: the removal is a call too.
    let (blocks, statuses) = sent(&mut c, vec![doomed("gone"), related_close()]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS; 2]));
    assert!(!exists(&vfs, "gone"));
    // A stream's (Finder's CREATE, READ, CLOSE of AFP_AfpInfo), too.
    let stream = || create_request_with("doc:s", ALL, SHARE_ALL, OPEN_IF, 0);
    let (blocks, statuses) = sent(&mut c, vec![stream(), related_close()]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS; 2]));
    // Attributes asked back (the Linux client's compounds) are looked up
    // by a call where they are not in memory.
    let asks = related(postquery_close(CHAINED));
    let (blocks, replies) = replied(&mut c, vec![open_request("doc", OPEN), asks]);
    assert!(!blocks, "attributes asked back");
    assert_eq!(replies[1].status(), status::SUCCESS);
    assert_eq!(replies[1].msg[64 + 2], CLOSE_FLAG_POSTQUERY_ATTRIB as u8);
    // A stream's removal is a call as well, asked for at its open or
    // marked in the chain.
    let is_gone = |c: &mut Client| {
        let open = create_request_with("doc:s", ALL, SHARE_ALL, OPEN, 0);
        c.open(open) == Err(status::OBJECT_NAME_NOT_FOUND)
    };
    let doomed_stream =
        create_request_with("doc:s", ALL, SHARE_ALL, OPEN_IF, OPTION_DELETE_ON_CLOSE);
    let (blocks, statuses) = sent(&mut c, vec![doomed_stream, related_close()]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS; 2]));
    assert!(is_gone(&mut c), "a stream deleted at its close");
    let mark = related(set_info(CHAINED, FILE_DISPOSITION_INFORMATION, &[1]));
    let (blocks, statuses) = sent(&mut c, vec![stream(), mark, related_close()]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS; 3]));
    assert!(is_gone(&mut c), "a stream marked for deletion in the chain");
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

/// FILE_GENERIC_READ: all the share's root may be opened with.
const READ: u32 = 0x0012_0089;
/// FILE_OPEN: only an object that is there.
const OPEN: u32 = 1;
const CREATE: u32 = 2;
const OVERWRITE: u32 = 4;
const OVERWRITE_IF: u32 = 5;
const INFO_FILE: u8 = 1;
const FILE_BASIC_INFORMATION: u8 = 4;
const FILE_STREAM_INFORMATION: u8 = 22;

/// A client of a server whose share is a folder of this machine's own
/// filesystem, where the kernel's cache decides what is found in place.
fn posix_client() -> (Client, tempfile::TempDir) {
    let (_, c, dir) = posix_share();
    (c, dir)
}

/// [`posix_client`], with its server, for more clients.
fn posix_share() -> (Arc<Server>, Client, tempfile::TempDir) {
    // tmpfs: a filesystem whose metadata lives in memory, wherever the
    // machine keeps its temporary files.
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/doc"), b"kept").unwrap();
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let server = copyless_scripted::server(dir.path(), config(), users);
    // Just made: what their xattrs hold is in memory, though not yet
    // remembered (see the VFS's meta.rs).
    let mut c = Client::login(server.clone(), "alice", "pw");
    // The first lookups may have to read folders and attributes.
    for name in ["", "sub\\doc"] {
        let id = c
            .open(create_request_with(name, READ, SHARE_ALL, OPEN, 0))
            .unwrap();
        assert_eq!(c.close(id), status::SUCCESS);
    }
    (server, c, dir)
}

fn open_request(name: &str, disposition: u32) -> Request {
    create_request_with(name, ALL, SHARE_ALL, disposition, 0)
}

fn query(id: FileId, class: u8) -> Request {
    Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, INFO_FILE, class, 4096, 0, 0, id)
    })
}

/// Whether the CREATE may block; then sends it, and returns that with
/// the open's id or the status it failed with.
fn opened(c: &mut Client, create: Request) -> (bool, Result<FileId, u32>) {
    let (blocks, mut replies) = replied(c, vec![create]);
    let reply = replies.remove(0);
    let id = match reply.status() {
        status::SUCCESS => Ok(wire::CreateReply::parse(&reply.msg).unwrap().file_id),
        s => Err(s),
    };
    (blocks, id)
}

#[test]
fn an_open_of_what_is_there_is_handled_in_place() {
    let (mut c, dir) = posix_client();
    let fs = |p: &str| dir.path().join(p);
    let (blocks, id) = opened(&mut c, open_request("sub\\doc", OPEN));
    assert!(!blocks, "an open of a file whose path the kernel knows");
    let id = id.unwrap();
    // Its stat, asked on the open file, is in memory as well.
    let (blocks, statuses) = sent(&mut c, vec![query(id, FILE_BASIC_INFORMATION)]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    // Its streams are read from the disk, by a call.
    let reply = by_call(&mut c, query(id, FILE_STREAM_INFORMATION), looks);
    assert_eq!(reply.status(), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(std::fs::read(fs("sub/doc")).unwrap(), b"kept");
    // The share's root is always found.
    let (blocks, id) = opened(&mut c, create_request_with("", READ, SHARE_ALL, OPEN, 1));
    assert!(!blocks, "the share's root");
    assert_eq!(c.close(id.unwrap()), status::SUCCESS);
}

fn looks(op: &CallOp) -> bool {
    matches!(op, CallOp::Look(_))
}

fn changes(op: &CallOp) -> bool {
    matches!(op, CallOp::Change(_))
}

fn opens(op: &CallOp) -> bool {
    matches!(op, CallOp::Open(_))
}

fn renames(op: &CallOp) -> bool {
    matches!(op, CallOp::Rename { .. })
}

fn unlinks(op: &CallOp) -> bool {
    matches!(op, CallOp::Unlink { .. })
}

/// Sends `req` the way an engine that serves sockets on one thread
/// does: checks it leaves what it needs as one call, of the kind `is`
/// says, and nothing else, makes the call, and returns the reply.
fn by_call(c: &mut Client, req: Request, is: fn(&CallOp) -> bool) -> Reply {
    let mut replies = all_by_call(c, req, is);
    assert_eq!(replies.len(), 1);
    replies.pop().unwrap()
}

/// [`by_call`], returning every reply that follows the call: the
/// request's, then those of watchers told of its change.
fn all_by_call(c: &mut Client, req: Request, is: fn(&CallOp) -> bool) -> Vec<Reply> {
    let frame = c.frame(vec![req]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    assert!(out.frames.is_empty(), "the reply waits for the call");
    let call = out.calls.pop().expect("a call");
    assert!(out.calls.is_empty() && out.intents.is_empty());
    assert!(is(&call.op), "{:?}", call.op);
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    c.take(out)
}

/// Sends a CREATE the way an engine that serves sockets on one thread
/// does when it may not block: checks it leaves its open as a call and
/// nothing else, makes the call, and returns the reply.
fn opened_by_call(c: &mut Client, create: Request) -> Reply {
    by_call(c, create, opens)
}

#[test]
fn an_open_that_may_create_leaves_its_open_as_a_call() {
    let (mut c, dir) = posix_client();
    let reply = opened_by_call(&mut c, open_request("sub\\new", CREATE));
    assert_eq!(reply.status(), status::SUCCESS);
    let created = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(created.create_action, 2, "created");
    assert!(dir.path().join("sub/new").exists());
    // The open is registered: a second CREATE of the name collides, and
    // writing through the open works.
    let again = opened_by_call(&mut c, open_request("sub\\new", CREATE));
    assert_eq!(again.status(), status::OBJECT_NAME_COLLISION);
    let w = c.call(write_request(created.file_id, 0, b"made"));
    assert_eq!(w.status(), status::SUCCESS);
    assert_eq!(c.close(created.file_id), status::SUCCESS);
    assert_eq!(std::fs::read(dir.path().join("sub/new")).unwrap(), b"made");
    // OPEN_IF of what is there opens it, as it is.
    let reply = opened_by_call(&mut c, open_request("sub\\doc", OPEN_IF));
    let opened = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(opened.create_action, 1, "opened");
    assert_eq!(c.close(opened.file_id), status::SUCCESS);
    assert_eq!(std::fs::read(dir.path().join("sub/doc")).unwrap(), b"kept");
    // A folder that is not there fails as it would anywhere.
    let reply = opened_by_call(&mut c, open_request("gone\\new", CREATE));
    assert_eq!(reply.status(), status::OBJECT_PATH_NOT_FOUND);
    // On tmpfs, whose data is memory, an overwrite goes the same way and
    // empties the file once the open is registered.
    let reply = opened_by_call(&mut c, open_request("sub\\doc", OVERWRITE_IF));
    let overwritten = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(overwritten.create_action, 3, "overwritten");
    assert_eq!(c.close(overwritten.file_id), status::SUCCESS);
    assert_eq!(std::fs::read(dir.path().join("sub/doc")).unwrap(), b"");
}

#[test]
fn a_watcher_of_a_tree_hears_of_a_call_after_a_look_and_in_order() {
    let (mut c, _dir) = posix_client();
    let root = c.create("", true).unwrap();
    let waiting = c.send(vec![notify_request(root, FILTER, true, 4096)]);
    assert!(waiting.iter().all(|r| r.status() == status::PENDING));
    // Made by a call, even while this connection watches a tree.
    let frame = c.frame(vec![open_request("sub\\new", CREATE)]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("the open's call");
    assert!(opens(&call.op), "{:?}", call.op);
    let (token, done) = call.perform();
    let mut out = c.complete(token, done);
    // The reply goes; what the watcher may see beneath its folder is
    // looked at by a call of its own.
    let sight = out.calls.pop().expect("the look");
    assert!(matches!(sight.op, CallOp::Sight(_)), "{:?}", sight.op);
    let replies = c.take(out);
    assert_eq!(replies.len(), 1, "the open, and no word to the watcher yet");
    assert_eq!(replies[0].status(), status::SUCCESS);
    // A change in the watched folder itself needs no look, yet waits
    // behind the one before it.
    let frame = c.frame(vec![open_request("direct", CREATE)]);
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("the open's call");
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    assert_eq!(c.take(out).len(), 1, "the open alone");
    let (token, done) = sight.perform();
    let out = c.complete(token, done);
    let told = c.take(out);
    assert_eq!(
        notify_entries(&told[0]),
        vec![(action::ADDED, "sub\\new".into())]
    );
    let next = c.send(vec![notify_request(root, FILTER, true, 4096)]);
    assert_eq!(
        notify_entries(&next[0]),
        vec![(action::ADDED, "direct".into())]
    );
}

/// An open of folder `name` to watch.
fn folder(c: &mut Client, name: &str) -> FileId {
    let id = c.open(create_request_with(name, READ, SHARE_ALL, OPEN, 1));
    id.unwrap()
}

/// [`all_by_call`] of a request that succeeds and is reported to one
/// waiting watcher on its own connection: its reply, and what the
/// watcher was told.
fn told_by_call(
    c: &mut Client,
    req: Request,
    is: fn(&CallOp) -> bool,
) -> (Reply, Vec<(u32, String)>) {
    let mut replies = all_by_call(c, req, is);
    assert_eq!(replies.len(), 2, "the request, and the watcher told");
    assert_eq!(replies[0].status(), status::SUCCESS);
    let told = notify_entries(&replies[1]);
    (replies.swap_remove(0), told)
}

#[test]
fn watchers_of_a_folder_hear_of_what_calls_made() {
    let (mut c, _dir) = posix_client();
    let sub = folder(&mut c, "sub");
    let watch = |c: &mut Client| sent(c, vec![notify_request(sub, FILTER, false, 4096)]);
    let (blocks, waiting) = watch(&mut c);
    assert_eq!(waiting, vec![status::PENDING]);
    assert!(!blocks, "no engine watches the disk here");
    // Made by a call while the folder is watched, and reported: the
    // watcher sees only its own folder, which needs no look.
    let (reply, told) = told_by_call(&mut c, open_request("sub\\new", CREATE), opens);
    let new = wire::CreateReply::parse(&reply.msg).unwrap().file_id;
    assert_eq!(told, vec![(action::ADDED, "new".into())]);
    assert_eq!(watch(&mut c), (false, vec![status::PENDING]));
    let moved = rename_info("sub\\moved", false);
    let rename = set_info(new, FILE_RENAME_INFORMATION, &moved);
    let (_, told) = told_by_call(&mut c, rename, renames);
    assert_eq!(
        told,
        vec![
            (action::RENAMED_OLD_NAME, "new".into()),
            (action::RENAMED_NEW_NAME, "moved".into()),
            // As Windows reports a renamed file to a watcher of times.
            (action::MODIFIED, "moved".into()),
        ]
    );
    assert_eq!(watch(&mut c), (false, vec![status::PENDING]));
    let mark = set_info(new, FILE_DISPOSITION_INFORMATION, &[1]);
    assert_eq!(sent(&mut c, vec![mark]), (false, vec![status::SUCCESS]));
    let (_, told) = told_by_call(&mut c, close_request(new), unlinks);
    assert_eq!(told, vec![(action::REMOVED, "moved".into())]);
}

#[test]
fn a_tree_watched_on_another_connection_hears_of_calls_by_letter() {
    let (server, mut c, _dir) = posix_share();
    let mut watcher = Client::login(server, "alice", "pw");
    let root = folder(&mut watcher, "");
    let waiting = watcher.send(vec![notify_request(root, FILTER, true, 4096)]);
    assert_eq!(waiting[0].status(), status::PENDING);
    let replies = all_by_call(&mut c, open_request("sub\\new", CREATE), opens);
    assert_eq!(replies.len(), 1, "the open; its watcher is elsewhere");
    assert_eq!(replies[0].status(), status::SUCCESS);
    let letters = std::mem::take(&mut c.posted);
    assert_eq!(letters.len(), 1);
    let letter = letters.into_iter().next().unwrap().letter;
    assert!(
        !letter.may_block(),
        "the watcher's rights beneath its folder are looked up by a call"
    );
    let told = watcher.receive(letter);
    assert_eq!(
        notify_entries(&told[0]),
        vec![(action::ADDED, "sub\\new".into())]
    );
}

#[test]
fn what_a_call_changes_stays_the_servers_own_until_it_is_made() {
    use copyless_core::local::{LocalChange, What};
    let (server, mut c, _dir) = posix_share();
    let mut watcher = Client::login(server.clone(), "alice", "pw");
    let sub = folder(&mut watcher, "sub");
    let waiting = watcher.send(vec![notify_request(sub, FILTER, false, 4096)]);
    assert_eq!(waiting[0].status(), status::PENDING);
    // The engine watches the folder: the kernel reports the server's
    // changes too.
    let own = server.own_changes();
    own.set_active(true);
    let local = |path: &str| {
        server.local_changes(&[LocalChange {
            share: 0,
            path: path.into(),
            what: What::Added { is_dir: false },
        }])
    };
    let frame = c.frame(vec![open_request("sub\\new", CREATE)]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("the open, as a call");
    assert!(local("sub/new").is_empty(), "marked before the call");
    assert_eq!(local("sub/other").len(), 1, "another name is news");
    let (token, done) = call.perform();
    own.drain_begins();
    assert!(local("sub/new").is_empty(), "marked while the call is out");
    let replies = c.complete(token, done);
    assert_eq!(c.take(replies)[0].status(), status::SUCCESS);
    assert_eq!(c.posted.len(), 1, "the server reports its own change");
    // Every event the kernel queued before the call returned has been
    // read once a drain begins after it ended.
    own.drain_begins();
    assert!(local("sub/new").is_empty(), "until a drain after the call");
    own.drain_begins();
    assert_eq!(local("sub/new").len(), 1, "then a local change is news");
}

#[test]
fn an_open_that_may_truncate_or_miss_leaves_its_open_as_a_call() {
    let (mut c, dir) = posix_client();
    for (name, disposition, expected, what) in [
        (
            "sub\\missing",
            OPEN,
            status::OBJECT_NAME_NOT_FOUND,
            "a name the kernel has not seen",
        ),
        (
            "SUB\\DOC",
            OPEN,
            status::SUCCESS,
            "a name found only case-insensitively",
        ),
        (
            "sub\\doc",
            OVERWRITE,
            status::SUCCESS,
            "an overwrite of what must be there",
        ),
    ] {
        let reply = opened_by_call(&mut c, open_request(name, disposition));
        assert_eq!(reply.status(), expected, "{what}");
        if expected == status::SUCCESS {
            let id = wire::CreateReply::parse(&reply.msg).unwrap().file_id;
            assert_eq!(c.close(id), status::SUCCESS);
        }
    }
    assert_eq!(
        std::fs::read(dir.path().join("sub/doc")).unwrap(),
        b"",
        "overwritten"
    );
}

fn opens_stream(op: &CallOp) -> bool {
    matches!(op, CallOp::OpenStream(_))
}

#[test]
fn a_named_stream_is_opened_or_made_with_its_file_by_one_call() {
    let (mut c, dir) = posix_client();
    let fs = |p: &str| dir.path().join(p);
    let reply = by_call(&mut c, open_request("sub\\doc:side", OPEN), opens_stream);
    assert_eq!(reply.status(), status::OBJECT_NAME_NOT_FOUND);
    let reply = by_call(&mut c, open_request("sub\\doc:side", OPEN_IF), opens_stream);
    assert_eq!(reply.status(), status::SUCCESS);
    let made = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(made.create_action, 2, "created");
    let w = c.call(write_request(made.file_id, 0, b"aside"));
    assert_eq!(w.status(), status::SUCCESS);
    // The open is registered: share modes are the stream's own.
    let (_, other) = opened(
        &mut c,
        create_request_with("sub\\doc:side", ALL, 0, OPEN, 0),
    );
    assert_eq!(other, Err(status::SHARING_VIOLATION));
    assert_eq!(c.close(made.file_id), status::SUCCESS);
    assert_eq!(
        std::fs::read(fs("sub/doc")).unwrap(),
        b"kept",
        "the file's data"
    );
    let reply = by_call(&mut c, open_request("sub\\doc:side", OPEN), opens_stream);
    let id = wire::CreateReply::parse(&reply.msg).unwrap().file_id;
    let r = c.call(copyless_scripted::read_request(id, 0, 64, 1));
    assert_eq!(r.status(), status::SUCCESS);
    assert!(r.msg.ends_with(b"aside"), "the stream's data");
    assert_eq!(c.close(id), status::SUCCESS);
    // A stream of a file that is not there makes the file too.
    let reply = by_call(&mut c, open_request("sub\\new:side", CREATE), opens_stream);
    assert_eq!(reply.status(), status::SUCCESS);
    let id = wire::CreateReply::parse(&reply.msg).unwrap().file_id;
    assert_eq!(c.close(id), status::SUCCESS);
    assert!(fs("sub/new").is_file());
    let reply = by_call(&mut c, open_request("sub\\new:side", CREATE), opens_stream);
    assert_eq!(reply.status(), status::OBJECT_NAME_COLLISION);
    // On tmpfs, whose data is memory, one that empties what is there
    // does so as it goes on from the call.
    let reply = by_call(
        &mut c,
        open_request("sub\\doc:side", OVERWRITE_IF),
        opens_stream,
    );
    let emptied = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(emptied.create_action, 3, "overwritten");
    assert_eq!(emptied.times.end_of_file, 0);
    assert_eq!(c.close(emptied.file_id), status::SUCCESS);
}

/// Sends `req` as an engine that serves sockets on one thread does:
/// checks it leaves one call of the kind `first` says and nothing else,
/// makes it, and returns the second call of the kind `second` says that
/// the request then waits for, not yet made.
fn second_call(
    c: &mut Client,
    req: Request,
    first: fn(&CallOp) -> bool,
    second: fn(&CallOp) -> bool,
) -> copyless_core::Call {
    let frame = c.frame(vec![req]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("the first call");
    assert!(out.calls.is_empty() && out.intents.is_empty());
    assert!(first(&call.op), "{:?}", call.op);
    let (token, done) = call.perform();
    let mut out = c.complete(token, done);
    assert!(out.frames.is_empty(), "the reply waits for the second call");
    let call = out.calls.pop().expect("the second call");
    assert!(out.calls.is_empty() && out.intents.is_empty());
    assert!(second(&call.op), "{:?}", call.op);
    call
}

fn overwrites(op: &CallOp) -> bool {
    matches!(op, CallOp::Overwrite(_))
}

#[test]
fn a_stream_emptied_where_data_may_wait_is_emptied_by_a_second_call() {
    let (mut c, vfs) = client();
    let id = c.open(open_request("doc:side", OPEN_IF)).unwrap();
    let w = c.call(write_request(id, 0, b"aside"));
    assert_eq!(w.status(), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);
    let req = open_request("doc:side", OVERWRITE_IF);
    let call = second_call(&mut c, req, opens_stream, overwrites);
    // Meanwhile the open is there for others to meet.
    let (_, other) = opened(&mut c, create_request_with("doc:side", ALL, 0, OPEN, 0));
    assert_eq!(other, Err(status::SHARING_VIOLATION));
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let replies = c.take(out);
    assert_eq!(replies[0].status(), status::SUCCESS);
    let emptied = wire::CreateReply::parse(&replies[0].msg).unwrap();
    assert_eq!(emptied.create_action, 3, "FILE_OVERWRITTEN");
    assert_eq!(emptied.times.end_of_file, 0);
    let r = c.call(copyless_scripted::read_request(emptied.file_id, 0, 64, 1));
    assert_eq!(r.status(), status::END_OF_FILE);
    assert_eq!(c.close(emptied.file_id), status::SUCCESS);
    assert!(exists(&vfs, "doc"));
}

#[test]
fn an_open_goes_elsewhere_where_the_filesystem_may_wait() {
    // The in-memory share has no descriptors to hand an engine: its
    // files' stat is not taken for memory, though an open is.
    let (mut c, vfs) = client();
    let id = c.create("doc", false).unwrap();
    assert_eq!(
        c.call(write_request(id, 0, b"old")).status(),
        status::SUCCESS
    );
    assert_eq!(c.close(id), status::SUCCESS);
    let (blocks, id) = opened(&mut c, open_request("doc", OPEN));
    assert!(!blocks);
    let id = id.unwrap();
    let reply = by_call(&mut c, query(id, FILE_BASIC_INFORMATION), looks);
    assert_eq!(
        reply.status(),
        status::SUCCESS,
        "a stat through a VFS without descriptors"
    );
    assert_eq!(c.close(id), status::SUCCESS);
    // Nor is its data said to be memory: an overwrite's truncation is a
    // second call, made once the open is registered.
    let call = second_call(&mut c, open_request("doc", OVERWRITE_IF), opens, overwrites);
    assert_eq!(
        copyless_scripted::file_contents(vfs.as_ref(), "doc"),
        b"old"
    );
    // Meanwhile the open is there for others to meet.
    let (_, other) = opened(&mut c, create_request_with("doc", ALL, 0, OPEN, 0));
    assert_eq!(other, Err(status::SHARING_VIOLATION));
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let replies = c.take(out);
    assert_eq!(replies[0].status(), status::SUCCESS);
    let created = wire::CreateReply::parse(&replies[0].msg).unwrap();
    assert_eq!(created.create_action, 3, "FILE_OVERWRITTEN");
    assert!(copyless_scripted::file_contents(vfs.as_ref(), "doc").is_empty());
    assert_eq!(c.close(created.file_id), status::SUCCESS);
}

const FILE_DISPOSITION_INFORMATION: u8 = 13;
const FILE_POSITION_INFORMATION: u8 = 14;

fn set_info(id: FileId, class: u8, buffer: &[u8]) -> Request {
    Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_FILE, class, 0, id, buffer).unwrap()
    })
}

#[test]
fn marking_a_file_for_deletion_and_closing_it_are_handled_in_place() {
    let (mut c, dir) = posix_client();
    let doc = dir.path().join("sub/doc");
    let (blocks, id) = opened(&mut c, open_request("sub\\doc", OPEN));
    assert!(!blocks);
    let id = id.unwrap();
    let (blocks, statuses) = sent(
        &mut c,
        vec![set_info(id, FILE_DISPOSITION_INFORMATION, &[1])],
    );
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    let position = 8u64.to_le_bytes();
    let (blocks, statuses) = sent(
        &mut c,
        vec![set_info(id, FILE_POSITION_INFORMATION, &position)],
    );
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    assert!(doc.exists(), "deleted only at its close");
    let (blocks, statuses) = sent(&mut c, vec![close_request(id)]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    assert!(!doc.exists());
    // A folder is deleted only if it is empty, which is read on disk, by
    // a call.
    let (_, id) = opened(&mut c, create_request_with("sub", ALL, SHARE_ALL, OPEN, 1));
    let id = id.unwrap();
    std::fs::write(dir.path().join("sub/late"), b"").unwrap();
    let mark = set_info(id, FILE_DISPOSITION_INFORMATION, &[1]);
    let reply = by_call(&mut c, mark, changes);
    assert_eq!(reply.status(), status::DIRECTORY_NOT_EMPTY);
    std::fs::remove_file(dir.path().join("sub/late")).unwrap();
    let mark = set_info(id, FILE_DISPOSITION_INFORMATION, &[1]);
    assert_eq!(by_call(&mut c, mark, changes).status(), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);
    assert!(!dir.path().join("sub").exists());
}

const FILE_RENAME_INFORMATION: u8 = 10;

#[test]
fn a_rename_leaves_as_a_call_unless_what_it_replaces_is_looked_up_on_disk() {
    let (mut c, dir) = posix_client();
    let (_, id) = opened(&mut c, open_request("sub\\doc", OPEN));
    let id = id.unwrap();
    let rename = set_info(
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("sub\\moved", false),
    );
    let frame = c.frame(vec![rename]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    assert!(out.frames.is_empty(), "the reply waits for the rename");
    let call = out.calls.pop().expect("a call");
    match &call.op {
        CallOp::Rename {
            from, to, replace, ..
        } => {
            assert_eq!(
                (from.as_str(), to.as_str(), *replace),
                ("sub/doc", "sub/moved", false)
            );
        }
        op => panic!("{op:?}"),
    }
    assert!(dir.path().join("sub/doc").exists(), "not before the call");
    let (token, done) = call.perform();
    let replies = c.complete(token, done);
    let replies = c.take(replies);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert!(dir.path().join("sub/moved").exists());
    // The table follows: the open's file is found under its new name, and
    // a rename onto a name that is there collides.
    let (_, other) = opened(&mut c, open_request("sub\\other", CREATE));
    assert_eq!(c.close(other.unwrap()), status::SUCCESS);
    let back = set_info(
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("sub\\other", false),
    );
    let (blocks, statuses) = sent(&mut c, vec![back]);
    assert_eq!(
        (blocks, statuses),
        (false, vec![status::OBJECT_NAME_COLLISION])
    );
    // One that may replace looks the target up first: where the
    // kernel's cache does not find it (here: named in another case than
    // on disk), elsewhere.
    std::fs::write(dir.path().join("sub/outside"), b"theirs").unwrap();
    let over = set_info(
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("sub\\OUTSIDE", true),
    );
    let (blocks, statuses) = sent(&mut c, vec![over]);
    assert_eq!((blocks, statuses), (true, vec![status::SUCCESS]));
    assert!(!dir.path().join("sub/moved").exists());
    let outside: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().eq_ignore_ascii_case("outside"))
        .collect();
    assert_eq!(outside.len(), 1, "replaced: {outside:?}");
    assert_eq!(std::fs::read(&outside[0]).unwrap(), b"kept");
    // Where it does (a file the server made), the rename is the call.
    let over = set_info(
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("sub\\other", true),
    );
    assert_eq!(by_call(&mut c, over, renames).status(), status::SUCCESS);
    assert!(!dir.path().join("sub/outside").exists() && !dir.path().join("sub/OUTSIDE").exists());
    let other = std::fs::read(dir.path().join("sub/other")).unwrap();
    assert_eq!(other, b"kept");
    // A file open elsewhere is not replaced, as on Windows.
    let (_, busy) = opened(&mut c, open_request("sub\\busy", CREATE));
    let busy = busy.unwrap();
    let over = set_info(id, FILE_RENAME_INFORMATION, &rename_info("sub\\busy", true));
    let (blocks, statuses) = sent(&mut c, vec![over]);
    assert_eq!((blocks, statuses), (false, vec![status::ACCESS_DENIED]));
    assert_eq!(c.close(busy), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);
}

#[test]
fn a_compound_that_opens_renames_and_closes_is_handled_in_place() {
    let (mut c, dir) = posix_client();
    let rename = |to: &str, replace| {
        related(set_info(
            CHAINED,
            FILE_RENAME_INFORMATION,
            &rename_info(to, replace),
        ))
    };
    // Finder's rename: CREATE, SET_INFO, CLOSE in one frame.
    let chain = |open: Request, to: &str, replace| vec![open, rename(to, replace), related_close()];
    let (blocks, statuses) = sent(
        &mut c,
        chain(open_request("sub\\doc", OPEN), "sub\\moved", false),
    );
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS; 3]));
    assert!(dir.path().join("sub/moved").exists());
    assert!(!dir.path().join("sub/doc").exists());
    // One that may replace what the kernel's cache does not find (named
    // in another case than on disk) goes elsewhere, as a plain one does.
    std::fs::write(dir.path().join("sub/outside"), b"theirs").unwrap();
    let over = chain(open_request("sub\\moved", OPEN), "sub\\OUTSIDE", true);
    let (blocks, statuses) = sent(&mut c, over);
    assert_eq!((blocks, statuses), (true, vec![status::SUCCESS; 3]));
    // A stream's rename is not a call.
    let stream = create_request_with("sub\\outside:s", ALL, SHARE_ALL, OPEN_IF, 0);
    let (blocks, _) = sent(&mut c, chain(stream, "sub\\other", false));
    assert!(blocks, "a stream renamed");
}

#[test]
fn locks_are_taken_and_given_back_in_place() {
    use copyless_proto::messages::{
        LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_UNLOCK,
    };
    let (mut c, _) = client();
    let a = c.create("doc", false).unwrap();
    let b = c.create("doc", false).unwrap();
    let exclusive = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;
    let (blocks, statuses) = sent(&mut c, vec![lock_request(a, 0, &[(0, 10, exclusive)])]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    let (blocks, statuses) = sent(&mut c, vec![lock_request(b, 0, &[(5, 1, exclusive)])]);
    assert_eq!((blocks, statuses), (false, vec![status::LOCK_NOT_GRANTED]));
    // A lock that may wait waits in memory, and the unlock that frees
    // its range lets it through.
    let waits = lock_request(b, 0, &[(5, 1, LOCKFLAG_EXCLUSIVE)]);
    let (blocks, statuses) = sent(&mut c, vec![waits]);
    assert_eq!((blocks, statuses), (false, vec![status::PENDING]));
    let (blocks, statuses) = sent(
        &mut c,
        vec![lock_request(a, 0, &[(0, 10, LOCKFLAG_UNLOCK)])],
    );
    assert!(!blocks);
    assert_eq!(
        statuses,
        vec![status::SUCCESS, status::SUCCESS],
        "the unlock, and the lock it let through"
    );
}

/// An engine's watcher of local changes, which counts the times it is
/// told the watched folders changed.
#[derive(Default)]
struct Watcher(std::sync::atomic::AtomicUsize);

impl copyless_core::local::LocalWatch for Watcher {
    fn watched_changed(&self, _: &Server) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn share_changed(&self, _: usize, _: Option<&str>) {}
}

/// A client of a server whose engine watches for local changes.
fn watched_client() -> (Client, Arc<Watcher>) {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let watcher = Arc::new(Watcher::default());
    server.set_local_watch(watcher.clone());
    (Client::login(server, "alice", "pw"), watcher)
}

#[test]
fn a_watch_is_set_up_by_a_call_and_asked_again_in_place() {
    let (mut c, watcher) = watched_client();
    let dir = c.create("", true).unwrap();
    let told = || watcher.0.load(std::sync::atomic::Ordering::SeqCst);
    // The engine watches the folder on disk before the client hears the
    // request is pending.
    let frame = c.frame(vec![notify_request(dir, FILTER, true, 4096)]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    assert!(
        out.frames.is_empty(),
        "the interim reply waits for the call"
    );
    let call = out.calls.pop().expect("a call");
    assert!(matches!(call.op, CallOp::Watch(_)), "{:?}", call.op);
    assert_eq!(told(), 0);
    let (token, done) = call.perform();
    assert_eq!(told(), 1);
    let out = c.complete(token, done);
    assert!(out.calls.is_empty());
    let statuses: Vec<u32> = c.take(out).iter().map(|r| r.status()).collect();
    assert_eq!(statuses, vec![status::PENDING]);
    // The new file is news to the waiting request; the next one asks
    // the watch already there.
    let (_, made) = replied(&mut c, vec![create_request("doc", false)]);
    assert_eq!(made.len(), 2, "the open, and the watcher told");
    assert!(made.iter().all(|r| r.status() == status::SUCCESS));
    let (blocks, statuses) = sent(&mut c, vec![notify_request(dir, FILTER, true, 4096)]);
    assert_eq!((blocks, statuses), (false, vec![status::PENDING]));
    assert_eq!(told(), 1, "the folder was watched already");
    let (blocks, statuses) = sent(&mut c, vec![close_request(dir)]);
    assert!(!blocks, "the watch ends, and the engine is told");
    assert_eq!(statuses, vec![status::SUCCESS, status::NOTIFY_CLEANUP]);
    assert_eq!(told(), 2);
}

#[test]
fn a_change_notify_cancelled_while_its_watch_is_set_up_ends_cancelled() {
    let (mut c, _) = watched_client();
    let dir = c.create("", true).unwrap();
    let frame = c.frame(vec![notify_request(dir, FILTER, true, 4096)]);
    let mid = u64::from_le_bytes(frame[24..32].try_into().unwrap());
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("the watch's call");
    // Before any interim reply, a CANCEL names it by its MessageId.
    let cancel = Request::new(command::CANCEL, 0, |w| {
        w.u16(4).u16(0);
    });
    assert!(c.send_with_mids(vec![cancel], &[mid]).is_empty());
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let statuses: Vec<u32> = c.take(out).iter().map(|r| r.status()).collect();
    assert_eq!(statuses, vec![status::CANCELLED]);
    // The watch stays: the next request waits on it, in place.
    let (blocks, statuses) = sent(&mut c, vec![notify_request(dir, FILTER, true, 4096)]);
    assert_eq!((blocks, statuses), (false, vec![status::PENDING]));
}

fn names(r: &Reply) -> Vec<String> {
    assert_eq!(r.status(), status::SUCCESS);
    names_in(wire::buffer_response_data(&r.msg).unwrap())
}

#[test]
fn a_close_behind_a_listing_of_its_open_waits_for_it() {
    let (mut c, dir) = posix_client();
    for i in 0..6 {
        std::fs::write(dir.path().join(format!("sub/f{i}")), b"x").unwrap();
    }
    let id = c.create("sub", true).unwrap();
    let frame = c.frame(vec![names_request(id, 0, "*", 65536)]);
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("a call");
    // The close comes right behind, while the listing is out (as
    // smbtorture's compound_find_close sends it): held, the open kept.
    let frame = c.frame(vec![close_request(id)]);
    let out = c.handle_raw(&frame);
    assert!(out.calls.is_empty());
    let held = c.take(out);
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].status(), status::PENDING, "an interim response");
    // The listing answers in full, then the close.
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let replies = c.take(out);
    assert_eq!(replies.len(), 2);
    let listed = names(&replies[0]);
    assert!(
        (0..6).all(|i| listed.contains(&format!("f{i}"))),
        "{listed:?}"
    );
    assert_eq!(replies[1].status(), status::SUCCESS);
    assert_eq!(c.close(id), status::FILE_CLOSED);
}

#[test]
fn a_listing_leaves_as_one_call_and_other_queries_of_its_open_wait_in_turn() {
    let (mut c, dir) = posix_client();
    for i in 0..6 {
        std::fs::write(dir.path().join(format!("sub/f{i}")), b"x").unwrap();
    }
    let id = c.create("sub", true).unwrap();
    // Room for about two names a query.
    let first = names_request(id, 0, "*", 40);
    let frame = c.frame(vec![first]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    assert!(out.frames.is_empty(), "the reply waits for the call");
    let call = out.calls.pop().expect("a call");
    assert!(matches!(call.op, CallOp::List(_)), "{:?}", call.op);
    // The open's next two queries come while the first one's call is
    // out; they wait for it, and then one for the other.
    for _ in 0..2 {
        let frame = c.frame(vec![names_request(id, 0, "*", 40)]);
        assert!(!c.conn.may_block(&frame));
        let out = c.handle_raw(&frame);
        assert!(out.calls.is_empty(), "it waits for the first");
        let held = c.take(out);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].status(), status::PENDING, "an interim response");
    }
    let mut listed = Vec::new();
    let mut call = call;
    for _ in 0..2 {
        let (token, done) = call.perform();
        let mut out = c.complete(token, done);
        // A reply, then the next query's own call, and only its.
        call = out.calls.pop().expect("the next query's call");
        let replies = c.take(out);
        assert_eq!(replies.len(), 1);
        listed.extend(names(&replies[0]));
    }
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let replies = c.take(out);
    listed.extend(names(&replies[0]));
    // Then the rest, one query after another.
    loop {
        let r = c.call(names_request(id, 0, "*", 40));
        if r.status() == status::NO_MORE_FILES {
            break;
        }
        listed.extend(names(&r));
    }
    let mut expected: Vec<String> = [".", ".."].map(String::from).to_vec();
    expected.extend(["doc", "f0", "f1", "f2", "f3", "f4", "f5"].map(String::from));
    assert_eq!(listed, expected, "each name once, in order");
    assert_eq!(c.close(id), status::SUCCESS);
}

#[test]
fn a_close_behind_queries_of_its_open_waits_for_them_all() {
    let (mut c, _dir) = posix_client();
    let id = c.create("sub", true).unwrap();
    let frame = c.frame(vec![names_request(id, 0, "*", 4096)]);
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("a call");
    for _ in 0..2 {
        let held = c.send(vec![names_request(id, 0, "*", 4096)]);
        assert_eq!(held[0].status(), status::PENDING);
    }
    let held = c.send(vec![close_request(id)]);
    assert_eq!(held[0].status(), status::PENDING);
    // Each in the order it came: the listing, the two queries behind it
    // (nothing more to list), then the close.
    let mut statuses = Vec::new();
    let mut calls = vec![call];
    while let Some(call) = calls.pop() {
        let (token, done) = call.perform();
        let mut out = c.complete(token, done);
        calls.append(&mut out.calls);
        statuses.extend(c.take(out).iter().map(|r| r.status()));
    }
    assert_eq!(
        statuses,
        [
            status::SUCCESS,
            status::NO_MORE_FILES,
            status::NO_MORE_FILES,
            status::SUCCESS
        ]
    );
    assert_eq!(c.close(id), status::FILE_CLOSED);
    // The folder lists anew on a new open.
    let id = c.create("sub", true).unwrap();
    let r = c.call(names_request(id, 0, "*", 4096));
    assert_eq!(names(&r), [".", "..", "doc"]);
}

const FILE_END_OF_FILE_INFORMATION: u8 = 20;

#[test]
fn a_new_size_or_new_times_leave_as_a_call_made_before_the_reply() {
    let (mut c, dir) = posix_client();
    let doc = dir.path().join("sub/doc");
    let (_, id) = opened(&mut c, open_request("sub\\doc", OPEN));
    let id = id.unwrap();
    let frame = c.frame(vec![set_info(
        id,
        FILE_END_OF_FILE_INFORMATION,
        &2u64.to_le_bytes(),
    )]);
    assert!(!c.conn.may_block(&frame));
    let mut out = c.handle_raw(&frame);
    let call = out.calls.pop().expect("a call");
    assert!(changes(&call.op));
    assert_eq!(std::fs::read(&doc).unwrap(), b"kept", "not before the call");
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    assert_eq!(c.take(out)[0].status(), status::SUCCESS);
    assert_eq!(std::fs::read(&doc).unwrap(), b"ke");
    // FileBasicInformation: a last-write time of 2001-01-01 (FILETIME).
    let when: u64 = 126_227_808_000_000_000;
    let mut basic = [0u8; 40];
    basic[16..24].copy_from_slice(&when.to_le_bytes());
    let reply = by_call(
        &mut c,
        set_info(id, FILE_BASIC_INFORMATION, &basic),
        changes,
    );
    assert_eq!(reply.status(), status::SUCCESS);
    let modified = std::fs::metadata(&doc).unwrap().modified().unwrap();
    let secs = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(secs, 978_307_200, "2001-01-01 00:00:00 UTC");
    // With a watcher of a tree to tell, the same: what it may see is
    // looked at by a call of its own.
    let root = c.create("", true).unwrap();
    let waiting = c.send(vec![notify_request(root, FILTER, true, 4096)]);
    assert_eq!(waiting[0].status(), status::PENDING);
    let (blocks, _) = sent(
        &mut c,
        vec![set_info(
            id,
            FILE_END_OF_FILE_INFORMATION,
            &1u64.to_le_bytes(),
        )],
    );
    assert!(!blocks);
    assert_eq!(std::fs::read(&doc).unwrap(), b"k");
}

/// An FSCTL `code` on open `id` with no input.
fn fsctl(code: u32, id: FileId) -> Request {
    Request::new(command::IOCTL, 1, |w| {
        w.u16(57).u16(0).u32(code);
        w.u64(id.persistent).u64(id.volatile);
        // Input offset and count, max input response, output offset and
        // count, max output response, flags (FSCTL), reserved.
        w.u32(0).u32(0).u32(0).u32(0).u32(0).u32(4096).u32(1).u32(0);
    })
}

#[test]
fn fsctls_the_server_answers_from_memory_are_handled_in_place() {
    const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
    const FSCTL_DFS_GET_REFERRALS: u32 = 0x0006_0194;
    const FSCTL_SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
    const FSCTL_CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
    let (mut c, _) = client();
    let id = c.create("doc", false).unwrap();
    let none = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };
    let (blocks, statuses) = sent(
        &mut c,
        vec![fsctl(FSCTL_QUERY_NETWORK_INTERFACE_INFO, none)],
    );
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    let (blocks, statuses) = sent(&mut c, vec![fsctl(FSCTL_DFS_GET_REFERRALS, none)]);
    assert_eq!((blocks, statuses), (false, vec![status::NOT_FOUND]));
    let (blocks, statuses) = sent(&mut c, vec![fsctl(FSCTL_SRV_ENUMERATE_SNAPSHOTS, id)]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    // An object id is made of the file's identity: the same each time.
    let (blocks, first) = replied(&mut c, vec![fsctl(FSCTL_CREATE_OR_GET_OBJECT_ID, id)]);
    assert_eq!((blocks, first[0].status()), (false, status::SUCCESS));
    let (_, again) = replied(&mut c, vec![fsctl(FSCTL_CREATE_OR_GET_OBJECT_ID, id)]);
    assert_eq!(first[0].msg[64..], again[0].msg[64..]);
}

#[test]
fn a_sealed_frame_is_judged_by_what_it_holds() {
    use copyless_scripted::{read_request, Dialect};
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let mut c = Client::login_with(server, Dialect::Smb311, "alice", "pw");
    let id = c.create("doc", false).unwrap();
    let sealed = |c: &mut Client, reqs| {
        let frame = c.frame(reqs);
        c.seal(&frame).unwrap()
    };
    // Judged once opened where it lies, and handled from there.
    let judged = |c: &mut Client, mut frame: Vec<u8>| {
        let how = c.conn.unseal(&mut frame);
        let blocks = c.conn.unsealed_may_block(&frame, how);
        let out = c.conn.handle_unsealed(&mut frame, how, &mut c.env);
        let out = c.conn.perform_intents(out, &frame, &mut c.env);
        (blocks, out)
    };
    let big = sealed(&mut c, vec![write_request(id, 0, &[7; 20_000])]);
    let (blocks, out) = judged(&mut c, big);
    assert!(!blocks, "a large WRITE leaves as an intent");
    assert_eq!(c.take(out)[0].status(), status::SUCCESS);
    let read = sealed(&mut c, vec![read_request(id, 0, 5, 1)]);
    assert!(
        c.conn.may_block(&read),
        "a sealed frame not yet opened may block"
    );
    let (blocks, out) = judged(&mut c, read.clone());
    assert!(!blocks, "a READ leaves as an intent");
    let replies = c.take(out);
    assert_eq!(wire::read_response_data(&replies[0].msg).unwrap(), [7; 5]);
    let disconnect = Request::new(command::TREE_DISCONNECT, 1, |w| {
        w.u16(4).u16(0);
    });
    let mut disconnect = sealed(&mut c, vec![disconnect]);
    let how = c.conn.unseal(&mut disconnect);
    assert!(
        c.conn.unsealed_may_block(&disconnect, how),
        "a TREE_DISCONNECT closes what is open, which may remove files"
    );
    let mut forged = read;
    *forged.last_mut().unwrap() ^= 1;
    let (blocks, out) = judged(&mut c, forged);
    assert!(!blocks, "one that does not open is refused from memory");
    assert!(out.disconnect, "and ends the connection");
}

fn judged(op: &CallOp) -> bool {
    matches!(op, CallOp::OpenJudged(_))
}

use copyless_fscc::access::FILE_GENERIC_READ;
use copyless_fscc::descriptor::{INHERIT_ONLY_ACE, OBJECT_INHERIT_ACE};

/// Stores on the open `id` a DACL that allows everyone each (mask, ACE
/// flags) of `aces`.
fn store_dacl(c: &mut Client, id: FileId, aces: &[(u32, u8)]) {
    use copyless_fscc::descriptor::{
        sids, Ace, Descriptor, ACCESS_ALLOWED_ACE_TYPE, ALL_PARTS, SE_DACL_PRESENT,
    };
    let aces = aces
        .iter()
        .map(|&(mask, flags)| Ace::new(ACCESS_ALLOWED_ACE_TYPE, flags, mask, sids::EVERYONE));
    let sd = Descriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(aces.collect()),
        ..Descriptor::default()
    };
    let raw = sd.encode(ALL_PARTS);
    let r = c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, 3, 0, 0x4, id, &raw).unwrap()
    }));
    assert_eq!(r.status(), status::SUCCESS, "SET_INFO security");
}

const FILE_ADD_FILE: u32 = 0x2;
const WRITE_DAC: u32 = 0x0004_0000;

/// Opens `name` with `access` and the right to store a DACL on it.
fn open_to_protect(c: &mut Client, name: &str, access: u32) -> FileId {
    c.open(create_request_with(
        name,
        access | WRITE_DAC,
        SHARE_ALL,
        OPEN,
        0,
    ))
    .unwrap()
}

#[test]
fn an_open_of_what_is_there_is_judged_by_its_call_where_descriptors_are_stored() {
    let (mut c, dir) = posix_client();
    let id = open_to_protect(&mut c, "sub\\doc", ALL);
    store_dacl(&mut c, id, &[(FILE_GENERIC_READ, 0)]);
    assert_eq!(c.close(id), status::SUCCESS);
    // Reading is what the descriptor grants.
    let reply = by_call(
        &mut c,
        create_request_with("sub\\doc", READ, SHARE_ALL, OPEN, 0),
        judged,
    );
    assert_eq!(reply.status(), status::SUCCESS);
    let opened = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(c.close(opened.file_id), status::SUCCESS);
    // Writing is not, though the mode bits would let alice write: the
    // call read the descriptor, and the open is refused.
    let reply = by_call(&mut c, open_request("sub\\doc", OPEN), judged);
    assert_eq!(reply.status(), status::ACCESS_DENIED);
    let reply = by_call(&mut c, open_request("sub\\doc", OVERWRITE_IF), judged);
    assert_eq!(reply.status(), status::ACCESS_DENIED);
    assert_eq!(std::fs::read(dir.path().join("sub/doc")).unwrap(), b"kept");
    // What is not there is reported as such.
    let reply = by_call(&mut c, open_request("sub\\none", OPEN), judged);
    assert_eq!(reply.status(), status::OBJECT_NAME_NOT_FOUND);
}

/// Sends a CREATE that finds nothing by its first call and makes its
/// object by a second, checked as [`by_call`] checks one: the reply.
fn made_by_calls(c: &mut Client, create: Request) -> Reply {
    let inherits = |op: &CallOp| matches!(op, CallOp::Inherit(_));
    let call = second_call(c, create, judged, inherits);
    let (token, done) = call.perform();
    let out = c.complete(token, done);
    let mut replies = c.take(out);
    assert_eq!(replies.len(), 1);
    replies.pop().unwrap()
}

#[test]
fn a_name_made_where_descriptors_are_stored_inherits_by_a_call() {
    let (mut c, dir) = posix_client();
    let sub = open_to_protect(&mut c, "sub", READ);
    store_dacl(&mut c, sub, &[(FILE_GENERIC_READ, OBJECT_INHERIT_ACE)]);
    // The folder's descriptor lets no one add files: refused.
    let reply = made_by_calls(&mut c, open_request("sub\\new", CREATE));
    assert_eq!(reply.status(), status::ACCESS_DENIED);
    assert!(!dir.path().join("sub/new").exists());
    // Once it does, the new file is made, and what it inherited (reading
    // only) is stored on it: its next open for writing is refused.
    let aces = [
        (FILE_GENERIC_READ | FILE_ADD_FILE, 0),
        (FILE_GENERIC_READ, OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE),
    ];
    store_dacl(&mut c, sub, &aces);
    let reply = made_by_calls(&mut c, open_request("sub\\new", OPEN_IF));
    assert_eq!(reply.status(), status::SUCCESS);
    let made = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(made.create_action, 2, "created");
    assert_eq!(c.close(made.file_id), status::SUCCESS);
    assert!(dir.path().join("sub/new").exists());
    let reply = by_call(&mut c, open_request("sub\\new", OPEN), judged);
    assert_eq!(reply.status(), status::ACCESS_DENIED);
    assert_eq!(c.close(sub), status::SUCCESS);
}

/// A CREATE of `name` asking for `allocation` bytes to be kept for it
/// (the AlSi context Windows' copy engine sends).
fn allocating(name: &str, disposition: u32, allocation: u64) -> Request {
    use copyless_proto::create_context as cc;
    let contexts = cc::build_chain(&[(cc::ALSI, allocation.to_le_bytes().to_vec())]);
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: 0,
        desired_access: ALL,
        file_attributes: 0,
        share_access: SHARE_ALL,
        disposition,
        options: NON_DIRECTORY,
        name,
        contexts: &contexts,
    })
}

#[test]
fn an_open_with_an_allocation_makes_it_in_its_call() {
    use std::os::unix::fs::MetadataExt;
    let (mut c, dir) = posix_client();
    let blocks_of = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().blocks() * 512;
    let reply = opened_by_call(&mut c, allocating("sub\\copy", CREATE, 1 << 20));
    assert_eq!(reply.status(), status::SUCCESS);
    let made = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(made.create_action, 2, "created");
    assert!(made.times.allocation_size >= 1 << 20, "{:?}", made.times);
    assert_eq!(made.times.end_of_file, 0);
    assert!(blocks_of("sub/copy") >= 1 << 20);
    assert_eq!(c.close(made.file_id), status::SUCCESS);
    // What is emptied is given it too; what is only opened is not.
    let reply = opened_by_call(&mut c, allocating("sub\\doc", OVERWRITE_IF, 2 << 20));
    let emptied = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(emptied.create_action, 3, "overwritten");
    assert!(
        emptied.times.allocation_size >= 2 << 20,
        "{:?}",
        emptied.times
    );
    assert_eq!(c.close(emptied.file_id), status::SUCCESS);
    let before = blocks_of("sub/copy");
    let reply = opened_by_call(&mut c, allocating("sub\\copy", OPEN_IF, 8 << 20));
    let opened = wire::CreateReply::parse(&reply.msg).unwrap();
    assert_eq!(opened.create_action, 1, "opened");
    assert_eq!(c.close(opened.file_id), status::SUCCESS);
    assert_eq!(blocks_of("sub/copy"), before);
}

fn renames_judged(op: &CallOp) -> bool {
    matches!(op, CallOp::RenameJudged(_))
}

#[test]
fn a_rename_where_descriptors_are_stored_is_judged_by_its_call() {
    let (mut c, dir) = posix_client();
    let sub = open_to_protect(&mut c, "sub", READ);
    // The folder lets everyone read and delete what is in it, not add.
    const DELETE_CHILD: u32 = 0x40;
    store_dacl(&mut c, sub, &[(FILE_GENERIC_READ | DELETE_CHILD, 0)]);
    let (_, id) = opened(&mut c, open_request("doc", CREATE));
    let id = id.unwrap();
    let into_sub = set_info(
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("sub\\doc2", false),
    );
    let reply = by_call(&mut c, into_sub, renames_judged);
    assert_eq!(
        reply.status(),
        status::ACCESS_DENIED,
        "the folder adds nothing"
    );
    assert!(dir.path().join("doc").exists() && !dir.path().join("sub/doc2").exists());
    // Where the share's root lets alice add files, it is moved, and the
    // table follows.
    let (_, doc) = opened(&mut c, open_request("sub\\doc", OPEN));
    let doc = doc.unwrap();
    let out = set_info(doc, FILE_RENAME_INFORMATION, &rename_info("moved", false));
    let reply = by_call(&mut c, out, renames_judged);
    assert_eq!(reply.status(), status::SUCCESS);
    assert!(dir.path().join("moved").exists() && !dir.path().join("sub/doc").exists());
    let (_, again) = opened(&mut c, create_request_with("moved", ALL, 0, OPEN, 0));
    assert_eq!(
        again,
        Err(status::SHARING_VIOLATION),
        "the open is there by its new name"
    );
    assert_eq!(c.close(doc), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(c.close(sub), status::SUCCESS);
}

#[test]
fn the_smb1_negotiate_that_begins_a_connection_is_handled_in_place() {
    let (server, _vfs) = memory_server(config(), Arc::new(Users::default()));
    let mut c = Client::connect(server);
    // SMB1's NEGOTIATE offering SMB 2.???, as Windows and smbclient begin.
    let mut frame = b"\xffSMB\x72".to_vec();
    frame.resize(32, 0);
    frame.push(0);
    let dialects = b"\x02NT LM 0.12\0\x02SMB 2.002\0\x02SMB 2.???\0";
    frame.extend_from_slice(&(dialects.len() as u16).to_le_bytes());
    frame.extend_from_slice(dialects);
    assert!(!c.conn.may_block(&frame));
    let out = c.handle_raw(&frame);
    let reply = &out.frames[0];
    assert_eq!(&reply[..4], b"\xfeSMB", "answered in SMB2");
    let dialect = u16::from_le_bytes([reply[64 + 4], reply[64 + 5]]);
    assert_eq!(dialect, 0x02ff, "the wildcard dialect");
}

#[test]
fn ending_a_tree_or_session_with_nothing_open_is_handled_in_place() {
    let empty = |cmd| {
        Request::new(cmd, 1, |w| {
            w.u16(4).u16(0);
        })
    };
    // With a file open that goes at its close, it may remove the file.
    let (mut c, vfs) = client();
    c.call(doomed("gone"));
    let (blocks, statuses) = sent(&mut c, vec![empty(command::TREE_DISCONNECT)]);
    assert_eq!((blocks, statuses), (true, vec![status::SUCCESS]));
    assert!(!exists(&vfs, "gone"));
    let (mut c, vfs) = client();
    let id = c.create("kept", false).unwrap();
    let frame = c.frame(vec![empty(command::LOGOFF)]);
    assert!(c.conn.may_block(&frame), "the session holds an open");
    c.close(id);
    // Nothing open: the server's tables alone change.
    let (blocks, statuses) = sent(&mut c, vec![empty(command::TREE_DISCONNECT)]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    let (blocks, statuses) = sent(&mut c, vec![empty(command::LOGOFF)]);
    assert_eq!((blocks, statuses), (false, vec![status::SUCCESS]));
    assert!(exists(&vfs, "kept"));
    let (blocks, statuses) = sent(&mut c, vec![empty(command::LOGOFF)]);
    assert_eq!(
        (blocks, statuses),
        (false, vec![status::USER_SESSION_DELETED])
    );
}

#[test]
fn a_descriptor_is_stored_by_a_call() {
    use copyless_fscc::descriptor::SE_DACL_PRESENT;
    use copyless_fscc::descriptor::{sids, Ace, Descriptor, ACCESS_ALLOWED_ACE_TYPE, ALL_PARTS};
    let (mut c, dir) = posix_client();
    std::fs::write(dir.path().join("doc"), b"kept").unwrap();
    let ace = Ace::new(
        ACCESS_ALLOWED_ACE_TYPE,
        0,
        FILE_GENERIC_READ,
        sids::EVERYONE,
    );
    let sd = Descriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(vec![ace]),
        ..Descriptor::default()
    };
    let raw = sd.encode(ALL_PARTS);
    let set = |id| {
        Request::new(command::SET_INFO, 1, |w| {
            wire::write_set_info_request(w, 3, 0, 0x4, id, &raw).unwrap()
        })
    };
    // Without WRITE_DAC: refused from memory, nothing stored.
    let plain = c.open(create_request_with("doc", READ, SHARE_ALL, OPEN, 0));
    let (blocks, statuses) = sent(&mut c, vec![set(plain.unwrap())]);
    assert_eq!((blocks, statuses), (false, vec![status::ACCESS_DENIED]));
    let id = open_to_protect(&mut c, "doc", READ);
    let reply = by_call(&mut c, set(id), |op| matches!(op, CallOp::SetSecurity(_)));
    assert_eq!(reply.status(), status::SUCCESS);
    // What is stored is read back: the DACL set, nothing else changed.
    let query = Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, 3, 0, 4096, 0x4, 0, id)
    });
    let back = c.call(query);
    assert_eq!(back.status(), status::SUCCESS);
    let stored = Descriptor::parse(wire::buffer_response_data(&back.msg).unwrap()).unwrap();
    assert_eq!(stored.dacl, sd.dacl);
    assert_eq!(std::fs::read(dir.path().join("doc")).unwrap(), b"kept");
}
