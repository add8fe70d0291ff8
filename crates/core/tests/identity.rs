//! Who a session acts as on disk: its user's Unix account, or nobody.

use std::sync::Arc;

use copyless_core::{Principal, ShareAccess};
use copyless_proto::status;
use copyless_scripted::{config, create_request, memory_server, shares_over, Client, Users};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::Identity;

fn users() -> Arc<Users> {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users.add("bob", "bob-pw");
    users.link("alice", 1001, 1001, vec![1001, 100]);
    users
}

#[test]
fn a_session_acts_as_its_users_account() {
    let mut config = config();
    config.act_as_users = true;
    let (server, _) = memory_server(config, users());
    let mut alice = Client::connect(server.clone());
    alice.negotiate();
    alice.session_setup("alice", "alice-pw").unwrap();
    assert_eq!(
        alice.conn.session_identity(alice.session_id),
        Some(&Identity::unix(1001, 1001, vec![1001, 100]))
    );
    // bob has no Unix account: the server cannot act as him.
    let mut bob = Client::connect(server);
    bob.negotiate();
    assert_eq!(
        bob.session_setup("bob", "bob-pw"),
        Err(status::LOGON_FAILURE)
    );
}

#[test]
fn a_server_that_cannot_change_identity_acts_as_itself_for_everyone() {
    let (server, _) = memory_server(config(), users());
    for (user, password) in [("alice", "alice-pw"), ("bob", "bob-pw")] {
        let mut c = Client::connect(server.clone());
        c.negotiate();
        c.session_setup(user, password).unwrap();
        assert_eq!(
            c.conn.session_identity(c.session_id),
            Some(&Identity::Server)
        );
    }
}

/// alice in group 100, bob in 200: a memory server with one share per
/// rule under test.
fn shared(shares: &[(&str, bool, ShareAccess)]) -> Arc<copyless_core::Server> {
    let users = users();
    users.link("bob", 1002, 1002, vec![1002, 200]);
    let mut config = config();
    config.act_as_users = true;
    shares_over(Arc::new(MemoryVfs::new()), "memory", config, users, shares)
}

fn login(server: &Arc<copyless_core::Server>, user: &str) -> Client {
    let mut c = Client::connect(server.clone());
    c.negotiate();
    c.session_setup(user, &format!("{user}-pw")).unwrap();
    c
}

#[test]
fn valid_users_decide_who_may_connect() {
    let only_alice = ShareAccess {
        valid_users: Some(vec![Principal::User("Alice".into())]),
        ..ShareAccess::default()
    };
    let group_200 = ShareAccess {
        valid_users: Some(vec![Principal::Group(200)]),
        ..ShareAccess::default()
    };
    let server = shared(&[
        ("alice", false, only_alice),
        ("g200", false, group_200),
        ("all", false, ShareAccess::default()),
    ]);
    let (mut alice, mut bob) = (login(&server, "alice"), login(&server, "bob"));
    assert_eq!(alice.tree_connect("alice"), status::SUCCESS);
    assert_eq!(bob.tree_connect("alice"), status::ACCESS_DENIED);
    assert_eq!(alice.tree_connect("g200"), status::ACCESS_DENIED);
    assert_eq!(bob.tree_connect("g200"), status::SUCCESS);
    assert_eq!(alice.tree_connect("all"), status::SUCCESS);
    assert_eq!(bob.tree_connect("all"), status::SUCCESS);
}

#[test]
fn read_only_and_write_users() {
    let writers = ShareAccess {
        write_users: vec![Principal::User("alice".into())],
        ..ShareAccess::default()
    };
    let readers = ShareAccess {
        read_only_users: vec![Principal::Group(200)],
        ..ShareAccess::default()
    };
    let server = shared(&[("ro", true, writers), ("rw", false, readers)]);
    for (share, writer, reader) in [("ro", "alice", "bob"), ("rw", "alice", "bob")] {
        let mut w = login(&server, writer);
        assert_eq!(w.tree_connect(share), status::SUCCESS);
        assert!(w
            .open(create_request(&format!("{writer}.txt"), false))
            .is_ok());
        let mut r = login(&server, reader);
        assert_eq!(r.tree_connect(share), status::SUCCESS);
        assert_eq!(
            r.open(create_request(&format!("{reader}.txt"), false)),
            Err(status::ACCESS_DENIED),
            "{reader} on {share}"
        );
    }
}

#[test]
fn reauthentication_as_someone_else_keeps_opens_and_acts_as_the_new_user() {
    let readers = ShareAccess {
        read_only_users: vec![Principal::Group(200)],
        ..ShareAccess::default()
    };
    let server = shared(&[("rw", false, readers)]);
    let mut c = login(&server, "alice");
    assert_eq!(c.tree_connect("rw"), status::SUCCESS);
    let kept = c.open(create_request("alice.txt", false)).unwrap();

    c.reauthenticate("bob", "bob-pw").unwrap();
    assert_eq!(
        c.conn.session_identity(c.session_id),
        Some(&Identity::unix(1002, 1002, vec![1002, 200]))
    );
    // The tree connect stays, with bob's rights on the share.
    assert_eq!(
        c.open(create_request("bob.txt", false)),
        Err(status::ACCESS_DENIED)
    );

    c.reauthenticate("alice", "alice-pw").unwrap();
    assert!(c.open(create_request("again.txt", false)).is_ok());
    // alice's open lived through both.
    assert_eq!(c.close(kept), status::SUCCESS);
}

#[test]
fn failed_reauthentication_ends_the_session() {
    let server = shared(&[("rw", false, ShareAccess::default())]);
    let mut c = login(&server, "alice");
    assert_eq!(c.tree_connect("rw"), status::SUCCESS);
    assert_eq!(
        c.reauthenticate("alice", "wrong"),
        Err(status::LOGON_FAILURE)
    );
    assert_eq!(
        c.open(create_request("x.txt", false)),
        Err(status::USER_SESSION_DELETED)
    );
}

#[test]
fn no_session_acts_as_root_whatever_the_store_links() {
    let users = users();
    users.link("bob", 0, 0, vec![0]);
    let mut config = config();
    config.act_as_users = true;
    let (server, _) = memory_server(config, users);
    let mut bob = Client::connect(server);
    bob.negotiate();
    assert_eq!(
        bob.session_setup("bob", "bob-pw"),
        Err(status::LOGON_FAILURE)
    );
}
