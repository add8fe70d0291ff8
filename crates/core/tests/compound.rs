//! Related requests of a compound (MS-SMB2 3.3.5.2.7.2): what each
//! inherits from the one before it (session, tree and file), and how a
//! failure before it carries over. The test plays the engine where a
//! request leaves as an intent, so that a compound is seen to wait there.

use std::sync::Arc;

use copyless_core::{Completion, Op};
use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{
    close_request, create_request, create_request_with, notify_request, Client, Dialect, Request,
    Users,
};

fn users() -> Arc<Users> {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    users
}

/// A client of a share in memory that holds file "f", opened.
fn setup() -> (Client, FileId) {
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users());
    copyless_scripted::put_file(&*vfs, "f", b"on disk");
    let mut c = Client::login_with(server, Dialect::Smb311, "alice", "pw");
    let id = c.create("f", false).unwrap();
    (c, id)
}

fn related(mut r: Request) -> Request {
    r.related = true;
    r
}

fn flush_request(id: FileId) -> Request {
    Request::new(command::FLUSH, 1, |w| wire::write_flush_request(w, id))
}

/// SET_INFO of FILE_BASIC_INFORMATION that changes nothing.
fn set_basic_request(id: FileId) -> Request {
    Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, 1, 4, 0, id, &[0; 40]).unwrap()
    })
}

/// QUERY_INFO of FILE_BASIC_INFORMATION.
fn query_basic_request(id: FileId) -> Request {
    Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, 1, 4, 4096, 0, 0, id)
    })
}

fn statuses(replies: &[copyless_scripted::Reply]) -> Vec<u32> {
    replies.iter().map(|r| r.status()).collect()
}

/// Sends `reqs` as one compound, completing each flush it asks of the
/// engine (one at a time, as the compound waits at each), and returns
/// the replies and how many flushes there were.
fn send_flushing(c: &mut Client, reqs: Vec<Request>) -> (Vec<copyless_scripted::Reply>, usize) {
    let frame = c.frame(reqs);
    let mut out = c.handle_raw(&frame);
    let mut flushes = 0;
    while let Some(intent) = out.intents.pop() {
        assert!(out.intents.is_empty(), "one intent at a time");
        assert!(out.frames.is_empty(), "no reply before the flush is done");
        assert!(
            matches!(intent.op, Op::Flush),
            "not a flush: {:?}",
            intent.op
        );
        flushes += 1;
        out = c.complete(intent.token, Completion::Flush(Ok(())));
    }
    (c.take(out), flushes)
}

#[test]
fn a_close_related_to_a_flush_waits_for_it_and_closes_its_file() {
    let (mut c, id) = setup();
    let (replies, flushes) = send_flushing(
        &mut c,
        vec![flush_request(id), related(close_request(FileId::RELATED))],
    );
    assert_eq!(flushes, 1);
    assert_eq!(statuses(&replies), [status::SUCCESS, status::SUCCESS]);
    assert_eq!(
        c.close(id),
        status::FILE_CLOSED,
        "the related CLOSE closed it"
    );
}

#[test]
fn a_flush_related_to_a_flush_flushes_the_same_file_after_it() {
    let (mut c, id) = setup();
    let (replies, flushes) = send_flushing(
        &mut c,
        vec![flush_request(id), related(flush_request(FileId::RELATED))],
    );
    assert_eq!(flushes, 2);
    assert_eq!(statuses(&replies), [status::SUCCESS, status::SUCCESS]);
    assert_eq!(c.close(id), status::SUCCESS);
}

#[test]
fn a_related_request_after_a_failed_open_fails_as_it_did_notify_too() {
    let (mut c, _) = setup();
    // FILE_OPEN of a name that is not there.
    let open = create_request_with("absent", 0x0012_019f, 7, 1, 0);
    let replies = c.send(vec![
        open,
        related(notify_request(FileId::RELATED, 1, true, 4096)),
        related(close_request(FileId::RELATED)),
        related(set_basic_request(FileId::RELATED)),
    ]);
    assert_eq!(statuses(&replies), [status::OBJECT_NAME_NOT_FOUND; 4]);
}

#[test]
fn a_notify_short_of_the_last_request_of_its_compound_fails_internal_error() {
    let (mut c, _) = setup();
    let replies = c.send(vec![
        create_request("d", true),
        related(notify_request(FileId::RELATED, 1, true, 4096)),
        related(query_basic_request(FileId::RELATED)),
    ]);
    assert_eq!(
        statuses(&replies),
        [status::SUCCESS, status::INTERNAL_ERROR, status::SUCCESS]
    );
}

#[test]
fn a_related_first_request_leaves_the_rest_no_session_to_inherit() {
    let (mut c, id) = setup();
    let replies = c.send(vec![
        related(notify_request(FileId::RELATED, 1, true, 4096)),
        related(close_request(id)),
        related(set_basic_request(id)),
    ]);
    assert_eq!(statuses(&replies), [status::INVALID_PARAMETER; 3]);
    assert_eq!(
        c.close(id),
        status::SUCCESS,
        "the related CLOSE did not run"
    );
}

#[test]
fn a_related_request_naming_a_file_of_its_own_leaves_it_to_the_next() {
    let (mut c, id) = setup();
    let other = c.create("g", false).unwrap();
    let replies = c.send(vec![
        query_basic_request(other),
        related(query_basic_request(id)),
        related(close_request(FileId::RELATED)),
    ]);
    assert_eq!(statuses(&replies), [status::SUCCESS; 3]);
    assert_eq!(c.close(id), status::FILE_CLOSED);
    assert_eq!(c.close(other), status::SUCCESS);
}
