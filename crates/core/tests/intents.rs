//! Data I/O leaves the core as intents, and a reply waits for its intent's
//! completion: the test plays the engine, choosing what each intent
//! yields and when, so the core is seen to build replies from completions
//! alone. Signatures and sealing are checked by the scripted client. The
//! share lives in memory, except where a test needs a real descriptor.

use std::sync::Arc;

use copyless_core::{Completion, Intent, Op, Output, WriteData};
use copyless_proto::client as wire;
use copyless_proto::header::{Header, FLAG_ASYNC_COMMAND};
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{
    create_request, read_request, write_request, Client, Dialect, Request, Users,
};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::VfsError;

fn users() -> Arc<Users> {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    users
}

fn flush_request(id: FileId) -> Request {
    Request::new(command::FLUSH, 1, |w| wire::write_flush_request(w, id))
}

fn related(mut r: Request) -> Request {
    r.related = true;
    r
}

fn only_intent(out: &mut Output) -> Intent {
    assert!(
        out.frames.is_empty(),
        "no reply before the intent completes"
    );
    assert_eq!(out.intents.len(), 1, "one intent: {:?}", out.intents);
    out.intents.pop().unwrap()
}

/// Completes a read as an engine would, with bytes of its own choosing.
fn read_done(intent: Intent, data: &[u8]) -> (u64, Completion) {
    let Op::Read { mut buf, len, .. } = intent.op else {
        panic!("not a read: {:?}", intent.op);
    };
    assert!(data.len() <= len);
    buf.extend_from_slice(data);
    (intent.token, Completion::Read(buf, Ok(())))
}

fn finish(c: &mut Client, token: u64, done: Completion) -> Vec<copyless_scripted::Reply> {
    let out = c.complete(token, done);
    c.take(out)
}

/// A client that opened "f", which holds "on disk", on a share in memory.
fn setup(dialect: Dialect) -> (Arc<MemoryVfs>, Client, FileId) {
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users());
    copyless_scripted::put_file(&*vfs, "f", b"on disk");
    let mut c = Client::login_with(server, dialect, "alice", "pw");
    let id = c.create("f", false).unwrap();
    (vfs, c, id)
}

/// As [`setup`], on a real directory.
fn setup_on_disk(dialect: Dialect) -> (tempfile::TempDir, Client, FileId) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"on disk").unwrap();
    let server = copyless_scripted::server(dir.path(), copyless_scripted::config(), users());
    let mut c = Client::login_with(server, dialect, "alice", "pw");
    let id = c.create("f", false).unwrap();
    (dir, c, id)
}

#[test]
fn a_read_reply_carries_what_the_engine_read() {
    for dialect in [Dialect::Smb210, Dialect::Smb311] {
        let (_dir, mut c, id) = setup_on_disk(dialect);
        let frame = c.frame(vec![read_request(id, 3, 100, 1)]);
        let mut out = c.handle_raw(&frame);
        let intent = only_intent(&mut out);
        match &intent.op {
            Op::Read { offset, len, .. } => assert_eq!((*offset, *len), (3, 100)),
            op => panic!("not a read: {op:?}"),
        }
        assert!(intent.file.data_fd().is_some(), "plain file data has a fd");
        let (token, done) = read_done(intent, b"from the engine");
        let out = c.complete(token, done);
        let replies = c.take(out);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0].status(), status::SUCCESS);
        assert!(replies[0].header.is_signed(), "checked by the client");
        assert_eq!(
            wire::read_response_data(&replies[0].msg).unwrap(),
            b"from the engine"
        );
    }
}

#[test]
fn replies_go_out_in_the_order_intents_complete() {
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let first = c.frame(vec![read_request(id, 0, 2, 1)]);
    let second = c.frame(vec![read_request(id, 2, 2, 1)]);
    let a = only_intent(&mut c.handle_raw(&first));
    let b = only_intent(&mut c.handle_raw(&second));
    assert_ne!(a.token, b.token);
    let (tb, db) = read_done(b, b"BB");
    let later = finish(&mut c, tb, db).remove(0);
    let (ta, da) = read_done(a, b"AA");
    let earlier = finish(&mut c, ta, da).remove(0);
    assert_eq!(wire::read_response_data(&later.msg).unwrap(), b"BB");
    assert_eq!(wire::read_response_data(&earlier.msg).unwrap(), b"AA");
    assert_eq!(later.header.message_id, earlier.header.message_id + 1);
    // A token already completed, or never issued, changes nothing.
    let out = c.complete(ta, Completion::Flush(Ok(())));
    assert!(out.frames.is_empty() && out.intents.is_empty() && !out.disconnect);
}

#[test]
fn a_compound_waits_at_its_read_and_goes_on_after() {
    for dialect in [Dialect::Smb210, Dialect::Smb311] {
        let (_share, mut c, _) = setup(dialect);
        let frame = c.frame(vec![
            create_request("f", false),
            related(read_request(FileId::RELATED, 0, 7, 1)),
            related(Request::new(command::CLOSE, 1, |w| {
                wire::write_close_request(w, 0, FileId::RELATED)
            })),
        ]);
        // The open that may create leaves first, as a call; the compound
        // goes on from its result to the read, and waits there.
        let mut out = c.handle_raw(&frame);
        assert!(out.frames.is_empty() && out.intents.is_empty());
        assert_eq!(out.calls.len(), 1, "one call: {:?}", out.calls);
        let (token, done) = out.calls.pop().unwrap().perform();
        let intent = only_intent(&mut c.complete(token, done));
        let (token, done) = read_done(intent, b"xyz");
        let replies = finish(&mut c, token, done);
        let statuses: Vec<u32> = replies.iter().map(|r| r.status()).collect();
        assert_eq!(statuses, [status::SUCCESS; 3]);
        assert_eq!(wire::read_response_data(&replies[1].msg).unwrap(), b"xyz");
        // Padded to 8 inside the compound: 64 + 16 + 3 -> 88.
        assert_eq!(replies[1].msg.len(), 88);
        assert_eq!(replies[2].header.command, command::CLOSE);
    }
}

#[test]
fn an_encrypted_read_waits_and_its_reply_is_sealed() {
    let (_share, mut c, id) = setup(Dialect::Smb311);
    let frame = c.frame(vec![read_request(id, 0, 5, 1)]);
    let sealed = c.seal(&frame).unwrap();
    let intent = only_intent(&mut c.handle_raw(&sealed));
    let (token, done) = read_done(intent, b"plain");
    let out = c.complete(token, done);
    assert!(out.frames[0].starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID));
    let replies = c.take(out);
    assert_eq!(wire::read_response_data(&replies[0].msg).unwrap(), b"plain");
}

#[test]
fn a_short_or_failed_read_gets_the_status_windows_sends() {
    let (_share, mut c, id) = setup(Dialect::Smb210);
    // Nothing at all: end of file.
    let frame = c.frame(vec![read_request(id, 100, 10, 1)]);
    let (token, done) = read_done(only_intent(&mut c.handle_raw(&frame)), b"");
    assert_eq!(finish(&mut c, token, done)[0].status(), status::END_OF_FILE);
    // A disk error.
    let frame = c.frame(vec![read_request(id, 0, 10, 1)]);
    let intent = only_intent(&mut c.handle_raw(&frame));
    let Op::Read { buf, .. } = intent.op else {
        panic!("not a read");
    };
    let done = Completion::Read(buf, Err(VfsError::AccessDenied));
    let reply = finish(&mut c, intent.token, done).remove(0);
    assert_eq!(reply.status(), status::ACCESS_DENIED);
}

#[test]
fn a_write_names_its_payload_where_it_arrived() {
    let (vfs, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![write_request(id, 4, b"payload")]);
    let intent = only_intent(&mut c.handle_raw(&frame));
    let Op::Write { offset, data, sync } = &intent.op else {
        panic!("not a write: {:?}", intent.op);
    };
    assert!(
        matches!(data, WriteData::Frame(_)),
        "no copy of the payload"
    );
    assert_eq!(
        (*offset, data.bytes(&frame), *sync),
        (4, &b"payload"[..], false)
    );
    let done = Completion::Write(Err(VfsError::DiskFull));
    let reply = finish(&mut c, intent.token, done).remove(0);
    assert_eq!(reply.status(), status::DISK_FULL);
    // Performed for real, through the share's VFS.
    let frame = c.frame(vec![write_request(id, 4, b"payload"), flush_request(id)]);
    let mut out = c.handle_raw(&frame);
    let write = only_intent(&mut out);
    let (token, done) = write.perform(&frame);
    let mut out = c.complete(token, done);
    let flush = only_intent(&mut out);
    assert!(matches!(flush.op, Op::Flush));
    let (token, done) = flush.perform(&frame);
    let replies = finish(&mut c, token, done);
    assert_eq!(replies.len(), 2);
    assert!(replies.iter().all(|r| r.status() == status::SUCCESS));
    assert_eq!(copyless_scripted::file_contents(&*vfs, "f"), b"on dpayload");
}

#[test]
fn a_sealed_write_is_decrypted_where_it_arrived_and_written_from_there() {
    let (vfs, mut c, id) = setup(Dialect::Smb311);
    let frame = c.frame(vec![write_request(id, 2, b"sealed payload")]);
    let mut sealed = c.seal(&frame).unwrap();
    let mut out = c.conn.handle_in_place(&mut sealed, &mut c.env);
    let intent = only_intent(&mut out);
    let Op::Write { data, .. } = &intent.op else {
        panic!("not a write: {:?}", intent.op);
    };
    assert!(
        matches!(data, WriteData::Frame(_)),
        "the payload is named where it lies in the engine's frame, not copied"
    );
    assert_eq!(data.bytes(&sealed), b"sealed payload");
    let (token, done) = intent.perform(&sealed);
    let replies = finish(&mut c, token, done);
    assert_eq!(replies[0].status(), status::SUCCESS);
    assert_eq!(
        copyless_scripted::file_contents(&*vfs, "f"),
        b"onsealed payload"
    );

    // Without the frame to change, the core decrypts a copy of its own.
    let frame = c.frame(vec![write_request(id, 0, b"copied")]);
    let sealed = c.seal(&frame).unwrap();
    let intent = only_intent(&mut c.handle_raw(&sealed));
    let Op::Write { data, .. } = &intent.op else {
        panic!("not a write: {:?}", intent.op);
    };
    assert!(matches!(data, WriteData::Owned(_)));
    // A frame that does not decrypt ends the connection, in place too.
    let frame = c.frame(vec![write_request(id, 0, b"tampered")]);
    let mut sealed = c.seal(&frame).unwrap();
    let last = sealed.len() - 1;
    sealed[last] ^= 1;
    let out = c.conn.handle_in_place(&mut sealed, &mut c.env);
    assert!(out.disconnect && out.frames.is_empty() && out.intents.is_empty());
}

#[test]
fn closing_a_file_while_its_read_runs_leaves_the_read_whole() {
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![read_request(id, 0, 7, 1)]);
    let intent = only_intent(&mut c.handle_raw(&frame));
    assert_eq!(c.close(id), status::SUCCESS);
    let (token, done) = intent.perform(&frame);
    let reply = finish(&mut c, token, done).remove(0);
    assert_eq!(reply.status(), status::SUCCESS);
    assert_eq!(wire::read_response_data(&reply.msg).unwrap(), b"on disk");
}

/// Half a second and a tick later, as the engine's timer would come.
fn wait_long(c: &mut Client) -> Vec<copyless_scripted::Reply> {
    c.env.now += 5_000_001;
    c.tick()
}

fn cancel_frame(c: &Client, message_id: u64, async_id: Option<u64>) -> Vec<u8> {
    let mut frame = Vec::new();
    Header {
        command: command::CANCEL,
        flags: async_id.map_or(0, |_| FLAG_ASYNC_COMMAND),
        message_id,
        async_id: async_id.unwrap_or(0),
        session_id: c.session_id,
        tree_id: c.tree_id,
        ..Header::default()
    }
    .write(&mut frame);
    frame.extend_from_slice(&[4, 0, 0, 0]);
    frame
}

#[test]
fn a_slow_intent_gets_an_interim_response_then_an_async_final_one() {
    for dialect in [Dialect::Smb210, Dialect::Smb311] {
        let (_share, mut c, id) = setup(dialect);
        let frame = c.frame(vec![read_request(id, 0, 7, 1)]);
        let intent = only_intent(&mut c.handle_raw(&frame));
        assert!(c.tick().is_empty(), "no interim response at once");
        assert!(c.conn.timeout().is_some(), "the core wants a timer");
        let interim = wait_long(&mut c);
        assert_eq!(interim.len(), 1);
        let h = &interim[0].header;
        assert_eq!(interim[0].status(), status::PENDING);
        assert!(h.is_async() && h.async_id != 0 && !h.is_signed(), "{h:?}");
        assert!(h.credits > 0, "the interim response grants the credits");
        assert!(wait_long(&mut c).is_empty(), "one interim response only");
        let (token, done) = read_done(intent, b"late");
        let last = finish(&mut c, token, done).remove(0);
        assert_eq!(last.status(), status::SUCCESS);
        assert!(last.header.is_async() && last.header.async_id == h.async_id);
        assert_eq!(last.header.credits, 0);
        assert_eq!(last.header.is_signed(), c.is_signing());
        assert_eq!(wire::read_response_data(&last.msg).unwrap(), b"late");
    }
}

#[test]
fn a_sealed_request_gets_a_sealed_interim_response() {
    let (_share, mut c, id) = setup(Dialect::Smb311);
    let frame = c.frame(vec![read_request(id, 0, 7, 1)]);
    let sealed = c.seal(&frame).unwrap();
    let intent = only_intent(&mut c.handle_raw(&sealed));
    c.env.now += 5_000_001;
    let out = c.conn.handle_timeout(&mut c.env);
    assert!(out.frames[0].starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID));
    assert_eq!(c.take(out)[0].status(), status::PENDING);
    let (token, done) = read_done(intent, b"x");
    assert_eq!(finish(&mut c, token, done)[0].status(), status::SUCCESS);
}

#[test]
fn cancel_asks_the_engine_to_stop_and_the_reply_says_cancelled() {
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![read_request(id, 0, 7, 1)]);
    let intent = only_intent(&mut c.handle_raw(&frame));
    let async_id = wait_long(&mut c)[0].header.async_id;
    // A CANCEL for another request changes nothing.
    let out = c.handle_raw(&cancel_frame(&c, 0, Some(async_id + 1)));
    assert!(out.frames.is_empty() && out.cancel.is_empty());
    let out = c.handle_raw(&cancel_frame(&c, 0, Some(async_id)));
    assert!(out.frames.is_empty(), "CANCEL has no reply of its own");
    assert_eq!(out.cancel, [intent.token]);
    // The engine stopped it; the buffer went with the operation.
    let done = Completion::Read(Vec::new(), Err(VfsError::Cancelled));
    let reply = finish(&mut c, intent.token, done).remove(0);
    assert_eq!(reply.status(), status::CANCELLED);
    assert_eq!(reply.header.async_id, async_id);
}

#[test]
fn cancel_by_message_id_and_an_intent_that_could_not_be_stopped() {
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![write_request(id, 0, b"kept")]);
    let mid = c.next_mid - 1;
    let intent = only_intent(&mut c.handle_raw(&frame));
    let out = c.handle_raw(&cancel_frame(&c, mid, None));
    assert_eq!(out.cancel, [intent.token]);
    // Cancelled twice: asked once.
    assert!(c.handle_raw(&cancel_frame(&c, mid, None)).cancel.is_empty());
    let (token, done) = intent.perform(&frame);
    let reply = finish(&mut c, token, done).remove(0);
    assert_eq!(reply.status(), status::SUCCESS, "it ran to the end");
}

/// As [`setup`], for a client that signs nothing on a server that does
/// not require it.
fn setup_unsigned() -> (Arc<MemoryVfs>, Client, FileId) {
    let config = copyless_core::ServerConfig {
        signing_required: false,
        ..copyless_scripted::config()
    };
    let (server, vfs) = copyless_scripted::memory_server(config, users());
    copyless_scripted::put_file(&*vfs, "f", b"on disk");
    let mut c = Client::connect(server);
    c.unsigned = true;
    c.negotiate();
    c.session_setup("alice", "pw").unwrap();
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    let id = c.create("f", false).unwrap();
    (vfs, c, id)
}

/// A read's intent, taken apart: its buffer and whether it is bare.
fn read_parts(intent: &mut Intent) -> (Vec<u8>, bool) {
    let Op::Read { buf, bare, .. } = &mut intent.op else {
        panic!("not a read: {:?}", intent.op);
    };
    (std::mem::take(buf), *bare)
}

#[test]
fn an_unsigned_read_alone_in_its_frame_may_send_its_data_from_aside() {
    let (_share, mut c, id) = setup_unsigned();
    let frame = c.frame(vec![read_request(id, 0, 100, 1)]);
    let mut intent = only_intent(&mut c.handle_raw(&frame));
    let (buf, bare) = read_parts(&mut intent);
    assert!(
        bare,
        "nothing signs or seals this reply, and nothing shares its frame"
    );
    let out = c.complete(intent.token, Completion::ReadAside(buf, Ok(7)));
    assert_eq!(
        out.aside,
        Some(7),
        "the reply carries the 7 bytes set aside"
    );
    assert_eq!(out.frames.len(), 1);
    let reply = &out.frames[0];
    assert_eq!(reply.len(), 80, "the header and READ's fixed part, no data");
    let hdr = Header::parse(reply).unwrap();
    assert_eq!(hdr.status, status::SUCCESS);
    assert!(!hdr.is_signed());
    // DataOffset 0x50, DataLength 7: the data follows the frame.
    assert_eq!(reply[64 + 2], 0x50);
    assert_eq!(&reply[64 + 4..64 + 8], &7u32.to_le_bytes());
}

#[test]
fn a_read_from_aside_short_of_what_was_asked_ends_as_a_read_would() {
    let (_share, mut c, id) = setup_unsigned();
    let frame = c.frame(vec![read_request(id, 100, 10, 1)]);
    let mut intent = only_intent(&mut c.handle_raw(&frame));
    let (buf, _) = read_parts(&mut intent);
    let out = c.complete(intent.token, Completion::ReadAside(buf, Ok(0)));
    assert_eq!(out.aside, None, "nothing set aside goes out");
    assert_eq!(c.take(out)[0].status(), status::END_OF_FILE);

    let frame = c.frame(vec![read_request(id, 0, 10, 1)]);
    let mut intent = only_intent(&mut c.handle_raw(&frame));
    let (buf, _) = read_parts(&mut intent);
    let out = c.complete(
        intent.token,
        Completion::ReadAside(buf, Err(VfsError::AccessDenied)),
    );
    assert_eq!(out.aside, None);
    assert_eq!(c.take(out)[0].status(), status::ACCESS_DENIED);
}

#[test]
fn signed_sealed_or_compound_reads_are_never_bare() {
    // Signed.
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![read_request(id, 0, 5, 1)]);
    assert!(!read_parts(&mut only_intent(&mut c.handle_raw(&frame))).1);
    // Sealed.
    let (_share, mut c, id) = setup(Dialect::Smb311);
    let frame = c.frame(vec![read_request(id, 0, 5, 1)]);
    let sealed = c.seal(&frame).unwrap();
    assert!(!read_parts(&mut only_intent(&mut c.handle_raw(&sealed))).1);
    // In a compound, before another request and after one.
    let (_share, mut c, id) = setup_unsigned();
    let frame = c.frame(vec![read_request(id, 0, 5, 1), read_request(id, 0, 5, 1)]);
    assert!(!read_parts(&mut only_intent(&mut c.handle_raw(&frame))).1);
    let frame = c.frame(vec![flush_request(id), read_request(id, 0, 5, 1)]);
    let mut out = c.handle_raw(&frame);
    let flush = only_intent(&mut out);
    let mut out = c.complete(flush.token, Completion::Flush(Ok(())));
    assert!(!read_parts(&mut only_intent(&mut out)).1);
}

#[test]
fn a_read_set_aside_that_was_not_bare_ends_the_connection() {
    // The data is not there to sign: an engine bug, and no reply is sent
    // that could not be checked.
    let (_share, mut c, id) = setup(Dialect::Smb210);
    let frame = c.frame(vec![read_request(id, 0, 5, 1)]);
    let mut intent = only_intent(&mut c.handle_raw(&frame));
    let (buf, _) = read_parts(&mut intent);
    let out = c.complete(intent.token, Completion::ReadAside(buf, Ok(5)));
    assert!(out.disconnect);
    assert!(out.frames.is_empty());
}

#[test]
fn a_read_or_write_beyond_what_a_file_offset_can_be_is_refused() {
    const MAX_FILE_SIZE: u64 = 0xFFF_FFFF_0000;
    let top = i64::MAX as u64;
    let (_share, mut c, id) = setup(Dialect::Smb311);
    let refused = [
        read_request(id, top, 1, 1),
        read_request(id, top + 1, 0, 1),
        read_request(id, u64::MAX, 0, 1),
        write_request(id, u64::MAX, b"x"),
        write_request(id, u64::MAX - 1, b"x"),
        write_request(id, top + 1, b""),
        write_request(id, top, b"x"),
        write_request(id, MAX_FILE_SIZE, b"x"),
    ];
    for req in refused {
        let frame = c.frame(vec![req]);
        let out = c.handle_raw(&frame);
        assert!(out.intents.is_empty(), "no I/O for it");
        let replies = c.take(out);
        assert_eq!(replies[0].status(), status::INVALID_PARAMETER);
    }
    // Up to the last offset a read may reach, and, writing nothing, any
    // offset that is not negative; a byte below MAXFILESIZE is left to
    // the filesystem.
    let allowed = [
        read_request(id, top - 1, 1, 1),
        read_request(id, top, 0, 1),
        write_request(id, top, b""),
        write_request(id, MAX_FILE_SIZE - 1, b"x"),
    ];
    for req in allowed {
        let frame = c.frame(vec![req]);
        only_intent(&mut c.handle_raw(&frame));
    }
}
