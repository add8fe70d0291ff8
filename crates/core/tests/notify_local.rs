//! Changes local processes make (copyless_core::local): the engine hands
//! them in as share paths and gets letters for the watchers back; it is
//! told when the set of watched directories changes; and what the server
//! itself did is not reported a second time.

use std::sync::{Arc, Mutex};

use copyless_core::local::{LocalChange, LocalWatch, WatchedDir, What};
use copyless_core::{Message, Server};
use copyless_fscc::notify::{action, filter};
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::messages::FileId;
use copyless_proto::status;
use copyless_scripted::{
    close_request, config, memory_server, notify_entries, notify_request, Client, Reply, Request,
    Users,
};

const NAMES: u32 = filter::FILE_NAME | filter::DIR_NAME;

fn setup() -> (Arc<Server>, Client, Client, FileId) {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let mut a = Client::login(server.clone(), "u", "pw");
    let b = Client::login(server.clone(), "u", "pw");
    let dir = a.create("docs", true).unwrap();
    (server, a, b, dir)
}

fn change(path: &str, what: What) -> LocalChange {
    LocalChange {
        share: 0,
        path: path.into(),
        what,
    }
}

/// Hands letters the engine would post to `to`.
fn deliver(letters: Vec<Message>, to: &mut Client) -> Vec<Reply> {
    let mut replies = Vec::new();
    for m in letters {
        assert_eq!(m.to, to.conn.id());
        replies.extend(to.receive(m.letter));
    }
    replies
}

/// Lets the letters `from` posted reach `to`.
fn post(from: &mut Client, to: &mut Client) -> Vec<Reply> {
    deliver(std::mem::take(&mut from.posted), to)
}

#[test]
fn local_changes_reach_a_watcher_as_the_servers_own_do() {
    let (server, mut a, _b, dir) = setup();
    assert_eq!(
        a.call(notify_request(dir, NAMES, true, 4096)).status(),
        status::PENDING
    );
    let letters = server.local_changes(&[
        change("elsewhere.txt", What::Added { is_dir: false }),
        change("docs/new.txt", What::Added { is_dir: false }),
        change("docs/a.txt", What::RenamedFrom { is_dir: false }),
        change("docs/sub/b.txt", What::RenamedTo { is_dir: false }),
        // Not a name change: this watcher's filter leaves it out.
        change("docs/new.txt", What::Written),
    ]);
    assert_eq!(letters.len(), 1, "one letter keeps the rename together");
    let replies = deliver(letters, &mut a);
    assert_eq!(replies.len(), 1);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![
            (action::ADDED, "new.txt".into()),
            (action::RENAMED_OLD_NAME, "a.txt".into()),
            (action::RENAMED_NEW_NAME, "sub\\b.txt".into()),
        ]
    );
}

#[test]
fn writes_and_metadata_go_to_watchers_whose_filter_takes_them() {
    let (server, mut a, _b, dir) = setup();
    let filter = filter::LAST_WRITE;
    assert_eq!(
        a.call(notify_request(dir, filter, false, 4096)).status(),
        status::PENDING
    );
    assert!(server
        .local_changes(&[change("docs/x", What::Added { is_dir: false })])
        .is_empty());
    let replies = deliver(
        server.local_changes(&[change("docs/x", What::Written)]),
        &mut a,
    );
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::MODIFIED, "x".into())]
    );
    a.call(notify_request(dir, filter, false, 4096));
    let replies = deliver(
        server.local_changes(&[change("docs/x", What::Attributes)]),
        &mut a,
    );
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::MODIFIED, "x".into())]
    );
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<Vec<WatchedDir>>>,
}

impl LocalWatch for Recorder {
    fn watched_changed(&self, server: &Server) {
        self.seen.lock().unwrap().push(server.watched_dirs());
    }

    fn share_changed(&self, _index: usize, _path: Option<&str>) {}
}

#[test]
fn the_engine_is_told_when_the_watched_set_changes() {
    let (server, mut a, _b, dir) = setup();
    let recorder = Arc::new(Recorder::default());
    server.set_local_watch(recorder.clone());
    a.call(notify_request(dir, NAMES, true, 4096));
    // A second request on the same open changes nothing.
    a.call(notify_request(dir, NAMES, true, 4096));
    {
        let seen = recorder.seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].len(), 1);
        assert_eq!(seen[0][0].path, "docs");
        assert!(seen[0][0].recursive);
    }
    let replies = a.send(vec![close_request(dir)]);
    assert!(replies.iter().any(|r| r.status() == status::NOTIFY_CLEANUP));
    let seen = recorder.seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(seen[1].is_empty(), "closing the last watcher empties it");
}

#[test]
fn what_the_server_did_itself_is_not_reported_again() {
    let (server, mut a, mut b, dir) = setup();
    server.own_changes().set_active(true);
    a.call(notify_request(dir, NAMES | filter::LAST_WRITE, false, 4096));
    let f = b.create("docs\\report.txt", false).unwrap();
    let replies = post(&mut b, &mut a);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::ADDED, "report.txt".into())]
    );
    // The kernel's report of the same creation, read by a drain that
    // began before or just after the creation ended.
    server.own_changes().drain_begins();
    let created = [change("docs/report.txt", What::Added { is_dir: false })];
    assert!(server.local_changes(&created).is_empty());
    // While the server holds it open for writing, a write is its own.
    let written = [change("docs/report.txt", What::Written)];
    assert!(server.local_changes(&written).is_empty());
    assert_eq!(b.close(f), status::SUCCESS);
    server.own_changes().drain_begins();
    assert!(
        server.local_changes(&written).is_empty(),
        "a write just before the close is still the server's"
    );
    // Once a drain has begun and ended after the close, the marks are
    // gone: a later event with the same name is a local process's.
    server.own_changes().drain_begins();
    server.own_changes().drain_begins();
    assert!(server.own_changes().is_empty());
    a.call(notify_request(dir, NAMES | filter::LAST_WRITE, false, 4096));
    let replies = deliver(server.local_changes(&written), &mut a);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![(action::MODIFIED, "report.txt".into())]
    );
}

#[test]
fn the_servers_rename_marks_both_names() {
    let (server, mut a, mut b, dir) = setup();
    server.own_changes().set_active(true);
    let f = b.create("docs\\old.txt", false).unwrap();
    assert_eq!(b.close(f), status::SUCCESS);
    server.own_changes().drain_begins();
    server.own_changes().drain_begins();
    a.call(notify_request(dir, NAMES, false, 4096));
    let f = b
        .open(copyless_scripted::create_request_with(
            "docs\\old.txt",
            0x0011_0080,
            7,
            1,
            0x40,
        ))
        .unwrap();
    // FILE_RENAME_INFORMATION.
    let name = copyless_proto::utf16::encode("docs\\New.txt");
    let mut info = vec![0u8; 20];
    info[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    info.extend_from_slice(&name);
    let rename = Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, 1, 10, 0, f, &info).unwrap()
    });
    assert_eq!(b.call(rename).status(), status::SUCCESS);
    let replies = post(&mut b, &mut a);
    assert_eq!(
        notify_entries(&replies[0]),
        vec![
            (action::RENAMED_OLD_NAME, "old.txt".into()),
            (action::RENAMED_NEW_NAME, "New.txt".into()),
        ]
    );
    a.call(notify_request(dir, NAMES, false, 4096));
    let moved = [
        change("docs/old.txt", What::RenamedFrom { is_dir: false }),
        change("docs/New.txt", What::RenamedTo { is_dir: false }),
    ];
    assert!(server.local_changes(&moved).is_empty());
}

#[test]
fn a_lost_event_queue_is_enum_dir_for_every_watcher() {
    let (server, mut a, _b, dir) = setup();
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::PENDING
    );
    let replies = deliver(server.local_overflow(), &mut a);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::NOTIFY_ENUM_DIR);
    // The next request waits again.
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 4096)).status(),
        status::PENDING
    );
}

/// An SMB 3.1.1 CREATE of directory `name` with a v2 lease asking for
/// read and handle caching under `key`.
fn leased_dir(name: &str, key: [u8; 16]) -> Request {
    use copyless_proto::create_context as cc;
    use copyless_proto::lease::{LeaseContext, HANDLE_CACHING, READ_CACHING};
    let lease = LeaseContext {
        key,
        state: READ_CACHING | HANDLE_CACHING,
        flags: 0,
        v2: Some(([0; 16], 0)),
    }
    .encode();
    let contexts = cc::build_chain(&[(cc::RQLS, lease)]);
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: 0xff,
        desired_access: 0x0012_0089,
        file_attributes: 0,
        share_access: 7,
        disposition: 3,
        options: 1,
        name,
        contexts: &contexts,
    })
}

#[test]
fn a_local_change_in_a_leased_directory_breaks_its_lease() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    let recorder = Arc::new(Recorder {
        seen: Mutex::new(Vec::new()),
    });
    server.set_local_watch(recorder.clone());
    let mut a = Client::login_with(
        server.clone(),
        copyless_scripted::Dialect::Smb311,
        "u",
        "pw",
    );
    let r = a.call(leased_dir("docs", [7; 16]));
    assert_eq!(r.status(), status::SUCCESS);
    let dir = wire::CreateReply::parse(&r.msg).unwrap().file_id;
    assert!(
        server.watched_dirs().iter().any(|d| d.path == "docs"),
        "a leased directory is watched for local changes"
    );
    assert_eq!(
        recorder.seen.lock().unwrap().len(),
        1,
        "and the engine was told"
    );
    assert!(server
        .local_changes(&[change("elsewhere", What::Added { is_dir: false })])
        .is_empty());
    let letters = server.local_changes(&[change("docs/new", What::Added { is_dir: false })]);
    let notices = deliver(letters, &mut a);
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].header.command, command::OPLOCK_BREAK);
    let body = &notices[0].msg[64..];
    assert_eq!(&body[8..24], &[7; 16], "the directory's lease");
    assert_eq!(
        u32::from_le_bytes(body[28..32].try_into().unwrap()),
        0,
        "broken to nothing"
    );
    assert_eq!(a.close(dir), status::SUCCESS);
    assert!(server.watched_dirs().is_empty(), "no lease, no watch");
}

#[test]
fn a_busy_disk_is_reported_to_a_watcher_up_to_a_bound_then_as_enum_dir() {
    let (server, mut a, _b, dir) = setup();
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 65536)).status(),
        status::PENDING
    );
    let few: Vec<LocalChange> = (0..10)
        .map(|i| change(&format!("docs/{i}"), What::Added { is_dir: false }))
        .collect();
    let replies = deliver(server.local_changes(&few), &mut a);
    assert_eq!(notify_entries(&replies[0]).len(), 10, "a few fit");
    assert_eq!(
        a.call(notify_request(dir, NAMES, false, 65536)).status(),
        status::PENDING
    );
    // Short names: a thousand would fit the client's buffer, but the
    // server keeps no more than its bound for one watcher.
    let many: Vec<LocalChange> = (0..1000)
        .map(|i| change(&format!("docs/{i}"), What::Added { is_dir: false }))
        .collect();
    let replies = deliver(server.local_changes(&many), &mut a);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::NOTIFY_ENUM_DIR);
}
