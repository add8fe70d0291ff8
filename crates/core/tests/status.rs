//! What `copyless status` reads: each connection's sessions and tree
//! connects, and the files they hold open, as they change.

use std::sync::Arc;

use copyless_core::status::LockStatus;
use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::create_context as cc;
use copyless_proto::lease::{LeaseContext, HANDLE_CACHING, READ_CACHING, WRITE_CACHING};
use copyless_proto::messages::{
    LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_SHARED, OPLOCK_LEVEL_BATCH,
    OPLOCK_LEVEL_LEASE,
};
use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Dialect, Request, Users};

#[test]
fn the_board_follows_logons_tree_connects_and_opens() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let (server, _) = memory_server(config(), users);
    assert!(server.status().connections.is_empty());

    let mut c = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let id = c.create("report.txt", false).unwrap();
    let status = server.status();
    assert_eq!(status.connections.len(), 1);
    let conn = &status.connections[0];
    assert_eq!(conn.dialect, 0x0311);
    assert_eq!(conn.sessions.len(), 1);
    let session = &conn.sessions[0];
    assert_eq!(session.user, "alice");
    assert!(session.signing_required && !session.kerberos && !session.guest);
    assert_eq!(session.trees, vec!["share".to_string()]);
    assert_eq!(status.opens.len(), 1);
    let open = &status.opens[0];
    assert_eq!(
        (open.share.as_str(), open.path.as_str()),
        ("share", "report.txt")
    );
    assert_eq!(open.session, session.id);
    assert!(!open.is_dir && !open.disconnected);

    c.close(id);
    assert!(server.status().opens.is_empty());
    let _ = c.conn.shutdown();
    assert!(server.status().connections.is_empty());
}

/// A CREATE of `name` asking for `oplock_level` (a lease when `lease`
/// names its key and caching).
fn create_asking(name: &str, oplock_level: u8, lease: Option<([u8; 16], u32)>) -> Request {
    let contexts = lease.map_or_else(Vec::new, |(key, state)| {
        let lease = LeaseContext {
            key,
            state,
            flags: 0,
            v2: Some(([0; 16], 0)),
        };
        cc::build_chain(&[(cc::RQLS, lease.encode())])
    });
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level,
        desired_access: 0x0012_019f,
        file_attributes: 0,
        share_access: 7,
        disposition: 3,
        options: 0x40,
        name,
        contexts: &contexts,
    })
}

#[test]
fn open_files_show_their_oplock_lease_and_locks() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let (server, _) = memory_server(config(), users);
    let mut c = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let r = c.call(create_asking("batch.txt", OPLOCK_LEVEL_BATCH, None));
    let batch = CreateReply::parse(&r.msg).unwrap().file_id;
    let r = c.call(create_asking(
        "leased.txt",
        OPLOCK_LEVEL_LEASE,
        Some(([5; 16], READ_CACHING | HANDLE_CACHING | WRITE_CACHING)),
    ));
    assert_eq!(r.status(), status::SUCCESS);
    // More than one range: each must fail at once rather than wait.
    let (ex, sh) = (LOCKFLAG_EXCLUSIVE, LOCKFLAG_SHARED);
    let lock = copyless_scripted::lock_request(
        batch,
        0,
        &[
            (0, 10, ex | LOCKFLAG_FAIL_IMMEDIATELY),
            (100, 1, sh | LOCKFLAG_FAIL_IMMEDIATELY),
        ],
    );
    assert_eq!(c.call(lock).status(), status::SUCCESS);

    let opens = server.status().opens;
    let [b, l] = &opens[..] else {
        panic!("two opens: {opens:?}");
    };
    assert_eq!(
        (b.path.as_str(), b.oplock, b.lease),
        ("batch.txt", OPLOCK_LEVEL_BATCH, None)
    );
    assert_eq!(
        b.locks,
        [
            LockStatus {
                offset: 0,
                length: 10,
                exclusive: true
            },
            LockStatus {
                offset: 100,
                length: 1,
                exclusive: false
            }
        ]
    );
    assert_eq!((l.path.as_str(), l.oplock), ("leased.txt", 0));
    assert_eq!(l.lease, Some(READ_CACHING | HANDLE_CACHING | WRITE_CACHING));
    assert!(l.locks.is_empty());
}
