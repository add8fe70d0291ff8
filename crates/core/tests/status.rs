//! What `copyless status` reads: each connection's sessions and tree
//! connects, and the files they hold open, as they change.

use std::sync::Arc;

use copyless_scripted::{config, memory_server, Client, Dialect, Users};

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
