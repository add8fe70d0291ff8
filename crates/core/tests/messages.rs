//! Letters between connections: what a request on one connection makes
//! another do. The test plays the engine and carries each letter to the
//! connection it names. Driven in memory by scripted clients.

use std::sync::Arc;

use copyless_core::CallOp;
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::messages::FileId;
use copyless_proto::status;
use copyless_scripted::{create_request_with, read_request, Client, Request, Users};

const SHARING_VIOLATION: u32 = 0xC000_0043;

fn setup() -> (tempfile::TempDir, Arc<copyless_core::Server>) {
    let dir = tempfile::tempdir().unwrap();
    let users = Arc::new(Users::default());
    users.add("alice", "pw-a");
    users.add("bob", "pw-b");
    let server = copyless_scripted::server(dir.path(), copyless_scripted::config(), users);
    (dir, server)
}

/// Opens `name` for reading and writing, sharing nothing with other opens.
fn open_exclusive(c: &mut Client, name: &str) -> Result<FileId, u32> {
    // FILE_OPEN_IF, a non-directory.
    c.open(create_request_with(name, 0x0012_019f, 0, 3, 0x40))
}

/// A second connection of the same client, logged in as `user`, naming
/// `previous` as the session it had before.
fn reconnect(server: &Arc<copyless_core::Server>, user: &str, pw: &str, previous: u64) -> Client {
    let mut c = Client::connect(server.clone());
    c.negotiate();
    c.session_setup_after(user, pw, previous).unwrap();
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    c
}

#[test]
fn a_reconnect_naming_the_previous_session_ends_it_on_its_own_connection() {
    let (_dir, server) = setup();
    let mut old = Client::login(server.clone(), "alice", "pw-a");
    let held = open_exclusive(&mut old, "doc").unwrap();
    assert_eq!(server.sessions.len(), 1);

    let mut new = reconnect(&server, "alice", "pw-a", old.session_id);
    let letters = std::mem::take(&mut new.posted);
    assert_eq!(letters.len(), 1, "one letter, to the old connection");
    assert_eq!(letters[0].to, old.conn.id());
    assert_ne!(old.conn.id(), new.conn.id());
    // Until the letter arrives, the old session still holds its open.
    assert_eq!(
        open_exclusive(&mut new, "doc").err(),
        Some(SHARING_VIOLATION)
    );
    assert_eq!(server.sessions.len(), 1, "only the new session is listed");

    for m in letters {
        assert!(
            !m.letter.may_block(),
            "what closing opens removes goes by a call"
        );
        let sent = old.receive(m.letter);
        assert!(sent.is_empty(), "the old client is told nothing");
    }
    let r = old.call(read_request(held, 0, 1, 1));
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(!old.closed, "the old connection itself stays");
    assert!(open_exclusive(&mut new, "doc").is_ok(), "the open is gone");
}

#[test]
fn a_session_ended_by_a_letter_removes_its_files_by_a_call() {
    let (dir, server) = setup();
    let mut old = Client::login(server.clone(), "alice", "pw-a");
    // FILE_OPEN_IF with DELETE, deleted on close.
    let doc = create_request_with("doc", 0x0013_019f, 0, 3, 0x40 | 0x1000);
    old.open(doc).unwrap();
    let on_disk = dir.path().join("doc");
    assert!(on_disk.exists());
    let mut new = reconnect(&server, "alice", "pw-a", old.session_id);
    let letter = std::mem::take(&mut new.posted).remove(0).letter;
    assert!(!letter.may_block());
    let mut out = old.conn.receive(letter, &mut old.env);
    assert_eq!(out.calls.len(), 1, "the removal");
    assert!(on_disk.exists(), "not before the call");
    let call = out.calls.remove(0);
    assert!(matches!(call.op, CallOp::Unlink { .. }));
    let (token, done) = call.perform();
    let out = old.complete(token, done);
    assert!(out.frames.is_empty() && out.calls.is_empty());
    assert!(!on_disk.exists(), "removed by the call");
    // Its close is finished: the name is free, and nobody holds it.
    assert!(open_exclusive(&mut new, "doc").is_ok());
}

#[test]
fn another_users_session_is_not_ended_by_naming_it() {
    let (_dir, server) = setup();
    let mut alice = Client::login(server.clone(), "alice", "pw-a");
    let held = open_exclusive(&mut alice, "doc").unwrap();

    let mut bob = reconnect(&server, "bob", "pw-b", alice.session_id);
    assert!(
        bob.posted.is_empty(),
        "no letter for another user's session"
    );
    assert_eq!(
        open_exclusive(&mut bob, "doc").err(),
        Some(SHARING_VIOLATION)
    );
    assert_eq!(server.sessions.len(), 2);
    // The file is empty: the open still answers, with end of file.
    let r = alice.call(read_request(held, 0, 1, 1));
    assert_eq!(r.status(), status::END_OF_FILE);
}

#[test]
fn a_previous_session_on_the_same_connection_ends_at_once() {
    let (_dir, server) = setup();
    let mut c = Client::login(server.clone(), "alice", "pw-a");
    let first = c.session_id;
    open_exclusive(&mut c, "doc").unwrap();
    c.session_setup_after("alice", "pw-a", first).unwrap();
    assert_ne!(c.session_id, first);
    assert!(c.posted.is_empty(), "no letter to itself");
    assert_eq!(server.sessions.len(), 1);
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    assert!(
        open_exclusive(&mut c, "doc").is_ok(),
        "the first session's open is gone"
    );
}

#[test]
fn a_letter_for_a_session_already_gone_changes_nothing() {
    let (_dir, server) = setup();
    let mut old = Client::login(server.clone(), "alice", "pw-a");
    let previous = old.session_id;
    let mut new = reconnect(&server, "alice", "pw-a", previous);
    let letter = new.posted.pop().unwrap().letter;
    // The old client logged off before the letter came.
    let r = old.call(Request::new(command::LOGOFF, 1, |w| {
        wire::write_empty_request(w)
    }));
    assert_eq!(r.status(), status::SUCCESS);
    assert!(old.receive(letter).is_empty());
    assert!(!old.closed);
    assert!(server.sessions.len() == 1, "the new session stays listed");
}

#[test]
fn sessions_leave_the_table_on_logoff_and_when_the_connection_ends() {
    let (_dir, server) = setup();
    let mut a = Client::login(server.clone(), "alice", "pw-a");
    let mut b = Client::login(server.clone(), "bob", "pw-b");
    assert_eq!(server.sessions.len(), 2);
    let r = a.call(Request::new(command::LOGOFF, 1, |w| {
        wire::write_empty_request(w)
    }));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(server.sessions.len(), 1);
    b.conn.shutdown();
    assert!(server.sessions.is_empty());
}
