//! A share's hosts_allow and hosts_deny decide which client addresses may
//! connect to it: others get STATUS_ACCESS_DENIED at TREE_CONNECT, as
//! Samba answers, while the rest of the server serves them.

use std::sync::Arc;

use copyless_core::hosts::HostFilter;
use copyless_core::ShareAccess;
use copyless_proto::status;
use copyless_scripted::{config, shares_over, Client, Users};
use copyless_vfs::memory::MemoryVfs;

fn users() -> Arc<Users> {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users
}

#[test]
fn a_share_admits_clients_by_address() {
    let lan_only = ShareAccess {
        hosts: HostFilter {
            allow: Some(vec!["192.168.1.0/24".parse().unwrap()]),
            deny: Vec::new(),
        },
        ..ShareAccess::default()
    };
    let not_loopback = ShareAccess {
        hosts: HostFilter {
            allow: None,
            deny: vec!["127.0.0.1".parse().unwrap()],
        },
        ..ShareAccess::default()
    };
    let server = shares_over(
        Arc::new(MemoryVfs::new()),
        "memory",
        config(),
        users(),
        &[
            ("open", false, ShareAccess::default()),
            ("lan", false, lan_only),
            ("remote", false, not_loopback),
        ],
    );
    for (peer, open, lan, remote) in [
        (
            "127.0.0.1:50000",
            status::SUCCESS,
            status::ACCESS_DENIED,
            status::ACCESS_DENIED,
        ),
        (
            "192.168.1.20:50000",
            status::SUCCESS,
            status::SUCCESS,
            status::SUCCESS,
        ),
        // A dual-stack listener's IPv4 client.
        (
            "[::ffff:192.168.1.20]:50000",
            status::SUCCESS,
            status::SUCCESS,
            status::SUCCESS,
        ),
        (
            "[::ffff:127.0.0.1]:50000",
            status::SUCCESS,
            status::ACCESS_DENIED,
            status::ACCESS_DENIED,
        ),
        (
            "10.0.0.1:50000",
            status::SUCCESS,
            status::ACCESS_DENIED,
            status::SUCCESS,
        ),
    ] {
        let mut c = Client::connect_from(server.clone(), peer.parse().unwrap());
        c.negotiate();
        c.session_setup("alice", "alice-pw").unwrap();
        assert_eq!(
            [
                c.tree_connect("open"),
                c.tree_connect("lan"),
                c.tree_connect("remote")
            ],
            [open, lan, remote],
            "{peer}"
        );
        // Share enumeration still goes through IPC$.
        assert_eq!(c.tree_connect("IPC$"), status::SUCCESS, "{peer}");
    }
}
