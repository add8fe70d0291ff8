//! Requests on one connection that name a session another connection
//! holds: binds (SMB 3 multichannel), the requests of a bound channel,
//! which its session's home runs, and strays. A refusal carries the
//! status Windows gives, signed so that the client trusts it.

use std::sync::Arc;

use copyless_core::Server;
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::header::{Header, FLAG_SIGNED};
use copyless_proto::status;
use copyless_scripted::{
    config, create_request, memory_server, read_request, write_request, Client, Dialect, Reply,
    Request, Users,
};

fn server() -> Arc<Server> {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users.add("bob", "bob-pw");
    memory_server(config(), users).0
}

/// Sends `frame` on `channel` and carries the letters between it and
/// `home`, as the engine does, until none are left; returns what
/// `channel`'s client received.
fn relayed(home: &mut Client, channel: &mut Client, frame: &[u8]) -> Vec<Reply> {
    let mut replies = channel.handle_frame(frame);
    loop {
        let to_home = std::mem::take(&mut channel.posted);
        let to_channel = std::mem::take(&mut home.posted);
        if to_home.is_empty() && to_channel.is_empty() {
            return replies;
        }
        for m in to_home {
            assert_eq!(m.to, home.conn.id());
            assert!(
                home.receive(m.letter).is_empty(),
                "nothing goes out at home"
            );
        }
        for m in to_channel {
            assert_eq!(m.to, channel.conn.id());
            replies.extend(channel.receive(m.letter));
        }
    }
}

fn create_on(home: &mut Client, channel: &mut Client, name: &str) -> u32 {
    let frame = channel.frame(vec![create_request(name, false)]);
    let mut replies = relayed(home, channel, &frame);
    assert_eq!(replies.len(), 1);
    replies.remove(0).status()
}

#[test]
fn a_bound_channel_serves_the_session_until_either_goes() {
    let server = server();
    let mut home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut channel = Client::negotiated(server.clone(), Dialect::Smb311);
    channel.bind(&home, "alice", "alice-pw").unwrap();
    assert!(channel.conn.has_valid_session());
    // Signed with the channel's key (the scripted client checks it), run
    // at home: the session's tree connect serves it.
    assert_eq!(create_on(&mut home, &mut channel, "f"), status::SUCCESS);
    assert_eq!(home.create("f", false).map(|_| ()), Ok(()));
    // A request signed with the session's key is not the channel's.
    let frame = channel.frame_as(&home, vec![create_request("g", false)]);
    let r = relayed(&mut home, &mut channel, &frame);
    assert_eq!(r[0].status(), status::ACCESS_DENIED);

    // The channel going leaves the session.
    let letters = channel.conn.shutdown();
    assert_eq!(letters.len(), 1);
    for m in letters {
        home.receive(m.letter);
    }
    assert_eq!(home.create("h", false).map(|_| ()), Ok(()));

    // The session ending at home ends it on its channels.
    let mut channel = Client::negotiated(server, Dialect::Smb311);
    channel.bind(&home, "alice", "alice-pw").unwrap();
    for m in std::mem::take(&mut channel.posted) {
        home.receive(m.letter); // the new channel
    }
    let logoff = home.call(Request::new(command::LOGOFF, 1, |w| {
        w.u16(4).u16(0);
    }));
    assert_eq!(logoff.status(), status::SUCCESS);
    for m in std::mem::take(&mut home.posted) {
        channel.receive(m.letter);
    }
    assert!(!channel.conn.has_valid_session());
    let frame = channel.frame(vec![create_request("i", false)]);
    let r = relayed(&mut home, &mut channel, &frame);
    assert_eq!(r[0].status(), status::USER_SESSION_DELETED);
    assert!(
        r[0].header.is_signed(),
        "a signed request's refusal says so"
    );
}

#[test]
fn data_goes_both_ways_through_a_channel() {
    let server = server();
    let (mut home, mut channel) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
    channel.bind(&home, "alice", "alice-pw").unwrap();
    let id = home.create("f", false).unwrap();
    let frame = channel.frame(vec![write_request(id, 0, b"through the channel")]);
    let r = relayed(&mut home, &mut channel, &frame);
    assert_eq!(r[0].status(), status::SUCCESS);
    let frame = channel.frame(vec![read_request(id, 0, 64, 1)]);
    let r = relayed(&mut home, &mut channel, &frame);
    assert_eq!(r[0].status(), status::SUCCESS);
    assert!(r[0].msg.ends_with(b"through the channel"));
}

#[test]
fn a_channel_whose_home_falls_behind_stops_reading_and_is_closed_if_it_goes_on() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let mut config = config();
    config.limits.max_io_size = 65536;
    let server = memory_server(config, users).0;
    let (mut home, mut channel) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
    channel.bind(&home, "alice", "alice-pw").unwrap();
    let id = home.create("f", false).unwrap();
    // Twice the largest WRITE and 1 MiB may wait at home before the
    // engine is to stop reading; the home takes none of it here.
    let pause = 2 * 65536 + (1 << 20);
    let data = vec![7u8; 65536];
    let mut sent = 0;
    let mut letters = Vec::new();
    while channel.conn.wants_frames() {
        let frame = channel.frame(vec![write_request(id, 0, &data)]);
        assert!(channel.handle_frame(&frame).is_empty());
        letters.append(&mut channel.posted);
        sent += frame.len();
        assert!(sent < pause + frame.len(), "{sent} bytes held");
    }
    assert!(sent >= pause, "paused early, at {sent} bytes");
    // The home catching up lets it read again.
    for m in letters {
        home.receive(m.letter);
    }
    for m in std::mem::take(&mut home.posted) {
        channel.receive(m.letter);
    }
    assert!(channel.conn.wants_frames());
    // An engine that read on regardless would see the channel closed.
    sent = 0;
    while !channel.closed {
        let frame = channel.frame(vec![write_request(id, 0, &data)]);
        channel.handle_frame(&frame);
        sent += frame.len();
        assert!(sent < 2 * pause + frame.len(), "{sent} bytes held");
    }
    assert!(sent > 2 * pause, "closed early, at {sent} bytes");
}

#[test]
fn a_bind_by_another_user_or_a_wrong_password_leaves_the_session_as_it_was() {
    let server = server();
    let (mut home, mut channel) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
    assert_eq!(
        channel.bind(&home, "alice", "wrong"),
        Err(status::LOGON_FAILURE)
    );
    assert_eq!(
        channel.bind(&home, "bob", "bob-pw"),
        Err(status::ACCESS_DENIED)
    );
    assert!(!channel.conn.has_valid_session());
    assert_eq!(home.create("f", false).map(|_| ()), Ok(()));
    channel.bind(&home, "alice", "alice-pw").unwrap();
    assert_eq!(create_on(&mut home, &mut channel, "g"), status::SUCCESS);
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

/// A client logged in on `server` in `home` dialect, and a second
/// connection of it that has only negotiated `other`.
fn two_connections(server: Arc<Server>, home: Dialect, other: Dialect) -> (Client, Client) {
    let first = Client::login_with(server.clone(), home, "alice", "alice-pw");
    (first, Client::negotiated(server, other))
}

fn one(client: &mut Client, frame: &[u8]) -> Reply {
    let mut replies = client.handle_frame(frame);
    assert_eq!(replies.len(), 1);
    replies.remove(0)
}

#[test]
fn a_bind_is_refused_signed_with_the_sessions_key_when_multichannel_is_off() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let mut config = config();
    config.multichannel = false;
    let server = memory_server(config, users).0;
    let (home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
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
    let (home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb210);
    let frame = other.frame_as(&home, vec![bind_request()]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::REQUEST_OUT_OF_SEQUENCE);
    assert!(home.verifies(&r.msg));
}

#[test]
fn a_bind_from_a_gmac_connection_to_an_hmac_session_is_not_supported() {
    let server = server();
    let (home, mut other) = two_connections(server, Dialect::Smb210, Dialect::Smb311);
    let frame = other.frame_as(&home, vec![bind_request()]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::NOT_SUPPORTED);
    assert!(home.verifies(&r.msg));
}

#[test]
fn a_badly_signed_bind_is_denied_and_its_reply_not_signed_with_the_key() {
    let server = server();
    let (home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
    let mut frame = other.frame_as(&home, vec![bind_request()]);
    frame[48] ^= 1; // the signature
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::ACCESS_DENIED);
    assert!(!home.verifies(&r.msg));
}

#[test]
fn an_unsigned_bind_is_an_invalid_parameter() {
    let server = server();
    let (home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
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
    let (home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
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
    let (mut home, mut other) = two_connections(server, Dialect::Smb311, Dialect::Smb311);
    let frame = other.frame_as(&home, vec![create_request("f", false)]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(r.header.is_signed());
    assert_eq!(r.header.signature, Header::parse(&frame).unwrap().signature);
    // Nothing was created, and the session still works at home.
    assert_eq!(home.create("f", false).map(|_| ()), Ok(()));

    // A session nobody holds: the same, as Samba answers (smbtorture's
    // smb2.session-id and smb2.tcon need the signed flag back).
    home.session_id ^= 0x5555;
    let frame = other.frame_as(&home, vec![create_request("g", false)]);
    let r = one(&mut other, &frame);
    assert_eq!(r.status(), status::USER_SESSION_DELETED);
    assert!(r.header.is_signed());
    assert_eq!(r.header.signature, Header::parse(&frame).unwrap().signature);
}

/// A session has at most 32 channels, its first connection among them,
/// as on Windows; one that goes makes room for another, and a
/// re-authentication keeps the count.
#[test]
fn a_session_binds_at_most_31_more_channels() {
    let server = server();
    let mut home = Client::login_with(server.clone(), Dialect::Smb311, "alice", "alice-pw");
    let mut channels: Vec<Client> = (0..31)
        .map(|i| {
            let mut c = Client::negotiated(server.clone(), Dialect::Smb311);
            assert_eq!(c.bind(&home, "alice", "alice-pw"), Ok(()), "channel {i}");
            c
        })
        .collect();
    home.reauthenticate("alice", "alice-pw").unwrap();
    let mut more = Client::negotiated(server.clone(), Dialect::Smb311);
    assert_eq!(
        more.bind(&home, "alice", "alice-pw"),
        Err(status::INSUFFICIENT_RESOURCES)
    );
    channels.pop().unwrap().conn.shutdown();
    let mut again = Client::negotiated(server, Dialect::Smb311);
    assert_eq!(again.bind(&home, "alice", "alice-pw"), Ok(()));
}
