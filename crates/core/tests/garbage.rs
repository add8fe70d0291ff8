//! Malformed input never panics the protocol core: random bytes, truncated
//! and bit-flipped versions of valid messages, and bad compounds are fed to
//! a connection, which must answer or ask to disconnect, and keep working.

use std::net::SocketAddr;
use std::sync::Arc;

use copyless_core::{Connection, Server, ServerConfig};
use copyless_proto::header::Header;
use copyless_proto::Writer;
use copyless_scripted::{TestEnv, Users};

fn server(dir: &std::path::Path) -> Arc<Server> {
    let config = ServerConfig {
        limits: copyless_core::Limits {
            max_credits: 512,
            max_tree_connects: 8,
            max_open_files: 64,
            max_open_files_per_connection: 64,
            max_open_files_per_user: 64,
            max_open_files_total: 64,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    copyless_scripted::server(dir, config, Arc::new(Users::default()))
}

fn addr() -> SocketAddr {
    "127.0.0.1:445".parse().unwrap()
}

fn negotiate(mid: u64) -> Vec<u8> {
    let mut w = Writer::new();
    Header {
        message_id: mid,
        credits: 10,
        ..Header::default()
    }
    .write(&mut w.buf);
    let dialects = [0x0202u16, 0x0210, 0x0300, 0x0302, 0x0311];
    w.u16(36).u16(dialects.len() as u16).u16(1).u16(0).u32(0x7f);
    w.bytes(&[7; 16]);
    let ctx_off_at = w.len();
    w.u32(0).u16(2).u16(0);
    for d in dialects {
        w.u16(d);
    }
    w.align(8);
    let off = w.len() as u32;
    w.put_u32_at(ctx_off_at, off);
    w.u16(1)
        .u16(38)
        .u32(0)
        .u16(1)
        .u16(32)
        .u16(1)
        .bytes(&[3; 32]);
    w.align(8);
    w.u16(2).u16(6).u32(0).u16(2).u16(2).u16(1);
    w.into_vec()
}

/// A request of `command` with a body of `body_len` random bytes after a
/// plausible StructureSize.
fn request(env: &mut TestEnv, command: u16, mid: u64, body_len: usize) -> Vec<u8> {
    let mut w = Writer::new();
    Header {
        command,
        message_id: mid,
        credits: 1,
        session_id: env.next_u64() % 3,
        tree_id: (env.next_u64() % 3) as u32,
        ..Header::default()
    }
    .write(&mut w.buf);
    let sizes = [
        36u16, 25, 4, 9, 4, 57, 24, 24, 49, 49, 48, 57, 4, 4, 33, 32, 41, 33, 24,
    ];
    w.u16(sizes[command as usize % sizes.len()]);
    for _ in 0..body_len {
        w.u8(env.next_u64() as u8);
    }
    w.into_vec()
}

#[test]
fn garbage_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut env = TestEnv::new(0x9e37_79b9_7f4a_7c15);
    for round in 0..300 {
        let mut conn = Connection::new(server.clone(), addr(), addr());
        let out = conn.handle(&negotiate(0), &mut env);
        assert_eq!(out.frames.len(), 1, "a valid NEGOTIATE is answered");
        assert!(!out.disconnect);
        let mut mid = 1;
        for _ in 0..40 {
            let command = (env.next_u64() % 20) as u16;
            let len = (env.next_u64() % 200) as usize;
            let mut msg = request(&mut env, command, mid, len);
            mid += 1;
            match env.next_u64() % 4 {
                0 => {
                    let cut = (env.next_u64() as usize) % msg.len();
                    msg.truncate(cut.max(1));
                }
                1 => {
                    let at = (env.next_u64() as usize) % msg.len();
                    msg[at] ^= 1 << (env.next_u64() % 8);
                }
                2 => {
                    // A compound whose NextCommand points anywhere.
                    let next = (env.next_u64() % 256) as u32;
                    msg[20..24].copy_from_slice(&next.to_le_bytes());
                    let tail = request(&mut env, command, mid, len / 2);
                    mid += 1;
                    msg.extend_from_slice(&tail);
                }
                _ => {}
            }
            let out = conn.handle(&msg, &mut env);
            if out.disconnect {
                break;
            }
        }
        conn.shutdown();
        // Pure random frames on a fresh connection, including SMB1 and
        // transform-header prefixes.
        let mut conn = Connection::new(server.clone(), addr(), addr());
        let prefixes: [&[u8]; 4] = [b"\xfeSMB", b"\xffSMB", b"\xfdSMB", b""];
        let mut msg = prefixes[round % 4].to_vec();
        for _ in 0..(env.next_u64() % 300) {
            msg.push(env.next_u64() as u8);
        }
        let _ = conn.handle(&msg, &mut env);
        conn.shutdown();
    }
}

#[test]
fn negotiate_then_unauthenticated_requests_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path());
    let mut env = TestEnv::new(42);
    let mut conn = Connection::new(server, addr(), addr());
    let out = conn.handle(&negotiate(0), &mut env);
    let reply = &out.frames[0];
    let h = Header::parse(reply).unwrap();
    assert_eq!(h.status, 0);
    assert_eq!(u16::from_le_bytes([reply[68], reply[69]]), 0x0311);
    // A CREATE on a session that does not exist.
    let mut w = Writer::new();
    Header {
        command: 5,
        message_id: 1,
        session_id: 77,
        tree_id: 1,
        ..Header::default()
    }
    .write(&mut w.buf);
    w.u16(57).zeros(56);
    let out = conn.handle(&w.buf, &mut env);
    let h = Header::parse(&out.frames[0]).unwrap();
    assert_eq!(h.status, copyless_proto::status::USER_SESSION_DELETED);
    // Reusing a message id is a protocol violation: the connection ends.
    let out = conn.handle(&w.buf, &mut env);
    assert!(out.disconnect);
}
