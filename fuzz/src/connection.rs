//! The whole-connection target: a fresh server over a fresh share, a
//! client that (optionally) logs in with NTLMv2 and signing, then frames
//! from the fuzzer handed to the protocol core, so that every command sees
//! hostile input past authentication.
//!
//! Input: one mode byte, then records (see [`crate::records`]). Each
//! record is one flag byte and a frame (an SMB2 message or compound, a
//! transform, SMB1, anything). The flags ask the harness to make the frame
//! acceptable in the ways a fuzzer cannot guess: message ids inside the
//! credit window, the session's ids, the id of a file the server opened,
//! a valid signature, encryption. With no flags the frame goes as it is.
//!
//! Beyond "no panic", every reply is checked: frames fit the transport,
//! messages parse, signatures on our session verify, sealed replies
//! decrypt (all in `copyless_scripted`), and no reply is larger than its
//! request's credit charge pays for.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use copyless_core::ServerConfig;
use copyless_proto::client::CreateReply;
use copyless_proto::header::FLAG_RELATED_OPERATIONS;
use copyless_proto::messages::FileId;
use copyless_proto::{command, compound, status, HEADER_LEN};
use copyless_scripted::{Client, Dialect, Reply, Users};

use crate::records;

/// Mode bit: log in and connect the share before the records.
pub const MODE_LOGIN: u8 = 0x01;
/// Mode bit: the server lets unknown users in as guests.
pub const MODE_GUEST: u8 = 0x02;
/// Mode bit: log in with SMB 3.1.1 (AES-GMAC signing, AES-128-GCM
/// encryption) rather than SMB 2.1.
pub const MODE_SMB311: u8 = 0x04;

/// Record flag: message ids from the client's credit window.
pub const FIX_MESSAGE_ID: u8 = 0x01;
/// Record flag: the client's session and tree ids (unrelated requests).
pub const FIX_SESSION: u8 = 0x02;
/// Record flag: the last file id the server returned, where the command
/// names a file (unless the request names the compound's previous file).
pub const FIX_FILE_ID: u8 = 0x04;
/// Record flag: signed with the session's key.
pub const SIGN: u8 = 0x08;
/// Record flag: a minute passes after the frame, and the core's timer runs.
pub const TICK: u8 = 0x10;
/// Record flag: the frame goes encrypted (SMB 3.1.1 logins only).
pub const ENCRYPT: u8 = 0x20;

pub const USER: &str = "alice";
pub const PASSWORD: &str = "fuzz-pass";

/// A successful reply may carry this much beyond the payload its credits
/// pay for (the core's own allowance), plus compound padding.
const REPLY_OVERHEAD: usize = 1024 + 8;
const CREDIT_PAYLOAD: usize = 64 * 1024;

/// 100 ns units in a minute.
const MINUTE: u64 = 60 * 10_000_000;

pub fn run(data: &[u8]) {
    drive(data);
}

/// Runs an input; returns the command and status of every reply, for
/// tests of the harness itself.
fn drive(data: &[u8]) -> Vec<(u16, u32)> {
    let mut seen = Vec::new();
    let Some((&mode, rest)) = data.split_first() else {
        return seen;
    };
    let share = share_dir();
    let users = Arc::new(Users::default());
    users.add(USER, PASSWORD);
    let config = ServerConfig {
        allow_guest: mode & MODE_GUEST != 0,
        limits: copyless_core::Limits {
            max_sessions: 4,
            max_tree_connects: 4,
            max_open_files: 32,
            max_open_files_per_connection: 32,
            max_open_files_per_user: 32,
            max_open_files_total: 32,
            ..copyless_scripted::limits()
        },
        ..copyless_scripted::config()
    };
    let server = copyless_scripted::server(share.path(), config, users);
    let mut client = if mode & MODE_LOGIN != 0 {
        let dialect = if mode & MODE_SMB311 != 0 {
            Dialect::Smb311
        } else {
            Dialect::Smb210
        };
        Client::login_with(server, dialect, USER, PASSWORD)
    } else {
        Client::connect(server)
    };
    let mut last_file = None;
    for record in records(rest) {
        let Some((&flags, frame)) = record.split_first() else {
            continue;
        };
        let mut frame = frame.to_vec();
        let charges = fix_up(&mut client, &mut frame, flags, last_file);
        if flags & ENCRYPT != 0 {
            if let Some(sealed) = client.seal(&frame) {
                frame = sealed;
            }
        }
        let replies = client.handle_frame(&frame);
        for reply in &replies {
            seen.push((reply.header.command, reply.status()));
            check_size(reply, &charges);
            learn(&mut client, reply, &mut last_file);
        }
        if flags & TICK != 0 && !client.closed {
            client.env.now += MINUTE;
            client.tick();
        }
        if client.closed {
            break;
        }
    }
    client.conn.shutdown();
    seen
}

/// A share with a little in it, in its own directory under
/// COPYLESS_FUZZ_TMP (fuzz/run mounts a small tmpfs there) or the system's
/// temporary directory.
fn share_dir() -> tempfile::TempDir {
    let base = std::env::var_os("COPYLESS_FUZZ_TMP")
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("copyless-fuzz-")
        .tempdir_in(base)
        .expect("a scratch directory for the share");
    let root = dir.path();
    std::fs::write(root.join("a.txt"), [b'a'; 1000]).expect("share file");
    std::fs::create_dir(root.join("dir")).expect("share folder");
    std::fs::write(root.join("dir").join("b.txt"), b"b").expect("share file");
    dir
}

/// Applies the record's fixes to every message of the frame and returns
/// the credit charge of each message id sent (None where ids repeat).
fn fix_up(
    client: &mut Client,
    frame: &mut [u8],
    flags: u8,
    last_file: Option<FileId>,
) -> HashMap<u64, Option<u16>> {
    let mut charges = HashMap::new();
    // The messages the server will see: where the walk fails, it stops
    // reading too.
    let spans: Vec<(usize, usize)> = compound::messages(frame)
        .map_while(Result::ok)
        .map(|m| (m.offset, m.bytes.len()))
        .collect();
    for (start, len) in spans {
        let msg = &mut frame[start..start + len];
        let charge = u16::from_le_bytes([msg[6], msg[7]]);
        let related = u32_at(msg, 16) & FLAG_RELATED_OPERATIONS != 0;
        if flags & FIX_MESSAGE_ID != 0 {
            msg[24..32].copy_from_slice(&client.next_mid.to_le_bytes());
            client.next_mid += u64::from(charge.max(1));
        }
        if flags & FIX_SESSION != 0 && !related {
            msg[36..40].copy_from_slice(&client.tree_id.to_le_bytes());
            msg[40..48].copy_from_slice(&client.session_id.to_le_bytes());
        }
        if flags & FIX_FILE_ID != 0 {
            if let Some(id) = last_file {
                put_file_id(msg, id);
            }
        }
        if flags & SIGN != 0 && client.is_signing() {
            let signed = u32_at(msg, 16) | copyless_proto::header::FLAG_SIGNED;
            msg[16..20].copy_from_slice(&signed.to_le_bytes());
            client.sign(msg);
        }
        let mid = u64::from_le_bytes(msg[24..32].try_into().expect("8 bytes"));
        charges
            .entry(mid)
            .and_modify(|c| *c = None)
            .or_insert(Some(charge));
    }
    charges
}

/// Where a command's request carries the FileId, from the header's start.
fn file_id_offset(command: u16) -> Option<usize> {
    let body = match command {
        command::CLOSE
        | command::FLUSH
        | command::LOCK
        | command::IOCTL
        | command::QUERY_DIRECTORY
        | command::CHANGE_NOTIFY
        | command::OPLOCK_BREAK => 8,
        command::READ | command::WRITE | command::SET_INFO => 16,
        command::QUERY_INFO => 24,
        _ => return None,
    };
    Some(HEADER_LEN + body)
}

fn put_file_id(msg: &mut [u8], id: FileId) {
    let command = u16::from_le_bytes([msg[12], msg[13]]);
    let Some(at) = file_id_offset(command) else {
        return;
    };
    let Some(field) = msg.get_mut(at..at + 16) else {
        return;
    };
    if field.iter().all(|&b| b == 0xff) {
        // "The previous request's file" in a compound: keep it.
        return;
    }
    field[..8].copy_from_slice(&id.persistent.to_le_bytes());
    field[8..].copy_from_slice(&id.volatile.to_le_bytes());
}

/// No reply is larger than its request paid for (MS-SMB2 3.3.5.2.5): each
/// credit pays for 64 KiB of payload.
fn check_size(reply: &Reply, charges: &HashMap<u64, Option<u16>>) {
    let Some(Some(charge)) = charges.get(&reply.header.message_id) else {
        return;
    };
    let bound = REPLY_OVERHEAD + usize::from((*charge).max(1)) * CREDIT_PAYLOAD;
    assert!(
        reply.msg.len() <= bound,
        "a reply of {} bytes to {} with a credit charge of {charge} (bound {bound})",
        reply.msg.len(),
        command::name(reply.header.command),
    );
}

/// Remembers what later records may need: the file the server opened, and
/// the ids of a session or tree the fuzzer set up itself.
fn learn(client: &mut Client, reply: &Reply, last_file: &mut Option<FileId>) {
    let ok = reply.status() == status::SUCCESS;
    match reply.header.command {
        command::CREATE if ok => {
            if let Ok(created) = CreateReply::parse(&reply.msg) {
                *last_file = Some(created.file_id);
            }
        }
        // With a signing key the session is the one the harness logged in;
        // a second one would be signed with a key it does not know.
        command::SESSION_SETUP
            if !client.is_signing()
                && (ok || reply.status() == status::MORE_PROCESSING_REQUIRED) =>
        {
            client.session_id = reply.header.session_id;
        }
        command::TREE_CONNECT if ok => client.tree_id = reply.header.tree_id,
        _ => {}
    }
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_scripted::{create_request, read_request, Request};

    /// A record as the fuzzer would write it: flags, then a header with
    /// zero ids and the request's body.
    fn record(flags: u8, req: &Request) -> Vec<u8> {
        let mut frame = vec![flags];
        copyless_proto::Header {
            command: req.command,
            credit_charge: req.charge,
            credits: 8,
            ..Default::default()
        }
        .write(&mut frame);
        frame.extend_from_slice(&req.body);
        let mut out = (frame.len() as u16).to_le_bytes().to_vec();
        out.extend(frame);
        out
    }

    const ALL: u8 = FIX_MESSAGE_ID | FIX_SESSION | FIX_FILE_ID | SIGN;

    #[test]
    fn fixed_up_requests_reach_the_file() {
        let mut input = vec![MODE_LOGIN];
        input.extend(record(ALL, &create_request("a.txt", false)));
        input.extend(record(ALL, &read_request(FileId::default(), 0, 100, 1)));
        let seen = drive(&input);
        let tail = &seen[seen.len() - 2..];
        assert_eq!(tail, [(command::CREATE, 0), (command::READ, 0)]);
    }

    #[test]
    fn smb311_encrypted_requests_reach_the_file() {
        let mut input = vec![MODE_LOGIN | MODE_SMB311];
        input.extend(record(ALL | ENCRYPT, &create_request("a.txt", false)));
        input.extend(record(
            ALL | ENCRYPT,
            &read_request(FileId::default(), 0, 100, 1),
        ));
        let seen = drive(&input);
        let tail = &seen[seen.len() - 2..];
        assert_eq!(tail, [(command::CREATE, 0), (command::READ, 0)]);
    }

    #[test]
    fn without_fixes_the_server_refuses() {
        let mut input = vec![MODE_LOGIN];
        input.extend(record(FIX_MESSAGE_ID, &create_request("a.txt", false)));
        let seen = drive(&input);
        // Unsigned on a session that requires signing, and no session
        // id: refused either way, never served.
        assert_ne!(seen.last(), Some(&(command::CREATE, 0)));
    }
}
