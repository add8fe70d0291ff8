//! Directory enumerations keep only names, and a connection's listings
//! stay within max_listing_bytes: past it, the other enumerations drop
//! theirs and list the directory again when they go on, finding their
//! place by name. Each listing is charged to its user in the server's
//! ledger, exactly, until its enumeration ends, closes or its connection
//! goes; past a user's cap a listing serves one request. Driven in memory
//! by a scripted client.

use std::sync::Arc;

use copyless_core::ServerConfig;
use copyless_proto::client as wire;
use copyless_proto::messages::{FileId, QD_RESTART_SCANS};
use copyless_proto::{command, status};
use copyless_scripted::{names_in, Client, Request, Users};

const FILE_NAMES_INFORMATION: u8 = 12;

/// One QUERY_DIRECTORY: the names it returned, or its status.
fn query(c: &mut Client, id: FileId, flags: u8, len: u32) -> Result<Vec<String>, u32> {
    let r = c.call(Request::new(command::QUERY_DIRECTORY, 1, |w| {
        wire::write_query_directory_request(w, FILE_NAMES_INFORMATION, flags, id, "*", len).unwrap()
    }));
    match r.status() {
        status::SUCCESS => Ok(names_in(wire::buffer_response_data(&r.msg).unwrap())),
        s => Err(s),
    }
}

/// Enumerates folders "one" and "two" (300 files each) on one connection
/// with small buffers, taking turns, under `bound`; while it runs, one
/// file of "one" is removed and one added. Returns what "one" listed and
/// how many names "two" listed.
fn enumerate_two(bound: usize) -> (Vec<String>, usize, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for d in ["one", "two"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
        for i in 0..300 {
            let name = format!("file-{i:04}-with-a-longer-name.txt");
            std::fs::write(dir.path().join(d).join(&name), b"x").unwrap();
            if d == "one" {
                names.push(name);
            }
        }
    }
    names.sort();
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let config = ServerConfig {
        limits: copyless_core::Limits {
            max_listing_bytes: bound,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let server = copyless_scripted::server(dir.path(), config, users);
    let mut c = Client::login(server, "alice", "pw");
    let one = c.create("one", true).unwrap();
    let two = c.create("two", true).unwrap();
    let mut got = [Vec::new(), Vec::new()];
    let mut done = [false, false];
    let removed = dir.path().join("one").join(&names[100]);
    let added = dir.path().join("one").join("file-9999-added.txt");
    while !done.iter().all(|d| *d) {
        for (i, id) in [one, two].into_iter().enumerate() {
            if done[i] {
                continue;
            }
            match query(&mut c, id, 0, 1024) {
                Ok(names) => got[i].extend(names),
                Err(s) => {
                    assert_eq!(s, status::NO_MORE_FILES);
                    done[i] = true;
                }
            }
        }
        if got[0].len() >= 30 && removed.exists() {
            std::fs::remove_file(&removed).unwrap();
            std::fs::write(&added, b"x").unwrap();
        }
    }
    let [one_names, two_names] = got;
    let mut want: Vec<String> = vec![".".into(), "..".into()];
    want.extend(names.iter().filter(|n| **n != names[100]).cloned());
    // A restart lists afresh.
    let again = query(&mut c, one, QD_RESTART_SCANS, 65536).unwrap();
    assert_eq!(again.len(), 302, "after a restart");
    (one_names, two_names.len(), want)
}

#[test]
fn listings_dropped_past_the_bound_resume_where_they_were() {
    // Each listing is about 10 KiB: two cannot be kept at once, so each
    // query drops the other folder's listing, and it is taken again: the
    // file added meanwhile (after the place it had reached) shows.
    let (one, two, mut want) = enumerate_two(12 * 1024);
    want.push("file-9999-added.txt".into());
    assert_eq!(one, want);
    assert_eq!(two, 302);
}

#[test]
fn listings_within_the_bound_are_kept() {
    // The same with room for both: the listing taken at the start is
    // kept, so the added file does not show. Either way the removed one
    // does not.
    let (one, two, want) = enumerate_two(1 << 20);
    assert_eq!(one, want);
    assert_eq!(two, 302);
}

#[test]
fn a_pattern_for_one_name_finds_it() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..50 {
        std::fs::write(dir.path().join(format!("f{i}")), b"x").unwrap();
    }
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let server = copyless_scripted::server(dir.path(), copyless_scripted::config(), users);
    let mut c = Client::login(server, "alice", "pw");
    let root = c.create("", true).unwrap();
    let r = c.call(Request::new(command::QUERY_DIRECTORY, 1, |w| {
        wire::write_query_directory_request(w, FILE_NAMES_INFORMATION, 0, root, "F17", 4096)
            .unwrap()
    }));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(
        names_in(wire::buffer_response_data(&r.msg).unwrap()),
        ["f17"]
    );
}

/// A server over a directory with folders "one" and "two" of 300 names,
/// users alice and bob, and the listing caps given; and what a listing of
/// one such folder takes in the ledger.
fn capped(per_user: usize, total: usize) -> (tempfile::TempDir, Arc<copyless_core::Server>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = 0;
    for d in ["one", "two"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
        for i in 0..300 {
            let name = format!("file-{i:04}-with-a-longer-name.txt");
            std::fs::write(dir.path().join(d).join(&name), b"x").unwrap();
            if d == "one" {
                // The name and where it ends.
                bytes += name.len() + 4;
            }
        }
    }
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    users.add("bob", "pw");
    let config = ServerConfig {
        limits: copyless_core::Limits {
            max_listing_bytes_per_user: per_user,
            max_listing_bytes_total: total,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let server = copyless_scripted::server(dir.path(), config, users);
    (dir, server, bytes)
}

/// Every name an enumeration returns, 1 KiB at a time.
fn all_names(c: &mut Client, id: FileId) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        match query(c, id, 0, 1024) {
            Ok(got) => names.extend(got),
            Err(s) => {
                assert_eq!(s, status::NO_MORE_FILES);
                return names;
            }
        }
    }
}

#[test]
fn listings_are_charged_to_their_user_and_given_back_exactly() {
    let (_dir, server, one_listing) = capped(64 << 20, 256 << 20);
    let ledger = server.listing_ledger.clone();
    let mut first = Client::login(server.clone(), "alice", "pw");
    let mut second = Client::login(server.clone(), "alice", "pw");
    let mut bob = Client::login(server, "bob", "pw");
    let a = first.create("one", true).unwrap();
    query(&mut first, a, 0, 1024).unwrap();
    assert_eq!(
        ledger.of_user("alice"),
        one_listing,
        "the listing, to the byte"
    );
    let b = second.create("two", true).unwrap();
    query(&mut second, b, 0, 1024).unwrap();
    let c = bob.create("one", true).unwrap();
    query(&mut bob, c, 0, 1024).unwrap();
    assert_eq!(
        (ledger.of_user("ALICE"), ledger.of_user("bob")),
        (2 * one_listing, one_listing),
        "one user over two connections"
    );
    assert_eq!(ledger.total(), 3 * one_listing);
    // An enumeration that ends gives its listing back; so does a close,
    // and a connection that goes.
    all_names(&mut first, a);
    assert_eq!(ledger.of_user("alice"), one_listing);
    assert_eq!(bob.close(c), status::SUCCESS);
    assert_eq!(ledger.of_user("bob"), 0);
    second.conn.shutdown();
    assert_eq!((ledger.total(), ledger.users()), (0, 0));
}

#[test]
fn past_the_users_cap_listings_serve_one_request_and_go() {
    // Room for one listing of alice's; the server has room for more.
    let (_dir, server, one_listing) = capped(one_and_a_half(), 1 << 20);
    let ledger = server.listing_ledger.clone();
    let mut first = Client::login(server.clone(), "alice", "pw");
    let mut second = Client::login(server.clone(), "alice", "pw");
    let a = first.create("one", true).unwrap();
    query(&mut first, a, 0, 1024).unwrap();
    assert_eq!(ledger.of_user("alice"), one_listing);
    // alice's other connection lists all the same, one request at a time,
    // in order, and holds nothing between requests.
    let b = second.create("two", true).unwrap();
    let mut got = Vec::new();
    loop {
        match query(&mut second, b, 0, 1024) {
            Ok(names) => got.extend(names),
            Err(s) => {
                assert_eq!(s, status::NO_MORE_FILES);
                break;
            }
        }
        assert_eq!(ledger.of_user("alice"), one_listing, "nothing more kept");
    }
    let mut want: Vec<String> = (0..300)
        .map(|i| format!("file-{i:04}-with-a-longer-name.txt"))
        .collect();
    want.insert(0, "..".into());
    want.insert(0, ".".into());
    assert_eq!(got, want);
    // bob is not held back by alice's cap.
    let mut bob = Client::login(server, "bob", "pw");
    let c = bob.create("one", true).unwrap();
    query(&mut bob, c, 0, 1024).unwrap();
    assert_eq!(ledger.of_user("bob"), one_listing);
    first.conn.shutdown();
    bob.conn.shutdown();
    assert_eq!(ledger.total(), 0);
}

/// A cap that holds one listing of 300 names, not two.
fn one_and_a_half() -> usize {
    300 * ("file-0000-with-a-longer-name.txt".len() + 4) * 3 / 2
}

#[test]
fn changed_caps_apply_to_the_next_listing_and_take_nothing_away() {
    let (_dir, server, one_listing) = capped(64 << 20, 256 << 20);
    let ledger = server.listing_ledger.clone();
    let mut first = Client::login(server.clone(), "alice", "pw");
    let mut second = Client::login(server.clone(), "alice", "pw");
    let a = first.create("one", true).unwrap();
    query(&mut first, a, 0, 1024).unwrap();
    // A reload lowers alice's cap below what she holds.
    let lowered = copyless_core::Limits {
        max_listing_bytes_per_user: one_listing / 2,
        ..copyless_scripted::limits()
    };
    server.set_limits(lowered);
    let b = second.create("two", true).unwrap();
    query(&mut second, b, 0, 1024).unwrap();
    assert_eq!(
        ledger.of_user("alice"),
        one_listing,
        "what she held stays; the new listing is not kept"
    );
    server.set_limits(copyless_scripted::limits());
    query(&mut second, b, 0, 1024).unwrap();
    assert!(ledger.of_user("alice") > one_listing, "raised: kept again");
}
