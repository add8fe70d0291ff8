//! Compounds whose later messages cannot be framed: the connection ends,
//! and the replies already made still go out finished, padded and signed
//! (found by the connection fuzz target: they went out marked signed with
//! no signature). Driven in memory by a scripted client.

use std::sync::Arc;

use copyless_proto::{command, status, HEADER_LEN};
use copyless_scripted::{create_request, Client, Request, Users};

fn login() -> (tempfile::TempDir, Client) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), b"data").unwrap();
    let users = Arc::new(Users::default());
    users.add("alice", "pw-a");
    let server = copyless_scripted::server(dir.path(), copyless_scripted::config(), users);
    let client = Client::login(server, "alice", "pw-a");
    (dir, client)
}

fn echo() -> Request {
    Request::new(command::ECHO, 1, |w| {
        w.u16(4).u16(0);
    })
}

/// CREATE, then a second message cut to `tail` bytes (re-signed, so only
/// its framing is wrong).
fn create_then_cut(client: &mut Client, tail: usize) -> Vec<u8> {
    let mut frame = client.frame(vec![create_request("a.txt", false), echo()]);
    let second = u32::from_le_bytes(frame[20..24].try_into().unwrap()) as usize;
    frame.truncate(second + tail);
    frame
}

#[test]
fn a_truncated_second_message_ends_the_connection_after_a_signed_reply() {
    for tail in [1, 10, HEADER_LEN - 1] {
        let (_dir, mut client) = login();
        let frame = create_then_cut(&mut client, tail);
        // handle_frame checks every signed reply's signature.
        let replies = client.handle_frame(&frame);
        assert!(client.closed, "tail of {tail} bytes: the connection stays");
        assert_eq!(replies.len(), 1, "tail of {tail} bytes");
        assert_eq!(replies[0].header.command, command::CREATE);
        assert_eq!(replies[0].status(), status::SUCCESS);
        assert!(replies[0].header.is_signed());
    }
}

#[test]
fn a_next_command_off_the_frame_ends_the_connection_after_a_signed_reply() {
    let (_dir, mut client) = login();
    let mut frame = client.frame(vec![create_request("a.txt", false), echo()]);
    let second = u32::from_le_bytes(frame[20..24].try_into().unwrap()) as usize;
    // The ECHO points past the end of the frame.
    frame[second + 20..second + 24].copy_from_slice(&0x1000u32.to_le_bytes());
    let replies = client.handle_frame(&frame);
    assert!(client.closed);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert!(replies[0].header.is_signed());
}
