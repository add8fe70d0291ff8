//! Change notification: a watching open on one connection hears of what
//! another connection creates, renames and deletes, kept between requests
//! and answered at once, and the request ends on close.

use copyless_fscc::access::FILE_ALL_ACCESS;
use copyless_fscc::descriptor::{
    sids, Ace, Descriptor, ACCESS_ALLOWED_ACE_TYPE, ALL_PARTS, CONTAINER_INHERIT_ACE,
    OBJECT_INHERIT_ACE, SE_DACL_PRESENT,
};
use copyless_fscc::notify::{action, filter};
use copyless_proto::client::CreateParams;
use copyless_proto::command;
use copyless_proto::create_context as cc;
use copyless_proto::messages::FileId;
use copyless_proto::status;
use copyless_scripted::{
    close_request, config, create_request_from, create_request_with, memory_server, notify_entries,
    notify_request, Client, Reply, Request, Users,
};
use std::sync::Arc;

fn setup() -> (Client, Client, FileId) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let mut a = Client::login(server.clone(), "u", "pw");
    let b = Client::login(server, "u", "pw");
    let dir = a.create("docs", true).unwrap();
    (a, b, dir)
}

/// Lets the letters `from` posted reach `to`.
fn post(from: &mut Client, to: &mut Client) -> Vec<Reply> {
    let mut replies = Vec::new();
    for m in std::mem::take(&mut from.posted) {
        assert_eq!(m.to, to.conn.id());
        replies.extend(to.receive(m.letter));
    }
    replies
}

const NAMES: u32 = filter::FILE_NAME | filter::DIR_NAME;

#[test]
fn a_waiting_request_hears_of_a_file_another_client_creates() {
    let (mut a, mut b, dir) = setup();
    let r = a.call(notify_request(dir, NAMES | filter::LAST_WRITE, false, 4096));
    assert_eq!(r.status(), status::PENDING, "nothing yet: it waits");
    let f = b.create("docs\\report.txt", false).unwrap();
    let replies = post(&mut b, &mut a);
    assert_eq!(replies.len(), 1);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::ADDED, "report.txt".into())]
    );
    // Kept while no request waits: a write and close, a rename.
    let written = Request::new(command::WRITE, 1, |w| {
        copyless_proto::client::write_write_request_head(w, f, 0, 1, 0);
        w.u8(1);
    });
    assert_eq!(b.call(written).status(), status::SUCCESS);
    assert_eq!(b.close(f), status::SUCCESS);
    post(&mut b, &mut a);
    let r = a.call(notify_request(dir, NAMES, false, 4096));
    assert_eq!(
        notify_entries(&r),
        vec![(action::MODIFIED, "report.txt".into())],
        "the first request's filter stays: names and writes"
    );
}

#[test]
fn the_watch_takes_its_subtree_only_when_asked() {
    let (mut a, mut b, dir) = setup();
    assert_eq!(
        a.call(notify_request(dir, NAMES, true, 4096)).status(),
        status::PENDING
    );
    b.create("docs\\2027", true).unwrap();
    b.create("docs\\2027\\plan.txt", false).unwrap();
    let replies = post(&mut b, &mut a);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::ADDED, "2027".into())]
    );
    let r = a.call(notify_request(dir, NAMES, true, 4096));
    assert_eq!(
        notify_entries(&r),
        vec![(action::ADDED, "2027\\plan.txt".into())]
    );

    let shallow = a.create("docs", true).unwrap();
    assert_eq!(
        a.call(notify_request(shallow, NAMES, false, 4096)).status(),
        status::PENDING
    );
    b.create("docs\\2027\\deeper.txt", false).unwrap();
    let replies = post(&mut b, &mut a);
    assert!(
        replies.is_empty(),
        "only the recursive watch hears of it, and keeps it"
    );
}

#[test]
fn more_than_the_buffer_holds_is_enum_dir() {
    let (mut a, mut b, dir) = setup();
    // The first request sets a buffer of 40 bytes: two short entries.
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 40)).status(),
        status::PENDING
    );
    b.create("docs\\a", false).unwrap();
    post(&mut b, &mut a);
    for name in ["docs\\b", "docs\\c", "docs\\d"] {
        b.create(name, false).unwrap();
    }
    post(&mut b, &mut a);
    let r = a.call(notify_request(dir, NAMES, false, 4096));
    assert_eq!(r.status(), status::NOTIFY_ENUM_DIR);
    // The overflow is reported once; then the watch goes on.
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::PENDING
    );
}

#[test]
fn closing_the_directory_or_deleting_it_ends_the_request() {
    let (mut a, mut b, dir) = setup();
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::PENDING
    );
    let replies = a.send(vec![close_request(dir)]);
    let statuses: Vec<u32> = replies.iter().map(Reply::status).collect();
    assert!(statuses.contains(&status::NOTIFY_CLEANUP), "{statuses:x?}");

    let dir = a.create("docs", true).unwrap();
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::PENDING
    );
    // Another client removes the directory: deletion becomes pending
    // while a's open keeps it.
    let gone = b
        .open(create_request_with("docs", 0x0001_0000, 7, 1, 0x1001))
        .unwrap();
    assert_eq!(b.close(gone), status::SUCCESS);
    let replies = post(&mut b, &mut a);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::DELETE_PENDING);
}

#[test]
fn a_request_that_comes_after_its_directory_was_doomed_ends_at_once() {
    // smb2.notify.rmdir3 sends its request and, before the server has it,
    // deletes the directory through another connection.
    let (mut a, mut b, dir) = setup();
    let gone = b
        .open(create_request_with("docs", 0x0001_0000, 7, 1, 0x1001))
        .unwrap();
    assert_eq!(b.close(gone), status::SUCCESS);
    post(&mut b, &mut a);
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::DELETE_PENDING
    );
    assert_eq!(a.close(dir), status::SUCCESS);
}

#[test]
fn a_file_handle_cannot_be_watched() {
    let (mut a, _b, _dir) = setup();
    let f = a.create("docs\\f", false).unwrap();
    assert_eq!(
        a.call(notify_request(f, NAMES, false, 4096)).status(),
        status::INVALID_PARAMETER
    );
}

/// CREATE of a folder with the creator's descriptor: a DACL that lets
/// only `sid` in.
fn folder_only_for(c: &mut Client, name: &str, sid: &[u8]) -> FileId {
    let sd = Descriptor {
        control: SE_DACL_PRESENT,
        dacl: Some(vec![Ace::new(
            ACCESS_ALLOWED_ACE_TYPE,
            OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
            FILE_ALL_ACCESS,
            sid,
        )]),
        ..Descriptor::default()
    };
    let contexts = cc::build_chain(&[(cc::SECD, sd.encode(ALL_PARTS))]);
    c.open(create_request_from(&CreateParams {
        oplock_level: 0,
        desired_access: FILE_ALL_ACCESS,
        file_attributes: 0,
        share_access: 7,
        disposition: 2,
        options: 1,
        name,
        contexts: &contexts,
    }))
    .unwrap()
}

#[test]
fn a_tree_watcher_hears_nothing_beneath_a_folder_its_dacl_keeps_it_out_of() {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    users.add("bob", "pw");
    users.link("alice", 1001, 1001, vec![1001]);
    users.link("bob", 1002, 1002, vec![1002]);
    let mut config = config();
    config.act_as_users = true;
    let (server, vfs) = memory_server(config, users);
    // A share root everyone may write, as a family share's is.
    vfs.set_owner("", 0, 0, 0o777).unwrap();
    let mut alice = Client::login(server.clone(), "alice", "pw");
    let mut bob = Client::login(server.clone(), "bob", "pw");
    let private = folder_only_for(&mut alice, "private", &sids::unix_user(1001));
    alice.close(private);
    alice.create("shared", true).unwrap();
    let root = bob.create("", true).unwrap();
    assert_eq!(
        bob.call(notify_request(root, NAMES, true, 4096)).status(),
        status::PENDING
    );
    alice.create("private\\salary.xlsx", false).unwrap();
    alice.create("private\\deeper", true).unwrap();
    alice.create("private\\deeper\\letter.txt", false).unwrap();
    assert!(
        post(&mut alice, &mut bob).is_empty(),
        "bob may not list alice's folder: he hears nothing of it"
    );
    alice.create("shared\\plan.txt", false).unwrap();
    let replies = post(&mut alice, &mut bob);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::ADDED, "shared\\plan.txt".into())],
        "what bob may list is reported, and only that"
    );
    // alice, whom the DACL lets in, hears of her own folder.
    assert_eq!(bob.close(root), status::SUCCESS);
    let mut watching = Client::login(server, "alice", "pw");
    let mine = watching.create("", true).unwrap();
    assert_eq!(
        watching
            .call(notify_request(mine, NAMES, true, 4096))
            .status(),
        status::PENDING
    );
    alice.create("private\\bonus.xlsx", false).unwrap();
    let replies = post(&mut alice, &mut watching);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::ADDED, "private\\bonus.xlsx".into())]
    );
}

#[test]
fn a_server_that_serves_no_change_notify_says_it_is_not_implemented() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let mut off = config();
    off.change_notify = false;
    let (server, _vfs) = memory_server(off, users);
    let mut a = Client::login(server, "u", "pw");
    let dir = a.create("docs", true).unwrap();
    let r = a.call(notify_request(dir, NAMES, true, 4096));
    assert_eq!(r.status(), status::NOT_IMPLEMENTED);
    assert_eq!(a.close(dir), status::SUCCESS);
}
