//! Oplocks between two clients, each on its own connection: granted,
//! broken by the other's open, acknowledged, given up by closing, timed
//! out, and broken to none by a write.

use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::command;
use copyless_proto::header::FLAG_ASYNC_COMMAND;
use copyless_proto::messages::{
    FileId, OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_EXCLUSIVE, OPLOCK_LEVEL_II, OPLOCK_LEVEL_NONE,
};
use copyless_proto::status;
use copyless_scripted::{config, memory_server, put_file, Client, Reply, Request, Users};
use std::sync::Arc;

const READ_WRITE: u32 = 0x0012_019f;
const OPEN_IF: u32 = 3;
const OVERWRITE_IF: u32 = 5;
const DELETE: u32 = 0x0001_0000;
const DELETE_ON_CLOSE: u32 = 0x1000;

fn create(name: &str, oplock_level: u8, disposition: u32) -> Request {
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level,
        desired_access: READ_WRITE,
        file_attributes: 0,
        share_access: 7,
        disposition,
        options: 0x40,
        name,
        contexts: &[],
    })
}

/// The file id and oplock level of a CREATE reply.
fn opened(r: &Reply) -> (FileId, u8) {
    assert_eq!(r.status(), status::SUCCESS);
    let c = CreateReply::parse(&r.msg).unwrap();
    (c.file_id, c.oplock_level)
}

/// The file id and level of a break notification.
fn notification(r: &Reply) -> (FileId, u8) {
    assert_eq!(r.header.command, command::OPLOCK_BREAK);
    assert_eq!(r.header.message_id, u64::MAX);
    let body = &r.msg[64..];
    assert_eq!(u16::from_le_bytes([body[0], body[1]]), 24);
    let id = FileId {
        persistent: u64::from_le_bytes(body[8..16].try_into().unwrap()),
        volatile: u64::from_le_bytes(body[16..24].try_into().unwrap()),
    };
    (id, body[2])
}

fn ack(id: FileId, level: u8) -> Request {
    Request::new(command::OPLOCK_BREAK, 1, |w| {
        w.u16(24).u8(level).u8(0).u32(0);
        w.u64(id.persistent).u64(id.volatile);
    })
}

fn setup() -> (Client, Client) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "doc", &[1; 100]);
    let a = Client::login(server.clone(), "u", "pw");
    let b = Client::login(server, "u", "pw");
    (a, b)
}

/// `a` holds a batch oplock on "doc"; `b` opens it too and is held until
/// `a` answers the break the letter brings: returns `a`'s file id and
/// the AsyncId of `b`'s held open.
fn held_by_a_break(a: &mut Client, b: &mut Client) -> (FileId, u64) {
    let (fa, level) = opened(&a.call(create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)));
    assert_eq!(level, OPLOCK_LEVEL_BATCH, "the only open gets what it asks");
    let interim = b.send(vec![create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)]);
    assert_eq!(interim.len(), 1, "the second open waits for the break");
    assert_eq!(interim[0].status(), status::PENDING, "and says so at once");
    assert!(interim[0].header.flags & FLAG_ASYNC_COMMAND != 0);
    let letter = b.posted.pop().expect("a letter for the holder");
    assert_eq!(letter.to, a.conn.id());
    let replies = a.receive(letter.letter);
    assert_eq!(replies.len(), 1);
    assert_eq!(notification(&replies[0]), (fa, OPLOCK_LEVEL_II));
    (fa, interim[0].header.async_id)
}

#[test]
fn a_second_open_waits_for_the_break_and_gets_level_ii() {
    let (mut a, mut b) = setup();
    let (fa, _) = held_by_a_break(&mut a, &mut b);
    let frame = a.frame(vec![ack(fa, OPLOCK_LEVEL_II)]);
    assert!(
        !a.conn.may_block(&frame),
        "an acknowledgement that lets only another connection's open go on is memory"
    );
    let r = a.handle_frame(&frame).pop().unwrap();
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(
        r.msg[64 + 2],
        OPLOCK_LEVEL_II,
        "the response names the level"
    );
    let letter = a.posted.pop().expect("the waiting connection is woken");
    let replies = b.receive(letter.letter);
    assert_eq!(replies.len(), 1);
    let (_, level) = opened(&replies[0]);
    assert_eq!(level, OPLOCK_LEVEL_II, "others are open: level II at most");
    // The break is over: a second acknowledgement is a protocol error.
    assert_eq!(
        a.call(ack(fa, OPLOCK_LEVEL_NONE)).status(),
        status::INVALID_OPLOCK_PROTOCOL
    );
}

#[test]
fn closing_instead_of_acknowledging_lets_the_open_through() {
    let (mut a, mut b) = setup();
    let (fa, _) = held_by_a_break(&mut a, &mut b);
    assert_eq!(a.close(fa), status::SUCCESS);
    let letter = a.posted.pop().unwrap();
    let (_, level) = opened(&b.receive(letter.letter)[0]);
    assert_eq!(level, OPLOCK_LEVEL_BATCH, "it is the only open now");
}

#[test]
fn a_break_nobody_answers_ends_after_35_seconds() {
    let (mut a, mut b) = setup();
    let (fa, _) = held_by_a_break(&mut a, &mut b);
    b.env.now += 34 * 10_000_000;
    let replies = b.tick();
    assert!(
        replies
            .iter()
            .all(|r| r.header.command != command::CREATE || r.status() == status::PENDING),
        "still waiting at 34 s"
    );
    b.env.now += 2 * 10_000_000;
    // The tick that ends the break is memory, and so is the open it lets
    // go, whose open is a call: both run on the loop.
    assert!(!b.conn.timeout_may_block());
    b.env.on_loop = true;
    let replies = b.tick();
    let done: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.status() != status::PENDING)
        .collect();
    assert_eq!(done.len(), 1);
    assert_eq!(opened(done[0]).1, OPLOCK_LEVEL_II);
    assert!(
        done[0].header.flags & FLAG_ASYNC_COMMAND != 0,
        "after its interim"
    );
    assert_eq!(
        a.call(ack(fa, OPLOCK_LEVEL_II)).status(),
        status::INVALID_OPLOCK_PROTOCOL,
        "too late"
    );
}

#[test]
fn a_held_open_can_be_cancelled() {
    let (mut a, mut b) = setup();
    let (_, async_id) = held_by_a_break(&mut a, &mut b);
    let replies = b.cancel(async_id);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::CANCELLED);
}

#[test]
fn writes_and_overwrites_break_level_ii_to_none_without_waiting() {
    let (mut a, mut b) = setup();
    let (fa, level) = opened(&a.call(create("doc", OPLOCK_LEVEL_II, OPEN_IF)));
    assert_eq!(level, OPLOCK_LEVEL_II);
    let (fb, level) = opened(&b.call(create("doc", OPLOCK_LEVEL_EXCLUSIVE, OPEN_IF)));
    assert_eq!(level, OPLOCK_LEVEL_II, "another open is there");
    // b's write breaks both: its own at once, a's by a letter.
    let replies = b.send(vec![Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, fb, 0, 1, 0);
        w.u8(9);
    })]);
    assert_eq!(replies.len(), 2);
    let (breaks, writes): (Vec<&Reply>, Vec<&Reply>) = replies
        .iter()
        .partition(|r| r.header.command == command::OPLOCK_BREAK);
    assert_eq!(writes[0].status(), status::SUCCESS);
    assert_eq!(notification(breaks[0]), (fb, OPLOCK_LEVEL_NONE));
    let letter = b.posted.pop().unwrap();
    assert_eq!(
        notification(&a.receive(letter.letter)[0]),
        (fa, OPLOCK_LEVEL_NONE)
    );
    // Nothing to acknowledge from level II.
    assert_eq!(
        a.call(ack(fa, OPLOCK_LEVEL_NONE)).status(),
        status::INVALID_OPLOCK_PROTOCOL
    );
    // An overwrite breaks level II without waiting either.
    let (_, level) = opened(&a.call(create("doc", OPLOCK_LEVEL_II, OPEN_IF)));
    assert_eq!(level, OPLOCK_LEVEL_II);
    let r = b.send(vec![create("doc", OPLOCK_LEVEL_NONE, OVERWRITE_IF)]);
    assert_eq!(r.len(), 1, "no wait");
    assert_eq!(opened(&r[0]).1, OPLOCK_LEVEL_NONE);
    assert_eq!(b.posted.len(), 1, "a's new level II open is told");
}

#[test]
fn an_open_held_by_a_break_is_woken_when_the_holder_goes_while_removing_the_file() {
    let (mut a, mut b) = setup();
    // `a` opens to delete at close, with a batch oplock.
    let doomed = copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: OPLOCK_LEVEL_BATCH,
        desired_access: READ_WRITE | 0x0001_0000,
        file_attributes: 0,
        share_access: 7,
        disposition: OPEN_IF,
        options: 0x40 | 0x1000,
        name: "doc",
        contexts: &[],
    });
    let (fa, level) = opened(&a.call(doomed));
    assert_eq!(level, OPLOCK_LEVEL_BATCH);
    let interim = b.send(vec![create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)]);
    assert_eq!(interim[0].status(), status::PENDING);
    let letter = b.posted.pop().expect("a letter for the holder");
    assert_eq!(a.receive(letter.letter).len(), 1, "the break");
    // `a` closes rather than answer: its file's removal leaves as a call,
    // and the connection ends before the call's result comes back.
    let frame = a.frame(vec![copyless_scripted::close_request(fa)]);
    let out = a.handle_raw(&frame);
    assert_eq!(out.calls.len(), 1, "{:?}", out.calls);
    assert!(
        out.messages.is_empty(),
        "nobody is woken before the removal"
    );
    let letters = a.conn.shutdown();
    let to_b: Vec<_> = letters
        .into_iter()
        .filter(|m| m.to == b.conn.id())
        .collect();
    assert_eq!(to_b.len(), 1, "the held open is woken");
    let replies = b.receive(to_b.into_iter().next().unwrap().letter);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::SUCCESS);
}

#[test]
fn a_held_open_woken_on_the_loop_runs_there_when_its_open_is_a_call() {
    let (mut a, mut b) = setup();
    let (fa, _) = held_by_a_break(&mut a, &mut b);
    assert_eq!(a.call(ack(fa, OPLOCK_LEVEL_II)).status(), status::SUCCESS);
    let letter = a.posted.pop().expect("b is woken").letter;
    assert!(!letter.may_block(), "the letter itself is memory");
    b.env.on_loop = true;
    let replies = b.receive(letter);
    assert_eq!(replies.len(), 1, "the open runs again at once");
    let (_, level) = opened(&replies[0]);
    assert_eq!(level, OPLOCK_LEVEL_II);
    assert_ne!(b.conn.timeout(), Some(std::time::Duration::ZERO));
}

/// `b`'s compound of an open of "doc" and `then`, related to it, held
/// for `a`'s break until `a` acknowledges: the letter that wakes it.
fn held_compound(a: &mut Client, b: &mut Client, mut then: Request) -> copyless_core::Letter {
    let (fa, _) = opened(&a.call(create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)));
    then.related = true;
    let early = b.send(vec![create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF), then]);
    assert!(early.is_empty(), "a compound waits whole");
    a.receive(b.posted.pop().expect("a break for a").letter);
    assert_eq!(a.call(ack(fa, OPLOCK_LEVEL_II)).status(), status::SUCCESS);
    a.posted.pop().expect("b is woken").letter
}

const CHAINED: FileId = FileId {
    persistent: u64::MAX,
    volatile: u64::MAX,
};

#[test]
fn a_held_compound_woken_on_the_loop_runs_there_or_on_a_tick_as_its_frame_would() {
    // Explorer's open and close: on the loop.
    let (mut a, mut b) = setup();
    let letter = held_compound(&mut a, &mut b, copyless_scripted::close_request(CHAINED));
    b.env.on_loop = true;
    let replies = b.receive(letter);
    let statuses: Vec<u32> = replies.iter().map(Reply::status).collect();
    assert_eq!(statuses, vec![status::SUCCESS; 2]);
    // With a tree's end behind it, which may remove files: on a tick.
    let (mut a, mut b) = setup();
    let disconnect = Request::new(command::TREE_DISCONNECT, 1, |w| {
        w.u16(4).u16(0);
    });
    let letter = held_compound(&mut a, &mut b, disconnect);
    b.env.on_loop = true;
    assert!(b.receive(letter).is_empty());
    assert_eq!(b.conn.timeout(), Some(std::time::Duration::ZERO));
    assert!(
        b.conn.timeout_may_block(),
        "the tick goes where it may wait"
    );
    b.env.on_loop = false;
    let replies = b.tick();
    let statuses: Vec<u32> = replies.iter().map(Reply::status).collect();
    assert_eq!(statuses, vec![status::SUCCESS; 2]);
    assert_ne!(b.conn.timeout(), Some(std::time::Duration::ZERO));
}

#[test]
fn a_connection_that_ends_before_a_removal_comes_back_wakes_who_waited_on_it() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "doc", &[1; 100]);
    let mut a = Client::login(server.clone(), "u", "pw");
    let mut b = Client::login(server.clone(), "u", "pw");
    // a's open is to be deleted at its close; b's open waits for a's break.
    let doomed = copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: OPLOCK_LEVEL_BATCH,
        desired_access: READ_WRITE | DELETE,
        file_attributes: 0,
        share_access: 7,
        disposition: OPEN_IF,
        options: 0x40 | DELETE_ON_CLOSE,
        name: "doc",
        contexts: &[],
    });
    opened(&a.call(doomed));
    let interim = b.send(vec![create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)]);
    assert_eq!(interim[0].status(), status::PENDING);
    a.receive(b.posted.pop().expect("a break for a").letter);
    // A later connection names a's session: a's letter ends it, and the
    // file's removal leaves as a call...
    let mut c = Client::connect(server);
    c.negotiate();
    c.session_setup_after("u", "pw", a.session_id).unwrap();
    let letter = c.posted.pop().expect("a letter for a").letter;
    let out = a.conn.receive(letter, &mut a.env);
    assert_eq!(out.calls.len(), 1, "the removal");
    // ...whose result a does not live to hear.
    let letters = a.conn.shutdown();
    let to_b: Vec<_> = letters
        .into_iter()
        .filter(|m| m.to == b.conn.id())
        .collect();
    assert_eq!(to_b.len(), 1, "b's held open is woken");
    let replies = b.receive(to_b.into_iter().next().unwrap().letter);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].header.command, command::CREATE);
}

#[test]
fn an_acknowledgement_by_a_connection_whose_own_open_is_held_is_memory() {
    let (mut a, mut b) = setup();
    let (fb, _) = opened(&b.call(create("other", OPLOCK_LEVEL_BATCH, OPEN_IF)));
    // b's own open of "doc" waits for a's break...
    held_by_a_break(&mut a, &mut b);
    // ...and a's open of "other" for b's.
    let interim = a.send(vec![create("other", OPLOCK_LEVEL_BATCH, OPEN_IF)]);
    assert_eq!(interim[0].status(), status::PENDING);
    let letter = a.posted.pop().expect("a letter for b");
    assert_eq!(notification(&b.receive(letter.letter)[0]).0, fb);
    let frame = b.frame(vec![ack(fb, OPLOCK_LEVEL_II)]);
    assert!(
        !b.conn.may_block(&frame),
        "what it lets go of b's own runs again on a tick"
    );
    let r = b.handle_frame(&frame);
    assert_eq!(r[0].status(), status::SUCCESS);
    let letter = b.posted.pop().expect("a is woken");
    let (_, level) = opened(&a.receive(letter.letter)[0]);
    assert_eq!(level, OPLOCK_LEVEL_II);
}

#[test]
fn a_break_of_an_open_whose_overwrite_is_still_being_made_follows_its_reply() {
    let (mut a, mut b) = setup();
    // a's overwrite leaves its open, then its truncation, as calls.
    let frame = a.frame(vec![create("doc", OPLOCK_LEVEL_BATCH, OVERWRITE_IF)]);
    assert!(!a.conn.may_block(&frame));
    let mut out = a.handle_raw(&frame);
    let (token, done) = out.calls.pop().expect("the open").perform();
    let mut out = a.complete(token, done);
    let truncation = out.calls.pop().expect("the truncation");
    assert!(out.frames.is_empty());
    // Meanwhile b opens the file: a's new batch oplock is to be broken.
    let interim = b.send(vec![create("doc", OPLOCK_LEVEL_BATCH, OPEN_IF)]);
    assert_eq!(interim[0].status(), status::PENDING);
    let letter = b.posted.pop().expect("a letter for a");
    let early = a.conn.receive(letter.letter, &mut a.env);
    assert!(early.frames.is_empty(), "no break before the open's reply");
    let (token, done) = truncation.perform();
    let out = a.complete(token, done);
    let replies = a.take(out);
    assert_eq!(replies.len(), 2, "the reply, then the break");
    let (fa, level) = opened(&replies[0]);
    assert_eq!(level, OPLOCK_LEVEL_BATCH);
    assert_eq!(notification(&replies[1]), (fa, OPLOCK_LEVEL_II));
    assert_eq!(a.call(ack(fa, OPLOCK_LEVEL_II)).status(), status::SUCCESS);
    let letter = a.posted.pop().expect("b is woken");
    let (_, level) = opened(&b.receive(letter.letter)[0]);
    assert_eq!(level, OPLOCK_LEVEL_II);
}
