//! Who a session acts as on disk: its user's Unix account, or nobody.

use std::sync::Arc;

use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Users};
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
