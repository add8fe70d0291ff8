//! What a client controls stays bounded: credits, the size of every reply
//! and of a compound's, tree connects and opens; and a user removed from
//! the store loses its sessions. Driven in memory by a scripted client.

use std::sync::Arc;

use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::messages;
use copyless_proto::status;
use copyless_scripted::{create_request, read_request, Client, Request, Users};

const MIB: u32 = 1 << 20;
const INSUFFICIENT_RESOURCES: u32 = 0xC000_009A;

fn setup(
    config: copyless_core::ServerConfig,
) -> (tempfile::TempDir, Arc<copyless_core::Server>, Arc<Users>) {
    let dir = tempfile::tempdir().unwrap();
    let users = Arc::new(Users::default());
    users.add("alice", "pw-a");
    users.add("bob", "pw-b");
    let server = copyless_scripted::server(dir.path(), config, users.clone());
    (dir, server, users)
}

fn big_file(dir: &std::path::Path, len: usize) {
    std::fs::write(dir.join("big"), vec![7u8; len]).unwrap();
}

#[test]
fn credits_granted_in_a_compound_are_not_usable_inside_it() {
    let config = copyless_core::ServerConfig {
        limits: copyless_core::Limits {
            max_credits: 64,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let (dir, server, _) = setup(config);
    big_file(dir.path(), 4096);
    let mut c = Client::login(server, "alice", "pw-a");
    let id = c.create("big", false).unwrap();
    assert_eq!(c.credits, 64, "the client holds all it may");
    // One READ per credit held, and one more that only the grants of the
    // compound's own replies would pay for.
    let first = c.next_mid;
    let held = c.credits;
    let mut reqs = Vec::new();
    for _ in 0..=held {
        reqs.push(read_request(id, 0, 1, 1));
    }
    let replies = c.send(reqs);
    assert!(
        c.closed,
        "the request beyond the window ends the connection"
    );
    assert_eq!(
        replies.len() as u64,
        held,
        "requests within the window are answered"
    );
    assert!(replies.iter().all(|r| r.status() == status::SUCCESS));
    assert_eq!(replies[0].header.message_id, first);
}

#[test]
fn output_lengths_must_be_paid_for() {
    let (dir, server, _) = setup(copyless_scripted::config());
    big_file(dir.path(), 4096);
    let mut c = Client::login(server, "alice", "pw-a");
    let root = c.create("", true).unwrap();
    let query_dir = |charge| {
        Request::new(command::QUERY_DIRECTORY, charge, |w| {
            wire::write_query_directory_request(w, 37, 0, root, "*", 8 * MIB).unwrap()
        })
    };
    assert_eq!(c.call(query_dir(1)).status(), status::INVALID_PARAMETER);
    assert_eq!(c.call(query_dir(127)).status(), status::INVALID_PARAMETER);
    assert_eq!(c.call(query_dir(128)).status(), status::SUCCESS);
    // Beyond MaxTransactSize whatever the charge.
    let too_big = Request::new(command::QUERY_DIRECTORY, 256, |w| {
        wire::write_query_directory_request(w, 37, 1, root, "*", 16 * MIB).unwrap()
    });
    assert_eq!(c.call(too_big).status(), status::INVALID_PARAMETER);

    let query_info = |charge, len| {
        Request::new(command::QUERY_INFO, charge, |w| {
            wire::write_query_info_request(w, 1, 18, len, 0, 0, root)
        })
    };
    assert_eq!(c.call(query_info(1, 65536)).status(), status::SUCCESS);
    assert_eq!(
        c.call(query_info(1, 65537)).status(),
        status::INVALID_PARAMETER
    );
    assert_eq!(c.call(query_info(2, 65537)).status(), status::SUCCESS);

    let id = c.create("big", false).unwrap();
    assert_eq!(
        c.call(read_request(id, 0, 2 * MIB, 1)).status(),
        status::INVALID_PARAMETER
    );
    assert_eq!(
        c.call(read_request(id, 0, 2 * MIB, 32)).status(),
        status::SUCCESS
    );

    let ioctl = |charge, max_out| {
        Request::new(command::IOCTL, charge, |w| {
            w.u16(57)
                .u16(0)
                .u32(messages::FSCTL_QUERY_NETWORK_INTERFACE_INFO);
            w.u64(u64::MAX).u64(u64::MAX);
            w.u32(0)
                .u32(0)
                .u32(0)
                .u32(0)
                .u32(0)
                .u32(max_out)
                .u32(1)
                .u32(0);
        })
    };
    assert_eq!(c.call(ioctl(1, 65536)).status(), status::SUCCESS);
    assert_eq!(c.call(ioctl(1, 65537)).status(), status::INVALID_PARAMETER);
    assert_eq!(
        c.call(ioctl(1, 9 * MIB)).status(),
        status::INVALID_PARAMETER
    );
}

#[test]
fn a_compound_reply_stays_below_the_frame_limit() {
    let (dir, server, _) = setup(copyless_scripted::config());
    big_file(dir.path(), 8 * MIB as usize);
    let mut c = Client::login(server, "alice", "pw-a");
    let id = c.create("big", false).unwrap();
    // Three 8 MiB READs, each paid for: the third cannot join the other
    // two in one frame.
    let replies = c.send((0..3).map(|_| read_request(id, 0, 8 * MIB, 128)).collect());
    assert!(!c.closed);
    let statuses: Vec<u32> = replies.iter().map(|r| r.status()).collect();
    assert_eq!(
        statuses,
        [
            status::SUCCESS,
            INSUFFICIENT_RESOURCES,
            INSUFFICIENT_RESOURCES
        ]
    );
    let data = wire::read_response_data(&replies[0].msg).unwrap();
    assert_eq!(data.len(), 8 * MIB as usize);
    // The connection goes on.
    assert_eq!(c.call(read_request(id, 0, 10, 1)).status(), status::SUCCESS);
}

#[test]
fn tree_connects_are_capped_per_session() {
    let config = copyless_core::ServerConfig {
        limits: copyless_core::Limits {
            max_tree_connects: 3,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let (_dir, server, _) = setup(config);
    let mut c = Client::login(server, "alice", "pw-a");
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    assert_eq!(c.tree_connect("IPC$"), status::SUCCESS);
    assert_eq!(c.tree_connect("share"), INSUFFICIENT_RESOURCES);
    let disconnect = Request::new(command::TREE_DISCONNECT, 1, |w| {
        w.u16(4).u16(0);
    });
    assert_eq!(c.call(disconnect).status(), status::SUCCESS);
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
}

#[test]
fn opens_are_capped_per_user_and_in_all_and_come_back_on_close() {
    let config = copyless_core::ServerConfig {
        limits: copyless_core::Limits {
            max_open_files_per_user: 5,
            max_open_files_total: 8,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let (_dir, server, _) = setup(config);
    let mut alice = Client::login(server.clone(), "alice", "pw-a");
    let mut alice2 = Client::login(server.clone(), "alice", "pw-a");
    let mut bob = Client::login(server.clone(), "bob", "pw-b");
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(alice.create(&format!("a{i}"), false).unwrap());
    }
    for i in 3..5 {
        alice2.create(&format!("a{i}"), false).unwrap();
    }
    // Alice is at her cap on either connection; Bob is not affected.
    assert_eq!(alice.create("a5", false), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(alice2.create("a5", false), Err(INSUFFICIENT_RESOURCES));
    for i in 0..3 {
        bob.create(&format!("b{i}"), false).unwrap();
    }
    // The server is full: 8 opens.
    assert_eq!(bob.create("b3", false), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(server.open_quota.total(), 8);
    assert_eq!(alice.close(held.pop().unwrap()), status::SUCCESS);
    bob.create("b3", false).unwrap();
    // A connection that goes away gives its opens back.
    alice2.conn.shutdown();
    assert_eq!(server.open_quota.total(), 6);
    alice.create("a6", false).unwrap();
}

#[test]
fn opens_are_capped_per_connection() {
    let config = copyless_core::ServerConfig {
        limits: copyless_core::Limits {
            max_open_files_per_connection: 2,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let (_dir, server, _) = setup(config);
    let mut c = Client::login(server.clone(), "alice", "pw-a");
    c.create("x", false).unwrap();
    c.create("y", false).unwrap();
    assert_eq!(c.create("z", false), Err(INSUFFICIENT_RESOURCES));
    let mut other = Client::login(server, "alice", "pw-a");
    other.create("z", false).unwrap();
}

#[test]
fn a_removed_user_loses_its_sessions() {
    let (_dir, server, users) = setup(copyless_scripted::config());
    let mut alice = Client::login(server.clone(), "alice", "pw-a");
    let mut bob = Client::login(server.clone(), "bob", "pw-b");
    alice.create("held", false).unwrap();
    assert_eq!(server.open_quota.total(), 1);
    users.remove("alice");
    // Idle: the timer ends the session and closes its opens.
    assert!(
        alice.conn.timeout().is_some(),
        "a valid session asks for the timer"
    );
    alice.tick();
    assert_eq!(server.open_quota.total(), 0);
    assert_eq!(
        alice.call(create_request("again", false)).status(),
        status::USER_SESSION_DELETED
    );
    // Bob goes on; Alice cannot log in again.
    assert!(bob.create("b", false).is_ok());
    bob.tick();
    assert!(bob.create("b2", false).is_ok());
    let mut again = Client::connect(server);
    again.negotiate();
    assert_eq!(
        again.session_setup("alice", "pw-a"),
        Err(status::LOGON_FAILURE)
    );
}

/// A reload's new limits: counts are checked against them at once, on
/// connections made before too; what a connection was told in NEGOTIATE
/// (its READ size, its frame size) stays, and new connections get the new
/// values.
#[test]
fn changed_limits_apply_to_counts_at_once_and_to_sizes_on_new_connections() {
    let (dir, server, _) = setup(copyless_scripted::config());
    big_file(dir.path(), 2 * MIB as usize);
    let mut before = Client::login(server.clone(), "alice", "pw-a");
    let held = before.create("big", false).unwrap();
    before.create("second", false).unwrap();
    server.set_limits(copyless_core::Limits {
        max_message_size: MIB + 65536,
        max_io_size: MIB,
        max_tree_connects: 1,
        max_open_files: 1,
        ..copyless_scripted::limits()
    });
    // Counts: what is held stays, nothing more is given.
    assert_eq!(before.tree_connect("IPC$"), INSUFFICIENT_RESOURCES);
    assert_eq!(before.create("third", false), Err(INSUFFICIENT_RESOURCES));
    assert_eq!(
        before.call(read_request(held, 0, 10, 1)).status(),
        status::SUCCESS
    );
    // Sizes: the earlier connection keeps its 8 MiB.
    assert_eq!(before.conn.max_message_size(true), 8 * MIB as usize + 65536);
    assert_eq!(
        before.call(read_request(held, 0, 2 * MIB, 32)).status(),
        status::SUCCESS
    );
    let mut after = Client::login(server.clone(), "bob", "pw-b");
    assert_eq!(after.conn.max_message_size(true), MIB as usize + 65536);
    let id = after.create("big", false).unwrap();
    assert_eq!(
        after.call(read_request(id, 0, 2 * MIB, 32)).status(),
        status::INVALID_PARAMETER
    );
    assert_eq!(
        after.call(read_request(id, 0, MIB, 16)).status(),
        status::SUCCESS
    );
    // Raised again: more is given at once.
    server.set_limits(copyless_scripted::limits());
    before.create("third", false).unwrap();
    assert_eq!(before.tree_connect("IPC$"), status::SUCCESS);
}
