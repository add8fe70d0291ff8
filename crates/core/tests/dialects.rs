//! SMB 3.1.1 in memory: pre-authentication integrity, AES-GMAC signing
//! and AES-128-GCM encryption, as the scripted client speaks them (it
//! checks every reply's signature and decrypts every sealed reply).

use std::sync::Arc;

use copyless_proto::client as wire;
use copyless_proto::status;
use copyless_scripted::{create_request, read_request, write_request, Client, Dialect, Users};

fn login(dir: &std::path::Path) -> Client {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let server = copyless_scripted::server(dir, copyless_scripted::config(), users);
    Client::login_with(server, Dialect::Smb311, "alice", "pw")
}

#[test]
fn signed_requests_in_smb311() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = login(dir.path());
    let id = c.create("f.txt", false).unwrap();
    assert_eq!(
        c.call(write_request(id, 0, b"signed")).status(),
        status::SUCCESS
    );
    let r = c.call(read_request(id, 0, 6, 1));
    assert_eq!(wire::read_response_data(&r.msg).unwrap(), b"signed");
    assert!(r.header.is_signed());
}

#[test]
fn encrypted_requests_get_encrypted_replies() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = login(dir.path());
    let frame = c.frame(vec![create_request("g.txt", false)]);
    let sealed = c.seal(&frame).expect("3.1.1 has encryption keys");
    let replies = c.handle_frame(&sealed);
    assert_eq!(replies[0].status(), status::SUCCESS);
    let id = wire::CreateReply::parse(&replies[0].msg).unwrap().file_id;
    let frame = c.frame(vec![write_request(id, 0, b"sealed")]);
    let sealed = c.seal(&frame).unwrap();
    assert_eq!(c.handle_frame(&sealed)[0].status(), status::SUCCESS);
    assert_eq!(std::fs::read(dir.path().join("g.txt")).unwrap(), b"sealed");
    // A sealed frame altered on the way ends the connection.
    let frame = c.frame(vec![read_request(id, 0, 6, 1)]);
    let mut sealed = c.seal(&frame).unwrap();
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    assert!(c.handle_frame(&sealed).is_empty());
    assert!(c.closed);
}

#[test]
fn smb21_has_nothing_to_seal_with() {
    let dir = tempfile::tempdir().unwrap();
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let server = copyless_scripted::server(dir.path(), copyless_scripted::config(), users);
    let mut c = Client::login(server, "alice", "pw");
    assert!(c.seal(b"anything").is_none());
}
