//! The parsers target: every decoder of client input in proto, fscc and
//! the core's name handling, each given the fuzzer's bytes directly, with
//! checks on what the decoders promise.
//!
//! Input: one selector byte (which decoder), then its input.

use copyless_core::{path, wildcard, wildcard_reference};
use copyless_fscc::descriptor::{sids, Descriptor, ALL_PARTS};
use copyless_proto::transform::{Sealed, TRANSFORM_HEADER_LEN};
use copyless_proto::{
    command, compound, create_context, fsctl, messages, negotiate, smb1, utf16, Header,
};

/// Selector: an SMB2 message (or compound), parsed as its command says.
pub const SMB2: u8 = 0;
/// Selector: a transform (encryption) header.
pub const TRANSFORM: u8 = 1;
/// Selector: an SMB1 NEGOTIATE (the dialect upgrade).
pub const SMB1: u8 = 2;
/// Selector: a self-relative security descriptor (SET_INFO SECURITY).
pub const DESCRIPTOR: u8 = 3;
/// Selector: a SET_INFO buffer; its first byte is the information class.
pub const SET_INFO: u8 = 4;
/// Selector: a search pattern, a zero byte, a name (UTF-8).
pub const WILDCARD: u8 = 5;
/// Selector: a CREATE name (UTF-16LE).
pub const NAME: u8 = 6;
const SELECTORS: u8 = 7;

pub fn run(data: &[u8]) {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    match selector % SELECTORS {
        SMB2 => smb2(input),
        TRANSFORM => {
            if let Ok(t) = Sealed::parse(input) {
                assert_eq!(t.body.len(), input.len() - TRANSFORM_HEADER_LEN);
                assert_eq!(t.aad.len(), 32);
            }
        }
        SMB1 => {
            let _ = smb1::parse_negotiate(input);
        }
        DESCRIPTOR => descriptor(input),
        SET_INFO => set_info(input),
        WILDCARD => wildcard_vs_reference(input),
        _ => name(input),
    }
}

fn smb2(frame: &[u8]) {
    let _ = compound::split(frame);
    let Ok(header) = Header::parse(frame) else {
        return;
    };
    match header.command {
        command::NEGOTIATE => {
            if let Ok(n) = negotiate::NegotiateRequest::parse(frame) {
                for c in &n.contexts {
                    let _ = negotiate::parse_preauth(c.data);
                    let _ = negotiate::parse_id_list(c.data);
                }
            }
        }
        command::SESSION_SETUP => {
            let _ = messages::SessionSetupRequest::parse(frame);
        }
        command::TREE_CONNECT => {
            let _ = messages::TreeConnectRequest::parse(frame);
        }
        command::CREATE => {
            if let Ok(c) = messages::CreateRequest::parse(frame) {
                let _ = create_context::parse_chain(c.contexts);
                name(c.name);
            }
        }
        command::CLOSE => {
            let _ = messages::CloseRequest::parse(frame);
        }
        command::FLUSH => {
            let _ = messages::parse_flush(frame);
        }
        command::READ => {
            let _ = messages::ReadRequest::parse(frame);
        }
        command::WRITE => {
            if let Ok(w) = messages::WriteRequest::parse(frame) {
                assert!(w.data.len() <= frame.len());
            }
        }
        command::IOCTL => {
            if let Ok(i) = messages::IoctlRequest::parse(frame) {
                let _ = messages::ValidateNegotiateInfo::parse(i.input);
                fsctl_input(i.input);
            }
        }
        command::QUERY_DIRECTORY => {
            if let Ok(q) = messages::QueryDirectoryRequest::parse(frame) {
                if let Ok(pattern) = utf16::decode(q.pattern) {
                    if let Some(p) = wildcard::Pattern::new(&pattern) {
                        p.matches("a.txt");
                    }
                }
            }
        }
        command::QUERY_INFO => {
            let _ = messages::QueryInfoRequest::parse(frame);
        }
        command::SET_INFO => {
            if let Ok(s) = messages::SetInfoRequest::parse(frame) {
                let mut buf = vec![s.class];
                buf.extend_from_slice(s.buffer);
                set_info(&buf);
                descriptor(s.buffer);
            }
        }
        command::CANCEL => {
            let _ = messages::parse_cancel(frame);
        }
        _ => {
            let _ = messages::parse_empty(frame);
        }
    }
}

/// The inputs of the file-system controls on file data: a copy's chunks
/// are never more than its buffer holds.
fn fsctl_input(input: &[u8]) {
    if let Ok(c) = fsctl::CopyChunkCopy::parse(input) {
        if let Some(chunks) = c.chunks() {
            assert_eq!(chunks.len(), c.chunk_count as usize);
            assert!(32 + 24 * chunks.len() <= input.len());
        }
    }
    let _ = fsctl::parse_set_sparse(input);
    let _ = fsctl::ZeroData::parse(input);
    let _ = fsctl::AllocatedRange::parse(input);
    let _ = fsctl::DuplicateExtents::parse(input);
    let _ = fsctl::DuplicateExtents::parse_ex(input);
}

/// A descriptor that parses encodes to one that parses back to the same
/// encoding: what a client reads back is stable.
fn descriptor(buf: &[u8]) {
    let Ok(d) = Descriptor::parse(buf) else {
        return;
    };
    let once = d.encode(ALL_PARTS);
    let again = Descriptor::parse(&once).expect("our own encoding parses");
    assert_eq!(again.encode(ALL_PARTS), once, "encoding is not stable");
    // The server passes the new file's owner and group, which always exist.
    let owner = d.owner.clone().unwrap_or_else(|| sids::unix_user(1000));
    let group = d.group.clone().unwrap_or_else(|| sids::unix_group(1000));
    let _ = d.granted(&[owner.clone(), group.clone()]);
    for is_dir in [false, true] {
        // As the parent, as the creator's descriptor, and as both.
        for (parent, creator) in [(Some(&d), None), (None, Some(&d)), (Some(&d), Some(&d))] {
            if let Ok(Some(child)) =
                Descriptor::for_new_object(parent, creator, is_dir, &owner, &group)
            {
                Descriptor::parse(&child.encode(ALL_PARTS))
                    .expect("a new object's descriptor parses");
            }
        }
    }
    let mut merged = Descriptor::default();
    merged.merge(d, ALL_PARTS);
}

fn set_info(input: &[u8]) {
    let Some((&class, buf)) = input.split_first() else {
        return;
    };
    use copyless_fscc::class as c;
    match class {
        c::FILE_BASIC_INFORMATION => {
            let _ = copyless_fscc::decode_basic(buf);
        }
        c::FILE_RENAME_INFORMATION => {
            if let Ok(r) = copyless_fscc::decode_rename(buf) {
                let _ = path::from_smb_str(&r.file_name);
            }
        }
        // EAs a client sets (SET_INFO, a CREATE's ExtA), and the names a
        // query asks for: what parses, encodes back into a list that
        // parses to the same.
        c::FILE_FULL_EA_INFORMATION => {
            use copyless_fscc::ea;
            if let Ok(eas) = ea::parse_full_ea_list(buf) {
                let again = ea::encode_full_ea_list(&eas);
                assert_eq!(again.len(), ea::full_ea_list_size(&eas));
                assert_eq!(ea::parse_full_ea_list(&again).as_ref(), Ok(&eas));
            }
            let _ = ea::parse_get_ea_list(buf);
        }
        // Quota entries an administrator sets, which encode back to
        // what they were; and a quota query's SIDs, each whole.
        c::FILE_QUOTA_INFORMATION => {
            use copyless_fscc::quota;
            if let Ok(entries) = quota::parse_entries(buf) {
                let (again, count) = quota::encode_entries(&entries, usize::MAX);
                assert_eq!(count, entries.len());
                assert_eq!(quota::parse_entries(&again).as_ref(), Ok(&entries));
            }
            if let Ok(q) = quota::parse_query(buf) {
                for sid in q.sids.iter().chain(&q.start_sid) {
                    assert_eq!(sid.len(), 8 + 4 * usize::from(sid[1]));
                }
            }
        }
        _ => {
            let _ = copyless_fscc::decode_rename_ex(buf);
            let _ = copyless_fscc::decode_disposition(buf);
            let _ = copyless_fscc::decode_u64(buf);
            let _ = copyless_fscc::decode_u32(buf);
        }
    }
}

/// The server's matcher agrees with the plain reading of the rules.
fn wildcard_vs_reference(input: &[u8]) {
    let (pattern, name) = match input.iter().position(|&b| b == 0) {
        Some(at) => (&input[..at], &input[at + 1..]),
        None => (input, &b""[..]),
    };
    let pattern = String::from_utf8_lossy(pattern);
    let name = String::from_utf8_lossy(name);
    if name.chars().count() > 255 {
        return;
    }
    match wildcard::Pattern::new(&pattern) {
        Some(p) => assert_eq!(
            p.matches(&name),
            wildcard_reference::matches(&pattern, &name),
            "pattern {pattern:?}, name {name:?}"
        ),
        None => assert!(pattern.chars().count() > wildcard::MAX_PATTERN_UNITS),
    }
}

/// A name the core accepts stays beneath the share root.
fn name(utf16le: &[u8]) {
    let Ok(path::CreateName {
        path: vfs_path,
        stream,
        ..
    }) = path::from_smb_with_stream(utf16le)
    else {
        return;
    };
    let beneath = vfs_path.is_empty()
        || vfs_path
            .split('/')
            .all(|c| !matches!(c, "" | "." | "..") && !c.contains(['\\', '\0']));
    assert!(beneath, "{vfs_path:?} leaves the share");
    if let Some(s) = stream {
        assert!(
            !s.is_empty() && !s.contains(['\\', '/', ':', '\0']),
            "stream {s:?}"
        );
    }
}
