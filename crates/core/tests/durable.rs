//! Durable handles: an open with a batch oplock outlives its connection
//! and is reclaimed from a new one; one that caches nothing does not; a
//! kept open expires, gives way to another client, and remembers which
//! lock requests it already carried out.

use std::sync::Arc;

use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::command;
use copyless_proto::create_context::{self as cc};
use copyless_proto::messages::{
    FileId, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_NONE,
};
use copyless_proto::status;
use copyless_scripted::{
    config, create_request_with, memory_server, put_file, Client, Dialect, Reply, Request, Users,
};

const READ_WRITE: u32 = 0x0012_019f;
const FILE_READ_ATTRIBUTES: u32 = 0x80;
const OPEN_IF: u32 = 3;
const EXCLUSIVE: u32 = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;
/// FILETIME ticks in a minute.
const MINUTE: u64 = 60 * 10_000_000;

fn create(name: &str, oplock_level: u8, contexts: &[(&[u8], Vec<u8>)]) -> Request {
    let contexts = cc::build_chain(contexts);
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level,
        desired_access: READ_WRITE,
        file_attributes: 0,
        share_access: 7,
        disposition: OPEN_IF,
        options: 0x40,
        name,
        contexts: &contexts,
    })
}

fn durable(name: &str, oplock_level: u8) -> Request {
    create(name, oplock_level, &[(cc::DHNQ, vec![0; 16])])
}

fn reconnect(name: &str, id: FileId) -> Request {
    let mut data = id.persistent.to_le_bytes().to_vec();
    data.extend_from_slice(&id.volatile.to_le_bytes());
    create(name, OPLOCK_LEVEL_BATCH, &[(cc::DHNC, data)])
}

fn lock(id: FileId, sequence: u32) -> Request {
    copyless_scripted::lock_request(id, sequence, &[(0, 10, EXCLUSIVE)])
}

/// The reply's file id, oplock level, action and context names.
fn opened(r: &Reply) -> (FileId, u8, u32, Vec<Vec<u8>>) {
    assert_eq!(r.status(), status::SUCCESS);
    let c = CreateReply::parse(&r.msg).unwrap();
    let names = cc::parse_chain(c.contexts)
        .unwrap()
        .iter()
        .map(|x| x.name.to_vec())
        .collect();
    (c.file_id, c.oplock_level, c.create_action, names)
}

fn server() -> Arc<copyless_core::Server> {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "doc", &[1; 100]);
    server
}

#[test]
fn a_batch_open_is_kept_when_its_connection_drops_and_reclaimed_from_another() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, level, _, contexts) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    assert_eq!(level, OPLOCK_LEVEL_BATCH);
    assert_eq!(contexts, [cc::DHNQ.to_vec()], "granted durable");
    assert_eq!(a.call(lock(id, 0)).status(), status::SUCCESS);
    a.conn.shutdown();
    assert_eq!(server.durable.len(), 1, "kept");

    let mut b = Client::login(server.clone(), "u", "pw");
    // The kept open still holds its lock. (Only an open that reads
    // attributes leaves it be: any other would break its batch oplock,
    // which closes it, its holder being gone.)
    let stat = create_request_with("doc", FILE_READ_ATTRIBUTES, 7, 1, 0x40);
    let (other, ..) = opened(&b.call(stat));
    assert_eq!(
        b.call(lock(other, 0)).status(),
        status::LOCK_NOT_GRANTED,
        "the lock stood while its holder was away"
    );
    assert_eq!(b.close(other), status::SUCCESS);

    let mut c = Client::login(server.clone(), "u", "pw");
    // Any name does: a batch open is found by its id alone.
    let (back, level, action, contexts) = opened(&c.call(reconnect("elsewhere", id)));
    assert_eq!((back, level), (id, OPLOCK_LEVEL_BATCH));
    assert_eq!(action, 1, "FILE_OPENED");
    assert!(contexts.is_empty(), "a reconnect is not granted again");
    assert!(server.durable.is_empty());
    assert_eq!(c.close(back), status::SUCCESS);
    assert_eq!(
        c.call(reconnect("doc", id)).status(),
        status::OBJECT_NAME_NOT_FOUND,
        "closed for good"
    );
}

#[test]
fn an_open_that_caches_nothing_is_not_durable() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, _, _, contexts) = opened(&a.call(durable("doc", OPLOCK_LEVEL_NONE)));
    assert!(contexts.is_empty(), "no batch oplock, no durability");
    a.conn.shutdown();
    assert!(server.durable.is_empty());
    let mut b = Client::login(server, "u", "pw");
    assert_eq!(
        b.call(reconnect("doc", id)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn a_live_open_cannot_be_reclaimed() {
    let server = server();
    let mut a = Client::login(server, "u", "pw");
    let (id, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    assert_eq!(
        a.call(reconnect("doc", id)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(a.close(id), status::SUCCESS, "and it is left alone");
}

#[test]
fn a_kept_open_expires_after_sixteen_minutes() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    a.conn.shutdown();
    let mut b = Client::login(server.clone(), "u", "pw");
    b.env.now += 15 * MINUTE;
    b.tick();
    assert_eq!(server.durable.len(), 1, "still kept after 15 minutes");
    b.env.now += 2 * MINUTE;
    b.tick();
    assert!(
        server.durable.is_empty(),
        "closed by another connection's timer"
    );
    assert_eq!(
        b.call(reconnect("doc", id)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn a_timer_closes_a_kept_open_in_place() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    assert!(
        !a.conn.timeout_may_block(),
        "with nothing held a tick only checks sessions: the engine runs it in place"
    );
    opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    a.conn.shutdown();
    let mut b = Client::login(server.clone(), "u", "pw");
    b.env.now += 17 * MINUTE;
    assert!(
        !b.conn.timeout_may_block(),
        "the kept open expires on this tick: a file its close removes goes by a call"
    );
    b.tick();
    assert!(server.durable.is_empty());
}

#[test]
fn another_client_does_not_wait_for_one_that_is_gone() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    a.conn.shutdown();
    let mut b = Client::login(server.clone(), "u", "pw");
    let frame = b.frame(vec![create("doc", OPLOCK_LEVEL_BATCH, &[])]);
    assert!(
        !b.conn.may_block(&frame),
        "the open leaves as a call; the kept one in its way is let go in memory"
    );
    let replies = b.handle_frame(&frame);
    let (_, level, action, _) = opened(&replies[0]);
    assert_eq!(
        (level, action),
        (OPLOCK_LEVEL_BATCH, 1),
        "no break to wait for: the kept open went"
    );
    assert!(
        b.posted.is_empty(),
        "no letter to a connection that is gone"
    );
    assert!(server.durable.is_empty());
    let mut c = Client::login(server, "u", "pw");
    assert_eq!(
        c.call(reconnect("doc", id)).status(),
        status::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn a_durable_open_carries_out_a_repeated_lock_once() {
    let server = server();
    let mut a = Client::login(server, "u", "pw");
    let (kept, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    // LockSequenceIndex 1, number 1: sent again after a network failure,
    // it succeeds without locking twice.
    assert_eq!(a.call(lock(kept, 0x11)).status(), status::SUCCESS);
    assert_eq!(a.call(lock(kept, 0x11)).status(), status::SUCCESS);
    // A new number under the same index is a new request.
    assert_eq!(a.call(lock(kept, 0x12)).status(), status::LOCK_NOT_GRANTED);
    assert_eq!(a.close(kept), status::SUCCESS);

    // A plain open remembers nothing (as Windows).
    let (plain, ..) = opened(&a.call(create("doc", OPLOCK_LEVEL_NONE, &[])));
    assert_eq!(a.call(lock(plain, 0x11)).status(), status::SUCCESS);
    assert_eq!(a.call(lock(plain, 0x11)).status(), status::LOCK_NOT_GRANTED);
}

#[test]
fn contexts_that_contradict_each_other_are_invalid() {
    let server = server();
    let mut a = Client::login_with(server, Dialect::Smb311, "u", "pw");
    let mut dh2q = vec![0; 32];
    dh2q[16] = 1;
    let both = create(
        "doc",
        OPLOCK_LEVEL_BATCH,
        &[(cc::DHNQ, vec![0; 16]), (cc::DH2Q, dh2q.clone())],
    );
    assert_eq!(a.call(both).status(), status::INVALID_PARAMETER);
    let short = create(
        "doc",
        OPLOCK_LEVEL_BATCH,
        &[(cc::DH2Q, dh2q[..31].to_vec())],
    );
    assert_eq!(a.call(short).status(), status::INVALID_PARAMETER);
    // Version 2 on SMB 3: the timeout asked for 0 is a minute.
    let r = a.call(create("doc", OPLOCK_LEVEL_BATCH, &[(cc::DH2Q, dh2q)]));
    let c = CreateReply::parse(&r.msg).unwrap();
    let chain = cc::parse_chain(c.contexts).unwrap();
    assert_eq!(chain[0].name, cc::DH2Q);
    assert_eq!(chain[0].data, [0x60, 0xea, 0, 0, 0, 0, 0, 0], "60000 ms");
}

#[test]
fn a_reclaim_waits_for_the_old_connection_to_go() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    // The client's new connection comes before the server has seen the
    // old one drop.
    let mut b = Client::login(server.clone(), "u", "pw");
    let interim = b.send(vec![reconnect("doc", id)]);
    assert_eq!(interim[0].status(), status::PENDING);
    let mut letters = a.conn.shutdown();
    assert_eq!(letters.len(), 1, "the waiting reclaim is woken");
    let letter = letters.pop().unwrap();
    assert_eq!(letter.to, b.conn.id());
    let replies = b.receive(letter.letter);
    let (back, level, ..) = opened(&replies[0]);
    assert_eq!((back, level), (id, OPLOCK_LEVEL_BATCH));
}

#[test]
fn a_reclaim_of_an_open_whose_connection_stays_fails_after_five_seconds() {
    let server = server();
    let mut a = Client::login(server.clone(), "u", "pw");
    let (id, ..) = opened(&a.call(durable("doc", OPLOCK_LEVEL_BATCH)));
    let mut b = Client::login(server, "u", "pw");
    assert_eq!(
        b.send(vec![reconnect("doc", id)])[0].status(),
        status::PENDING
    );
    b.env.now += 4 * 10_000_000;
    assert!(b.tick().iter().all(|r| r.status() == status::PENDING));
    b.env.now += 2 * 10_000_000;
    let replies = b.tick();
    assert!(replies.iter().any(
        |r| r.header.command == command::CREATE && r.status() == status::OBJECT_NAME_NOT_FOUND
    ));
    assert_eq!(a.close(id), status::SUCCESS, "the open was left alone");
}
