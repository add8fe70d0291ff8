//! Requests on one connection that name a session another connection
//! holds: binds (SMB 3 multichannel) and strays. Binding itself is not
//! offered yet; what is checked here is that each is refused with the
//! status Windows gives, signed so that the client trusts it.

use std::sync::Arc;

use copyless_core::Server;
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::header::{Header, FLAG_SIGNED};
use copyless_proto::status;
use copyless_scripted::{config, create_request, memory_server, Client, Dialect, Request, Users};

fn server() -> Arc<Server> {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    memory_server(config(), users).0
}

/// SESSION_SETUP with the binding flag, its token never read: every
/// refusal comes before authentication.
fn bind_request() -> Request {
    let mut req = Request::new(command::SESSION_SETUP, 1, |w| {
        wire::write_session_setup_request(w, 2, 0, 0, b"NTLMSSP\0").unwrap()
    });
    req.body[2] = 1; // SMB2_SESSION_FLAG_BINDING
    req
}

fn one(client: &mut Client, frame: &[u8]) -> copyless_scripted::Reply {
    let mut replies = client.handle_frame(frame);
    assert_eq!(replies.len(), 1);
    replies.remove(0)
}

#[test]
fn a_bind_is_refused_signed_with_the_sessions_key() {
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let frame = other.frame_as(&home, vec![bind_request()]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::REQUEST_NOT_ACCEPTED);
    assert!(r.header.is_signed());
    assert!(home.verifies(&r.msg), "signed with the session's key");
    assert!(!other.closed);
}

#[test]
fn a_bind_from_another_signing_algorithm_is_out_of_sequence() {
    // The session signs with AES-GMAC; a 2.1 connection signs with HMAC.
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb210);
    let frame = other.frame_as(&home, vec![bind_request()]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::REQUEST_OUT_OF_SEQUENCE);
    assert!(home.verifies(&r.msg));
}

#[test]
fn a_bind_from_a_gmac_connection_to_an_hmac_session_is_not_supported() {
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb210, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let frame = other.frame_as(&home, vec![bind_request()]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::NOT_SUPPORTED);
    assert!(home.verifies(&r.msg));
}

#[test]
fn a_badly_signed_bind_is_denied_and_its_reply_not_signed_with_the_key() {
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let mut frame = other.frame_as(&home, vec![bind_request()]);
    frame[48] ^= 1; // the signature
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::ACCESS_DENIED);
    assert!(!home.verifies(&r.msg));
}

#[test]
fn an_unsigned_bind_is_an_invalid_parameter() {
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let mut frame = other.frame_as(&home, vec![bind_request()]);
    let mut header = Header::parse(&frame).unwrap();
    header.flags &= !FLAG_SIGNED;
    header.signature = [0; 16];
    let mut head = Vec::new();
    header.write(&mut head);
    frame[..head.len()].copy_from_slice(&head);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::INVALID_PARAMETER);
    assert!(!r.header.is_signed());
}

#[test]
fn a_session_setup_without_binding_for_another_connections_session_is_deleted_and_signed() {
    let server = server();
    let home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let mut req = bind_request();
    req.body[2] = 0;
    let frame = other.frame_as(&home, vec![req]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(home.verifies(&r.msg));
}

#[test]
fn a_signed_request_on_another_connections_session_is_deleted_with_its_signature_echoed() {
    let server = server();
    let mut home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut other = Client::negotiated(server, Dialect::Smb311);
    let frame = other.frame_as(&home, vec![create_request("f", false)]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(r.header.is_signed());
    assert_eq!(r.header.signature, Header::parse(&frame).unwrap().signature);
    // Nothing was created, and the session still works at home.
    assert_eq!(home.create("f", false).map(|_| ()), Ok(()));

    // A session nobody holds gets a plain refusal.
    home.session_id ^= 0x5555;
    let frame = other.frame_as(&home, vec![create_request("g", false)]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(!r.header.is_signed());
}
