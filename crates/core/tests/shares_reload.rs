//! Shares changed while clients are connected (a reload): an added share
//! can be connected to by a session that already exists, and a removed
//! or replaced one ends its tree connects, with their opens, at their
//! next request.

use std::sync::Arc;

use copyless_core::{Share, ShareAccess};
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Request, Users};

fn tree_connect(c: &mut Client, share: &str) -> u32 {
    let req = Request::new(command::TREE_CONNECT, 1, |w| {
        wire::write_tree_connect_request(w, &format!("\\\\server\\{share}")).unwrap()
    });
    let r = c.call(req);
    if r.status() == status::SUCCESS {
        c.tree_id = r.header.tree_id;
    }
    r.status()
}

#[test]
fn added_shares_serve_at_once_and_removed_ones_end_their_trees() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let (server, vfs) = memory_server(config(), users);
    let mut c = Client::login(server.clone(), "alice", "alice-pw");
    let first_tree = c.tree_id;
    let held = c.create("held.txt", false).unwrap();
    assert_eq!(tree_connect(&mut c, "more"), status::BAD_NETWORK_NAME);

    let index = server.shares.next_index();
    server.shares.put(
        index,
        Some(Share {
            name: "more".into(),
            vfs: vfs.clone(),
            read_only: false,
            path: "memory".into(),
            comment: String::new(),
            names: Default::default(),
            owner: None,
            access: ShareAccess::default(),
            audit: Default::default(),
            snapshots: None,
            recycle: None,
        }),
    );
    assert_eq!(tree_connect(&mut c, "more"), status::SUCCESS);
    let more_tree = c.tree_id;
    assert!(c.create("via-more.txt", false).is_ok());

    // The first share goes: its tree connect ends at its next request,
    // and the file held open through it is closed.
    let (first, _) = server.shares.find("share").unwrap();
    server.shares.put(first, None);
    c.tree_id = first_tree;
    assert_eq!(
        c.create("late.txt", false).unwrap_err(),
        status::NETWORK_NAME_DELETED
    );
    assert!(server.status().opens.iter().all(|o| o.path != "held.txt"));
    assert_eq!(c.close(held), status::NETWORK_NAME_DELETED);
    // The other share is untouched.
    c.tree_id = more_tree;
    assert!(c.create("still.txt", false).is_ok());
}
