//! Byte-range locks between two opens of one file, each on its own
//! connection, as Windows keeps them.

use copyless_proto::command;
use copyless_proto::header::{Header, FLAG_ASYNC_COMMAND};
use copyless_proto::messages::{
    FileId, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_SHARED, LOCKFLAG_UNLOCK,
};
use copyless_proto::status;
use copyless_scripted::{
    config, create_request, lock_request, memory_server, put_file, read_request, Client, Reply,
    Request, Users,
};
use std::sync::Arc;

fn lock(id: FileId, ranges: &[(u64, u64, u32)]) -> Request {
    lock_request(id, 0, ranges)
}

const EX: u32 = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;
const SH: u32 = LOCKFLAG_SHARED | LOCKFLAG_FAIL_IMMEDIATELY;

#[test]
fn locks_stop_other_opens_until_unlocked_or_closed() {
    // a holds an exclusive lock on 0..10.
    let (mut a, mut b, fa, fb) = two_clients();
    assert_eq!(
        b.call(read_request(fb, 5, 1, 1)).status(),
        status::FILE_LOCK_CONFLICT
    );
    assert_eq!(
        b.call(lock(fb, &[(9, 1, SH)])).status(),
        status::LOCK_NOT_GRANTED
    );
    // All or nothing: the first range would be free, the second is not.
    assert_eq!(
        b.call(lock(fb, &[(20, 5, EX), (0, 1, EX)])).status(),
        status::LOCK_NOT_GRANTED
    );
    assert_eq!(
        a.call(lock(fa, &[(20, 5, EX)])).status(),
        status::SUCCESS,
        "20..25 was given back"
    );
    // Unlocking takes the exact range; several elements must all fail at once.
    assert_eq!(
        a.call(lock(fa, &[(0, 9, LOCKFLAG_UNLOCK)])).status(),
        status::RANGE_NOT_LOCKED
    );
    assert_eq!(
        b.call(lock(fb, &[(40, 1, LOCKFLAG_SHARED), (50, 1, SH)]))
            .status(),
        status::INVALID_PARAMETER
    );
    // UNLOCK takes no other flag, not even FAIL_IMMEDIATELY.
    assert_eq!(
        a.call(lock(
            fa,
            &[(0, 10, LOCKFLAG_UNLOCK | LOCKFLAG_FAIL_IMMEDIATELY)]
        ))
        .status(),
        status::INVALID_PARAMETER
    );
    assert_eq!(
        a.call(lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)])).status(),
        status::SUCCESS
    );
    assert_eq!(b.call(read_request(fb, 5, 1, 1)).status(), status::SUCCESS);
    // Closing gives back what the open still holds.
    assert_eq!(a.close(fa), status::SUCCESS);
    assert_eq!(b.call(lock(fb, &[(20, 5, EX)])).status(), status::SUCCESS);
}

/// A lock that may wait, and the interim response it got: its AsyncId.
fn lock_pending(c: &mut Client, id: FileId, offset: u64, length: u64) -> u64 {
    let r = c.call(lock(id, &[(offset, length, LOCKFLAG_EXCLUSIVE)]));
    assert_eq!(r.status(), status::PENDING);
    assert!(r.header.flags & FLAG_ASYNC_COMMAND != 0);
    assert_ne!(r.header.async_id, 0);
    r.header.async_id
}

/// The final response of the pending request `async_id`, alone in `replies`.
fn final_status(replies: &[Reply], async_id: u64) -> u32 {
    let finals: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.header.async_id == async_id && r.header.command == command::LOCK)
        .collect();
    let headers: Vec<&Header> = replies.iter().map(|r| &r.header).collect();
    assert_eq!(finals.len(), 1, "one final response: {headers:?}");
    assert_eq!(finals[0].header.credits, 0, "the interim one granted");
    finals[0].status()
}

fn two_clients() -> (Client, Client, FileId, FileId) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "f", &[7; 64]);
    let mut a = Client::login(server.clone(), "u", "pw");
    let mut b = Client::login(server, "u", "pw");
    let fa = a.open(create_request("f", false)).unwrap();
    let fb = b.open(create_request("f", false)).unwrap();
    assert_eq!(a.call(lock(fa, &[(0, 10, EX)])).status(), status::SUCCESS);
    (a, b, fa, fb)
}

#[test]
fn a_waiting_lock_is_granted_when_the_lock_in_its_way_goes() {
    let (mut a, mut b, fa, fb) = two_clients();
    let waiting = lock_pending(&mut b, fb, 5, 10);
    let r = a.call(lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)]));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(a.posted.len(), 1, "a letter for the waiting connection");
    let letter = a.posted.pop().unwrap();
    assert_eq!(letter.to, b.conn.id());
    assert!(!letter.letter.may_block());
    let replies = b.receive(letter.letter);
    assert_eq!(final_status(&replies, waiting), status::SUCCESS);
    // b holds it now.
    assert_eq!(
        a.call(lock(fa, &[(12, 1, EX)])).status(),
        status::LOCK_NOT_GRANTED
    );
}

#[test]
fn a_waiting_lock_on_the_holders_connection_is_granted_with_the_unlock() {
    let (mut a, _b, fa, _fb) = two_clients();
    let fa2 = a.open(create_request("f", false)).unwrap();
    let waiting = lock_pending(&mut a, fa2, 0, 1);
    let replies = a.send(vec![lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)])]);
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert_eq!(final_status(&replies, waiting), status::SUCCESS);
    assert!(a.posted.is_empty());
}

#[test]
fn a_waiting_lock_that_still_meets_a_lock_waits_on() {
    let (mut a, mut b, fa, fb) = two_clients();
    assert_eq!(a.call(lock(fa, &[(20, 10, EX)])).status(), status::SUCCESS);
    let waiting = lock_pending(&mut b, fb, 5, 20);
    a.call(lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)]));
    let letter = a.posted.pop().unwrap();
    assert!(b.receive(letter.letter).is_empty(), "20..30 is still held");
    // Closing the holder's open gives back the rest.
    assert_eq!(a.close(fa), status::SUCCESS);
    let letter = a.posted.pop().unwrap();
    assert_eq!(
        final_status(&b.receive(letter.letter), waiting),
        status::SUCCESS
    );
}

#[test]
fn cancel_close_and_logoff_end_a_waiting_lock() {
    let (mut a, mut b, fa, fb) = two_clients();
    let waiting = lock_pending(&mut b, fb, 0, 1);
    assert_eq!(final_status(&b.cancel(waiting), waiting), status::CANCELLED);
    assert!(b.cancel(waiting).is_empty(), "nothing left to cancel");

    let waiting = lock_pending(&mut b, fb, 0, 1);
    let replies = b.send(vec![Request::new(command::CLOSE, 1, |w| {
        w.u16(24).u16(0).u32(0).u64(fb.persistent).u64(fb.volatile);
    })]);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert_eq!(final_status(&replies, waiting), status::RANGE_NOT_LOCKED);

    let fb = b.open(create_request("f", false)).unwrap();
    let waiting = lock_pending(&mut b, fb, 0, 1);
    let replies = b.send(vec![Request::new(command::LOGOFF, 1, |w| {
        w.u16(4).u16(0);
    })]);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert_eq!(final_status(&replies, waiting), status::RANGE_NOT_LOCKED);

    // None of them is woken later: the holder's unlock finds no waiter.
    a.call(lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)]));
    assert!(a.posted.is_empty());
}

#[test]
fn a_connection_that_drops_wakes_the_locks_its_locks_held_up() {
    let (mut a, mut b, _fa, fb) = two_clients();
    let waiting = lock_pending(&mut b, fb, 0, 1);
    let letters = a.conn.shutdown();
    assert_eq!(letters.len(), 1);
    let replies = b.receive(letters.into_iter().next().unwrap().letter);
    assert_eq!(final_status(&replies, waiting), status::SUCCESS);
}

#[test]
fn one_connection_has_a_bounded_number_of_pending_requests() {
    let (_a, mut b, _fa, fb) = two_clients();
    let mut pending = 0;
    loop {
        let r = b.call(lock(fb, &[(0, 1, LOCKFLAG_SHARED)]));
        if r.status() != status::PENDING {
            assert_eq!(r.status(), status::INSUFFICIENT_RESOURCES);
            break;
        }
        pending += 1;
        assert!(pending <= 100_000, "no bound");
    }
    assert!(pending >= 64, "room for what clients do: {pending}");
    // A lock that fails at once needs no room.
    assert_eq!(
        b.call(lock(fb, &[(0, 1, SH)])).status(),
        status::LOCK_NOT_GRANTED
    );
}
