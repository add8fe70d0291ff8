//! Leases between two clients (two ClientGuids, each on its own
//! connection): granted, broken by the other's open and by writes,
//! acknowledged, and held opens run again.

use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::command;
use copyless_proto::create_context::{self as cc, RQLS};
use copyless_proto::lease::{
    LeaseContext, FLAG_PARENT_LEASE_KEY_SET, HANDLE_CACHING, READ_CACHING, WRITE_CACHING,
};
use copyless_proto::messages::{FileId, OPLOCK_LEVEL_LEASE};
use copyless_proto::status;
use copyless_scripted::{config, memory_server, put_file, Client, Dialect, Reply, Request, Users};
use std::sync::Arc;

const R: u32 = READ_CACHING;
const H: u32 = HANDLE_CACHING;
const W: u32 = WRITE_CACHING;

fn create(name: &str, key: [u8; 16], state: u32) -> Request {
    lease_create(name, key, state, None, false)
}

/// A CREATE of `name` (a directory when `dir`) asking for a v2 lease,
/// naming `parent` as its parent's lease when given.
fn lease_create(
    name: &str,
    key: [u8; 16],
    state: u32,
    parent: Option<[u8; 16]>,
    dir: bool,
) -> Request {
    let lease = LeaseContext {
        key,
        state,
        flags: if parent.is_some() {
            FLAG_PARENT_LEASE_KEY_SET
        } else {
            0
        },
        v2: Some((parent.unwrap_or([0; 16]), 0)),
    }
    .encode();
    let contexts = cc::build_chain(&[(RQLS, lease)]);
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: OPLOCK_LEVEL_LEASE,
        desired_access: 0x0012_019f,
        file_attributes: 0,
        share_access: 7,
        disposition: 3,
        options: if dir { 1 } else { 0x40 },
        name,
        contexts: &contexts,
    })
}

/// The file id, and the lease state and epoch the CREATE reply grants.
fn granted(r: &Reply) -> (FileId, u32, u16) {
    assert_eq!(r.status(), status::SUCCESS);
    let c = CreateReply::parse(&r.msg).unwrap();
    assert_eq!(c.oplock_level, OPLOCK_LEVEL_LEASE);
    let ctx = cc::parse_chain(c.contexts).unwrap();
    let lease = ctx
        .iter()
        .find(|c| c.name == RQLS)
        .expect("a lease context");
    let l = LeaseContext::parse(lease.data).unwrap();
    (c.file_id, l.state, l.v2.unwrap().1)
}

/// A lease break notification: key, flags, current and new state.
fn lease_break(r: &Reply) -> ([u8; 16], u32, u32, u32) {
    assert_eq!(r.header.command, command::OPLOCK_BREAK);
    assert_eq!(r.header.message_id, u64::MAX);
    assert_eq!(
        r.header.session_id, 0,
        "a lease is the client's, not a session's"
    );
    let b = &r.msg[64..];
    assert_eq!(u16::from_le_bytes([b[0], b[1]]), 44);
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    (
        b[8..24].try_into().unwrap(),
        u32_at(4),
        u32_at(24),
        u32_at(28),
    )
}

fn ack(key: [u8; 16], state: u32) -> Request {
    Request::new(command::OPLOCK_BREAK, 1, |w| {
        w.u16(36).u16(0).u32(0).bytes(&key).u32(state).u64(0);
    })
}

fn setup() -> (Client, Client) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "doc", &[1; 10]);
    (
        Client::login_with(server.clone(), Dialect::Smb311, "u", "pw"),
        Client::login_with(server, Dialect::Smb311, "u", "pw"),
    )
}

#[test]
fn another_clients_open_waits_for_write_caching_to_be_given_up() {
    let (mut a, mut b) = setup();
    assert_ne!(a.conn.id(), b.conn.id());
    let (fa, state, epoch) = granted(&a.call(create("doc", [1; 16], R | H | W)));
    assert_eq!((state, epoch), (R | H | W, 1), "the only user caches all");
    let interim = b.send(vec![create("doc", [2; 16], R | H | W)]);
    assert_eq!(interim.len(), 1, "held, with an interim response");
    assert_eq!(interim[0].status(), status::PENDING);
    let letter = b.posted.pop().unwrap();
    let notice = a.receive(letter.letter);
    assert_eq!(lease_break(&notice[0]), ([1; 16], 1, R | H | W, R | H));
    // More than offered is refused, and the break goes on.
    assert_eq!(
        a.call(ack([1; 16], R | H | W)).status(),
        status::REQUEST_NOT_ACCEPTED
    );
    assert_eq!(
        a.call(ack([9; 16], R)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
    let r = a.call(ack([1; 16], R | H));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(
        a.call(ack([1; 16], R)).status(),
        status::UNSUCCESSFUL,
        "no break now"
    );
    let letter = a.posted.pop().unwrap();
    let (_, state, _) = granted(&b.receive(letter.letter)[0]);
    assert_eq!(state, R | H, "two users: no write caching");
    // Closing the last open ends the lease: its key is free again.
    assert_eq!(a.close(fa), status::SUCCESS);
    assert_eq!(
        a.call(ack([1; 16], R)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn a_write_breaks_other_clients_read_caching_without_waiting() {
    let (mut a, mut b) = setup();
    granted(&a.call(create("doc", [1; 16], R)));
    let (fb, state, _) = granted(&b.call(create("doc", [2; 16], R)));
    assert_eq!(state, R);
    let replies = b.send(vec![Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, fb, 0, 1, 0);
        w.u8(5);
    })]);
    assert_eq!(replies.len(), 1, "the writer's own lease is not broken");
    let letter = b.posted.pop().unwrap();
    let notice = a.receive(letter.letter);
    assert_eq!(
        lease_break(&notice[0]),
        ([1; 16], 0, R, 0),
        "no answer wanted"
    );
    assert_eq!(a.call(ack([1; 16], 0)).status(), status::UNSUCCESSFUL);
}

/// Watches nothing: the engine's part, for a server whose shares only it
/// changes.
struct NoLocalChanges;

impl copyless_core::local::LocalWatch for NoLocalChanges {
    fn watched_changed(&self, _server: &copyless_core::Server) {}

    fn share_changed(&self, _index: usize, _path: Option<&str>) {}
}

/// A watcher of local changes that counts the times it is told the
/// watched folders changed.
#[derive(Default)]
struct CountingWatch(std::sync::atomic::AtomicUsize);

impl copyless_core::local::LocalWatch for CountingWatch {
    fn watched_changed(&self, _server: &copyless_core::Server) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    fn share_changed(&self, _index: usize, _path: Option<&str>) {}
}

#[test]
fn a_folder_leased_first_is_watched_by_a_call_before_the_lease_is_heard_of() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let watch = Arc::new(CountingWatch::default());
    server.set_local_watch(watch.clone());
    let told = || watch.0.load(std::sync::atomic::Ordering::SeqCst);
    let mut a = Client::login_with(server, Dialect::Smb311, "u", "pw");
    let frame = a.frame(vec![lease_create("folder", [3; 16], R | H, None, true)]);
    assert!(!a.conn.may_block(&frame));
    let mut out = a.handle_raw(&frame);
    // The folder is made by a call first.
    let call = out.calls.pop().expect("the open's call");
    let (token, done) = call.perform();
    let mut out = a.complete(token, done);
    assert!(out.frames.is_empty(), "the reply waits for the watch");
    let call = out.calls.pop().expect("the watch's call");
    assert!(
        matches!(call.op, copyless_core::CallOp::Watch(_)),
        "{:?}",
        call.op
    );
    assert_eq!(told(), 0);
    let (token, done) = call.perform();
    assert_eq!(told(), 1);
    let out = a.complete(token, done);
    let replies = a.take(out);
    assert_eq!(replies.len(), 1);
    let (id, state, _) = granted(&replies[0]);
    assert_eq!(state, R | H);
    // The folder is watched already for a second lease on it.
    let replies = a.send(vec![lease_create("folder", [4; 16], R | H, None, true)]);
    granted(&replies[0]);
    assert_eq!(told(), 1);
    assert_eq!(a.close(id), status::SUCCESS);
}

#[test]
fn a_directory_gets_no_lease_unless_local_changes_are_seen() {
    let (mut a, _) = setup();
    let r = a.call(lease_create("folder", [3; 16], R | H, None, true));
    assert_eq!(r.status(), status::SUCCESS);
    let c = CreateReply::parse(&r.msg).unwrap();
    assert_ne!(
        c.oplock_level, OPLOCK_LEVEL_LEASE,
        "a stale listing is worse"
    );
}

#[test]
fn a_directory_lease_breaks_when_someone_else_changes_its_entries() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    server.set_local_watch(Arc::new(NoLocalChanges));
    let mut a = Client::login_with(server.clone(), Dialect::Smb311, "u", "pw");
    let mut b = Client::login_with(server, Dialect::Smb311, "u", "pw");
    let (_, state, _) = granted(&a.call(lease_create("folder", [3; 16], R | H | W, None, true)));
    assert_eq!(state, R | H, "a directory caches no writes");
    // The lease holder's own new file names the directory's lease as its
    // parent: nothing to break.
    let r = a.send(vec![lease_create(
        "folder\\mine",
        [4; 16],
        R | H | W,
        Some([3; 16]),
        false,
    )]);
    assert_eq!(r.len(), 1, "no break notice");
    granted(&r[0]);
    assert!(a.posted.is_empty());
    // Another's new file breaks it, and the create does not wait.
    let r = b.send(vec![lease_create(
        "folder\\theirs",
        [5; 16],
        R | H | W,
        None,
        false,
    )]);
    let (theirs, ..) = granted(&r[0]);
    let letter = b.posted.pop().expect("a break for the directory's holder");
    let notice = a.receive(letter.letter);
    assert_eq!(lease_break(&notice[0]), ([3; 16], 1, R | H, 0));
    assert_eq!(a.call(ack([3; 16], 0)).status(), status::SUCCESS);
    // Written and closed, a file's entry changes too.
    let (fa, ..) = granted(&a.call(lease_create("folder", [3; 16], R | H | W, None, true)));
    assert_eq!(a.close(fa), status::SUCCESS);
    let (_, state, _) = granted(&a.call(lease_create("folder", [3; 16], R | H | W, None, true)));
    assert_eq!(state, R | H, "the key's lease is upgraded again");
    let replies = b.send(vec![Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, theirs, 0, 1, 0);
        w.u8(5);
    })]);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert!(b.posted.is_empty(), "a write alone breaks nothing");
    assert_eq!(b.close(theirs), status::SUCCESS);
    let letter = b
        .posted
        .pop()
        .expect("the close of a written file breaks it");
    assert_eq!(
        lease_break(&a.receive(letter.letter)[0]),
        ([3; 16], 1, R | H, 0)
    );
}

#[test]
fn a_lease_key_of_another_file_is_refused_before_anything_is_made() {
    let (mut a, _) = setup();
    granted(&a.call(create("doc", [1; 16], R | H)));
    assert_eq!(
        a.call(create("new", [1; 16], R | H)).status(),
        status::INVALID_PARAMETER
    );
    let open_existing = copyless_scripted::create_request_with("new", 0x80, 7, 1, 0x40);
    assert_eq!(
        a.call(open_existing).status(),
        status::OBJECT_NAME_NOT_FOUND,
        "no file was left behind"
    );
}

/// NEGOTIATE offers directory leasing and multichannel only to a client
/// that asks for them (MS-SMB2 3.3.5.4), as Windows and Samba do.
#[test]
fn directory_leasing_and_multichannel_only_for_a_client_that_asks() {
    use copyless_proto::negotiate::{CAP_DIRECTORY_LEASING, CAP_LEASING, CAP_MULTI_CHANNEL};
    let (server, _vfs) = memory_server(config(), Arc::new(Users::default()));
    server.set_local_watch(Arc::new(NoLocalChanges));
    let asks = Client::negotiated(server.clone(), Dialect::Smb311);
    let both = CAP_DIRECTORY_LEASING | CAP_MULTI_CHANNEL;
    assert_eq!(asks.server_capabilities & both, both);
    for (asked, offered) in [
        (0, 0),
        (CAP_DIRECTORY_LEASING, CAP_DIRECTORY_LEASING),
        (CAP_MULTI_CHANNEL, CAP_MULTI_CHANNEL),
    ] {
        let mut c = Client::connect(server.clone());
        c.dialect = Dialect::Smb311;
        c.capabilities = asked;
        c.negotiate();
        assert_eq!(c.server_capabilities & both, offered, "asked {asked:#x}");
        // Leasing itself is the server's to offer at 2.1 and later.
        assert_ne!(c.server_capabilities & CAP_LEASING, 0);
    }
}
