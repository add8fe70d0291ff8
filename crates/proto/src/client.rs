//! The client's side of the SMB2 messages: request builders and response
//! parsers (MS-SMB2 2.2). Builders append a body to a `Writer` that already holds the
//! 64-byte header, since buffer offsets count from the header start.
//! Parsers take the whole message from the header on and check every
//! offset and length against it.

use crate::messages::{FileId, FileTimes};
use crate::negotiate::NegotiateContext;
use crate::wire::{slice_at, Error, Reader, Result, Writer};
use crate::HEADER_LEN;

fn body(msg: &[u8], structure_size: u16) -> Result<Reader<'_>> {
    let mut r = Reader::at(msg, HEADER_LEN)?;
    if r.u16()? != structure_size {
        return Err(Error("bad structure size"));
    }
    Ok(r)
}

fn read_file_id(r: &mut Reader<'_>) -> Result<FileId> {
    Ok(FileId {
        persistent: r.u64()?,
        volatile: r.u64()?,
    })
}

fn write_file_id(w: &mut Writer, id: FileId) {
    w.u64(id.persistent).u64(id.volatile);
}

fn read_times(r: &mut Reader<'_>) -> Result<FileTimes> {
    Ok(FileTimes {
        creation_time: r.u64()?,
        last_access_time: r.u64()?,
        last_write_time: r.u64()?,
        change_time: r.u64()?,
        allocation_size: r.u64()?,
        end_of_file: r.u64()?,
        attributes: r.u32()?,
    })
}

/// Lengths of what a client builds itself must fit the 16-bit fields that
/// carry them; a longer one is the caller's bug, reported as an error.
fn u16_len(n: usize) -> Result<u16> {
    u16::try_from(n).map_err(|_| Error("field longer than 65535 bytes"))
}

fn u32_len(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error("field longer than 4 GiB"))
}

// ---- NEGOTIATE ----

/// What a client offers in NEGOTIATE (MS-SMB2 2.2.3).
#[derive(Debug, Clone)]
pub struct NegotiateOffer<'a> {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: [u8; 16],
    pub dialects: &'a [u16],
    /// (type, data) pairs; sent only when 3.1.1 is among the dialects.
    pub contexts: &'a [(u16, Vec<u8>)],
}

pub fn write_negotiate_request(w: &mut Writer, offer: &NegotiateOffer<'_>) -> Result<()> {
    let send_contexts = offer.dialects.contains(&crate::negotiate::DIALECT_311);
    let ctx_count = if send_contexts {
        u16_len(offer.contexts.len())?
    } else {
        0
    };
    w.u16(36)
        .u16(u16_len(offer.dialects.len())?)
        .u16(offer.security_mode)
        .u16(0)
        .u32(offer.capabilities)
        .bytes(&offer.client_guid);
    let ctx_off_pos = w.len();
    w.u32(0).u16(ctx_count).u16(0);
    for d in offer.dialects {
        w.u16(*d);
    }
    if ctx_count > 0 {
        w.align(8);
        let off = u32_len(w.len())?;
        w.put_u32_at(ctx_off_pos, off);
        for (i, (t, data)) in offer.contexts.iter().enumerate() {
            if i > 0 {
                w.align(8);
            }
            w.u16(*t).u16(u16_len(data.len())?).u32(0).bytes(data);
        }
    }
    Ok(())
}

/// A NEGOTIATE response as the client reads it.
#[derive(Debug, Clone)]
pub struct NegotiateReply<'a> {
    pub security_mode: u16,
    pub dialect: u16,
    pub server_guid: [u8; 16],
    pub capabilities: u32,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    pub security_buffer: &'a [u8],
    pub contexts: Vec<NegotiateContext<'a>>,
}

impl<'a> NegotiateReply<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 65)?;
        let security_mode = r.u16()?;
        let dialect = r.u16()?;
        let ctx_count = r.u16()? as usize;
        let server_guid = r.array()?;
        let capabilities = r.u32()?;
        let max_transact_size = r.u32()?;
        let max_read_size = r.u32()?;
        let max_write_size = r.u32()?;
        r.skip(16)?; // SystemTime, ServerStartTime
        let sec_off = r.u16()? as usize;
        let sec_len = r.u16()? as usize;
        let ctx_off = r.u32()? as usize;
        let security_buffer = slice_at(msg, sec_off, sec_len)?;
        let contexts = if dialect == crate::negotiate::DIALECT_311 {
            crate::negotiate::parse_contexts(msg, ctx_off, ctx_count)?
        } else {
            Vec::new()
        };
        Ok(NegotiateReply {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            security_buffer,
            contexts,
        })
    }

    pub fn context(&self, context_type: u16) -> Option<&NegotiateContext<'a>> {
        self.contexts
            .iter()
            .find(|c| c.context_type == context_type)
    }
}

// ---- SESSION_SETUP ----

/// `previous_session_id` names the session this client had before it
/// reconnected (0: none).
pub fn write_session_setup_request(
    w: &mut Writer,
    security_mode: u8,
    capabilities: u32,
    previous_session_id: u64,
    token: &[u8],
) -> Result<()> {
    let off = u16_len(HEADER_LEN + 24)?;
    w.u16(25)
        .u8(0)
        .u8(security_mode)
        .u32(capabilities)
        .u32(0)
        .u16(off)
        .u16(u16_len(token.len())?)
        .u64(previous_session_id)
        .bytes(token);
    Ok(())
}

#[derive(Debug)]
pub struct SessionSetupReply<'a> {
    pub session_flags: u16,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupReply<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 9)?;
        let session_flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        Ok(SessionSetupReply {
            session_flags,
            security_buffer: slice_at(msg, off, len)?,
        })
    }
}

// ---- TREE_CONNECT ----

/// `path` is the UNC path `\\server\share`.
pub fn write_tree_connect_request(w: &mut Writer, path: &str) -> Result<()> {
    let name = crate::utf16::encode(path);
    w.u16(9)
        .u16(0)
        .u16(u16_len(HEADER_LEN + 8)?)
        .u16(u16_len(name.len())?)
        .bytes(&name);
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeConnectReply {
    pub share_type: u8,
    pub share_flags: u32,
    pub capabilities: u32,
    pub maximal_access: u32,
}

impl TreeConnectReply {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 16)?;
        let share_type = r.u8()?;
        r.skip(1)?;
        Ok(TreeConnectReply {
            share_type,
            share_flags: r.u32()?,
            capabilities: r.u32()?,
            maximal_access: r.u32()?,
        })
    }
}

// ---- CREATE ----

pub const DISPOSITION_SUPERSEDE: u32 = 0;
pub const DISPOSITION_OPEN: u32 = 1;
pub const DISPOSITION_CREATE: u32 = 2;
pub const DISPOSITION_OPEN_IF: u32 = 3;
pub const DISPOSITION_OVERWRITE: u32 = 4;
pub const DISPOSITION_OVERWRITE_IF: u32 = 5;

pub const OPTION_DIRECTORY_FILE: u32 = 0x0000_0001;
pub const OPTION_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
pub const OPTION_DELETE_ON_CLOSE: u32 = 0x0000_1000;

pub const SHARE_READ: u32 = 1;
pub const SHARE_WRITE: u32 = 2;
pub const SHARE_DELETE: u32 = 4;

pub const ACCESS_READ_DATA: u32 = 0x0000_0001;
pub const ACCESS_WRITE_DATA: u32 = 0x0000_0002;
pub const ACCESS_APPEND_DATA: u32 = 0x0000_0004;
pub const ACCESS_READ_EA: u32 = 0x0000_0008;
pub const ACCESS_WRITE_EA: u32 = 0x0000_0010;
pub const ACCESS_READ_ATTRIBUTES: u32 = 0x0000_0080;
pub const ACCESS_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
pub const ACCESS_DELETE: u32 = 0x0001_0000;
pub const ACCESS_READ_CONTROL: u32 = 0x0002_0000;
pub const ACCESS_SYNCHRONIZE: u32 = 0x0010_0000;

pub const ATTRIBUTE_NORMAL: u32 = 0x0000_0080;
pub const ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;

/// IMPERSONATION_LEVEL Impersonation, what Windows and Samba send.
pub const IMPERSONATION: u32 = 2;

#[derive(Debug, Clone)]
pub struct CreateParams<'a> {
    pub oplock_level: u8,
    pub desired_access: u32,
    pub file_attributes: u32,
    pub share_access: u32,
    pub disposition: u32,
    pub options: u32,
    /// Path relative to the share root, with backslashes.
    pub name: &'a str,
    /// Already encoded create contexts (MS-SMB2 2.2.13.2), or empty.
    pub contexts: &'a [u8],
}

pub fn write_create_request(w: &mut Writer, p: &CreateParams<'_>) -> Result<()> {
    let name = crate::utf16::encode(p.name);
    let name_off = HEADER_LEN + 56;
    w.u16(57)
        .u8(0)
        .u8(p.oplock_level)
        .u32(IMPERSONATION)
        .zeros(16)
        .u32(p.desired_access)
        .u32(p.file_attributes)
        .u32(p.share_access)
        .u32(p.disposition)
        .u32(p.options)
        .u16(u16_len(name_off)?)
        .u16(u16_len(name.len())?);
    let ctx_pos = w.len();
    w.u32(0).u32(0);
    w.bytes(&name);
    if p.contexts.is_empty() {
        if name.is_empty() {
            // The Buffer field is at least one byte long.
            w.u8(0);
        }
    } else {
        w.align(8);
        let off = u32_len(w.len())?;
        w.put_u32_at(ctx_pos, off);
        w.put_u32_at(ctx_pos + 4, u32_len(p.contexts.len())?);
        w.bytes(p.contexts);
    }
    Ok(())
}

#[derive(Debug, Clone)]
pub struct CreateReply<'a> {
    pub oplock_level: u8,
    pub create_action: u32,
    pub times: FileTimes,
    pub file_id: FileId,
    pub contexts: &'a [u8],
}

impl<'a> CreateReply<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 89)?;
        let oplock_level = r.u8()?;
        r.skip(1)?;
        let create_action = r.u32()?;
        let times = read_times(&mut r)?;
        r.skip(4)?;
        let file_id = read_file_id(&mut r)?;
        let off = r.u32()? as usize;
        let len = r.u32()? as usize;
        Ok(CreateReply {
            oplock_level,
            create_action,
            times,
            file_id,
            contexts: slice_at(msg, off, len)?,
        })
    }
}

// ---- CLOSE ----

pub fn write_close_request(w: &mut Writer, flags: u16, file_id: FileId) {
    w.u16(24).u16(flags).u32(0);
    write_file_id(w, file_id);
}

/// The attributes a CLOSE reply carries when POSTQUERY_ATTRIB was asked.
pub fn parse_close_response(msg: &[u8]) -> Result<(u16, FileTimes)> {
    let mut r = body(msg, 60)?;
    let flags = r.u16()?;
    r.skip(4)?;
    Ok((flags, read_times(&mut r)?))
}

// ---- FLUSH, ECHO, LOGOFF, TREE_DISCONNECT ----

pub fn write_flush_request(w: &mut Writer, file_id: FileId) {
    w.u16(24).u16(0).u32(0);
    write_file_id(w, file_id);
}

/// ECHO, LOGOFF and TREE_DISCONNECT requests: StructureSize 4, reserved.
pub fn write_empty_request(w: &mut Writer) {
    w.u16(4).u16(0);
}

// ---- READ ----

pub fn write_read_request(
    w: &mut Writer,
    file_id: FileId,
    offset: u64,
    length: u32,
    minimum_count: u32,
) {
    w.u16(49).u8(0).u8(0).u32(length).u64(offset);
    write_file_id(w, file_id);
    w.u32(minimum_count)
        .u32(0) // Channel
        .u32(0) // RemainingBytes
        .u16(0)
        .u16(0)
        // The Buffer field must be one byte long even when empty.
        .u8(0);
}

/// The data of a READ response.
pub fn read_response_data(msg: &[u8]) -> Result<&[u8]> {
    let mut r = body(msg, 17)?;
    let off = r.u8()? as usize;
    r.skip(1)?;
    let len = r.u32()? as usize;
    slice_at(msg, off, len)
}

// ---- WRITE ----

/// Offset of the data in a WRITE request built here.
pub const WRITE_DATA_OFFSET: usize = HEADER_LEN + 48;

/// Writes the fixed part of a WRITE request for `len` bytes of data that
/// the caller appends right after (at [`WRITE_DATA_OFFSET`]).
pub fn write_write_request_head(
    w: &mut Writer,
    file_id: FileId,
    offset: u64,
    len: u32,
    flags: u32,
) {
    w.u16(49).u16(WRITE_DATA_OFFSET as u16).u32(len).u64(offset);
    write_file_id(w, file_id);
    w.u32(0) // Channel
        .u32(0) // RemainingBytes
        .u16(0)
        .u16(0)
        .u32(flags);
}

/// Count of bytes written.
pub fn parse_write_response(msg: &[u8]) -> Result<u32> {
    let mut r = body(msg, 17)?;
    r.skip(2)?;
    r.u32()
}

// ---- QUERY_INFO, SET_INFO, QUERY_DIRECTORY ----

#[allow(clippy::too_many_arguments)]
pub fn write_query_info_request(
    w: &mut Writer,
    info_type: u8,
    class: u8,
    output_buffer_length: u32,
    additional_information: u32,
    flags: u32,
    file_id: FileId,
) {
    w.u16(41)
        .u8(info_type)
        .u8(class)
        .u32(output_buffer_length)
        .u16(0) // InputBufferOffset
        .u16(0)
        .u32(0) // InputBufferLength
        .u32(additional_information)
        .u32(flags);
    write_file_id(w, file_id);
    w.u8(0);
}

pub fn write_set_info_request(
    w: &mut Writer,
    info_type: u8,
    class: u8,
    additional_information: u32,
    file_id: FileId,
    buffer: &[u8],
) -> Result<()> {
    w.u16(33)
        .u8(info_type)
        .u8(class)
        .u32(u32_len(buffer.len())?)
        .u16(u16_len(HEADER_LEN + 32)?)
        .u16(0)
        .u32(additional_information);
    write_file_id(w, file_id);
    w.bytes(buffer);
    if buffer.is_empty() {
        w.u8(0);
    }
    Ok(())
}

pub fn write_query_directory_request(
    w: &mut Writer,
    class: u8,
    flags: u8,
    file_id: FileId,
    pattern: &str,
    output_buffer_length: u32,
) -> Result<()> {
    let pattern = crate::utf16::encode(pattern);
    w.u16(33).u8(class).u8(flags).u32(0);
    write_file_id(w, file_id);
    w.u16(u16_len(HEADER_LEN + 32)?)
        .u16(u16_len(pattern.len())?)
        .u32(output_buffer_length)
        .bytes(&pattern);
    if pattern.is_empty() {
        w.u8(0);
    }
    Ok(())
}

/// The output of a QUERY_INFO or QUERY_DIRECTORY response (StructureSize
/// 9, a 16-bit offset and a 32-bit length).
pub fn buffer_response_data(msg: &[u8]) -> Result<&[u8]> {
    let mut r = body(msg, 9)?;
    let off = r.u16()? as usize;
    let len = r.u32()? as usize;
    slice_at(msg, off, len)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::header::Header;
    use crate::messages::{self, CreateRequest, QueryDirectoryRequest, QueryInfoRequest};
    use crate::messages::{ReadRequest, SetInfoRequest, TreeConnectRequest, WriteRequest};
    use crate::negotiate::{self as neg, NegotiateRequest, NegotiateResponse};

    fn with_header() -> Writer {
        let mut w = Writer::new();
        Header::default().write(&mut w.buf);
        w
    }

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // The NEGOTIATE request of Microsoft's "SMB 2 and SMB 3 security in
    // Windows 10: the anatomy of signing and cryptographic keys" (the 3.1.1
    // example): five dialects, a preauth context with a 32-byte salt and an
    // encryption context offering AES-128-GCM and AES-128-CCM.
    const MS_NEGOTIATE_REQUEST: &str = "
        FE534D4240000100000000000000800000000000000000000100000000000000FFFE000000000000
        00000000000000000000000000000000000000000000000024000500000000003F000000ECD86F32
        6276024F9F7752B89BB33F3A70000000020000000202100200030203110300000100260000000000
        010020000100FA49E6578F1F3A9F4CD3E9CC14A67AA884B3D05844E0E5A118225C15887F32FF0000
        0200060000000000020002000100";

    #[test]
    fn negotiate_request_reproduces_microsoft_example() {
        let want = hex(MS_NEGOTIATE_REQUEST);
        let mut w = Writer::new();
        w.bytes(&want[..HEADER_LEN]);
        let mut salt = [0u8; 32];
        salt.copy_from_slice(&want[HEADER_LEN + 62..HEADER_LEN + 94]);
        let contexts = vec![
            (neg::CTX_PREAUTH_INTEGRITY, neg::preauth_context(&salt)),
            (neg::CTX_ENCRYPTION, neg::id_list_context(&[2, 1])),
        ];
        let guid: [u8; 16] = want[HEADER_LEN + 12..HEADER_LEN + 28].try_into().unwrap();
        let offer = NegotiateOffer {
            security_mode: 0,
            capabilities: 0x3f,
            client_guid: guid,
            dialects: &[0x0202, 0x0210, 0x0300, 0x0302, 0x0311],
            contexts: &contexts,
        };
        write_negotiate_request(&mut w, &offer).unwrap();
        assert_eq!(w.buf, want);
        // And the server's parser agrees.
        let req = NegotiateRequest::parse(&w.buf).unwrap();
        assert_eq!(req.dialects.len(), 5);
        assert_eq!(req.contexts.len(), 2);
    }

    #[test]
    fn negotiate_reply_round_trip_and_truncation() {
        let mut w = with_header();
        let contexts = vec![
            (neg::CTX_PREAUTH_INTEGRITY, neg::preauth_context(&[7; 32])),
            (neg::CTX_SIGNING, neg::id_list_context(&[2])),
        ];
        NegotiateResponse {
            security_mode: 3,
            dialect: neg::DIALECT_311,
            server_guid: [9; 16],
            capabilities: neg::CAP_LARGE_MTU,
            max_transact_size: 1 << 20,
            max_read_size: 1 << 21,
            max_write_size: 1 << 22,
            system_time: 1,
            server_start_time: 0,
            security_buffer: b"token",
            contexts,
        }
        .write(&mut w);
        let reply = NegotiateReply::parse(&w.buf).unwrap();
        assert_eq!(reply.dialect, neg::DIALECT_311);
        assert_eq!(reply.security_mode, 3);
        assert_eq!(reply.max_read_size, 1 << 21);
        assert_eq!(reply.max_write_size, 1 << 22);
        assert_eq!(reply.security_buffer, b"token");
        assert_eq!(
            neg::parse_id_list(reply.context(neg::CTX_SIGNING).unwrap().data).unwrap(),
            vec![2]
        );
        for n in 0..w.buf.len() {
            assert!(NegotiateReply::parse(&w.buf[..n]).is_err(), "length {n}");
        }
    }

    #[test]
    fn requests_parse_with_the_server_parsers() {
        let mut w = with_header();
        write_tree_connect_request(&mut w, "\\\\host\\share").unwrap();
        assert_eq!(
            TreeConnectRequest::parse(&w.buf).unwrap().path,
            "\\\\host\\share"
        );

        let mut w = with_header();
        write_create_request(
            &mut w,
            &CreateParams {
                oplock_level: 0,
                desired_access: ACCESS_READ_DATA | ACCESS_DELETE,
                file_attributes: ATTRIBUTE_NORMAL,
                share_access: SHARE_READ,
                disposition: DISPOSITION_OVERWRITE_IF,
                options: OPTION_NON_DIRECTORY_FILE,
                name: "dir\\f.txt",
                contexts: b"ctx-bytes",
            },
        )
        .unwrap();
        let c = CreateRequest::parse(&w.buf).unwrap();
        assert_eq!(c.name, crate::utf16::encode("dir\\f.txt").as_slice());
        assert_eq!(c.contexts, b"ctx-bytes");
        assert_eq!(c.create_disposition, DISPOSITION_OVERWRITE_IF);
        assert_eq!(c.desired_access, ACCESS_READ_DATA | ACCESS_DELETE);

        let id = FileId {
            persistent: 1,
            volatile: 2,
        };
        let mut w = with_header();
        write_read_request(&mut w, id, 4096, 65536, 1);
        let r = ReadRequest::parse(&w.buf).unwrap();
        assert_eq!((r.offset, r.length, r.file_id), (4096, 65536, id));

        let mut w = with_header();
        write_write_request_head(&mut w, id, 8, 4, 0);
        assert_eq!(w.len(), WRITE_DATA_OFFSET);
        w.bytes(b"abcd");
        let wr = WriteRequest::parse(&w.buf).unwrap();
        assert_eq!((wr.offset, wr.data, wr.file_id), (8, &b"abcd"[..], id));

        let mut w = with_header();
        write_query_info_request(&mut w, 1, 5, 1024, 0, 0, id);
        let q = QueryInfoRequest::parse(&w.buf).unwrap();
        assert_eq!((q.info_type, q.class, q.output_buffer_length), (1, 5, 1024));

        let mut w = with_header();
        write_set_info_request(&mut w, 1, 20, 0, id, &100u64.to_le_bytes()).unwrap();
        let s = SetInfoRequest::parse(&w.buf).unwrap();
        assert_eq!((s.class, s.buffer), (20, &100u64.to_le_bytes()[..]));

        let mut w = with_header();
        write_query_directory_request(&mut w, 37, 1, id, "*", 65536).unwrap();
        let d = QueryDirectoryRequest::parse(&w.buf).unwrap();
        assert_eq!((d.class, d.flags, d.pattern), (37, 1, &b"*\0"[..]));

        let mut w = with_header();
        write_close_request(&mut w, 1, id);
        let cl = messages::CloseRequest::parse(&w.buf).unwrap();
        assert_eq!((cl.flags, cl.file_id), (1, id));
    }

    #[test]
    fn responses_parse_what_the_server_writes() {
        let id = FileId {
            persistent: 5,
            volatile: 6,
        };
        let times = FileTimes {
            end_of_file: 10,
            attributes: ATTRIBUTE_NORMAL,
            ..FileTimes::default()
        };
        let mut w = with_header();
        messages::write_create_response(&mut w, 0, 2, &times, id, b"");
        let c = CreateReply::parse(&w.buf).unwrap();
        assert_eq!(
            (c.file_id, c.create_action, c.times.end_of_file),
            (id, 2, 10)
        );
        for n in 0..w.buf.len() - 1 {
            assert!(CreateReply::parse(&w.buf[..n]).is_err());
        }

        let mut w = with_header();
        messages::write_read_response_head(&mut w, 3);
        w.bytes(b"xyz");
        assert_eq!(read_response_data(&w.buf).unwrap(), b"xyz");
        assert!(read_response_data(&w.buf[..w.buf.len() - 1]).is_err());

        let mut w = with_header();
        messages::write_write_response(&mut w, 4096);
        assert_eq!(parse_write_response(&w.buf).unwrap(), 4096);

        let mut w = with_header();
        messages::write_buffer_response(&mut w, b"info");
        assert_eq!(buffer_response_data(&w.buf).unwrap(), b"info");

        let mut w = with_header();
        messages::write_session_setup_response(&mut w, 1, b"spnego");
        let s = SessionSetupReply::parse(&w.buf).unwrap();
        assert_eq!((s.session_flags, s.security_buffer), (1, &b"spnego"[..]));

        let mut w = with_header();
        messages::write_tree_connect_response(&mut w, 1, 0x30, 0, 0x1f01ff);
        let t = TreeConnectReply::parse(&w.buf).unwrap();
        assert_eq!(
            (t.share_type, t.share_flags, t.maximal_access),
            (1, 0x30, 0x1f01ff)
        );

        let mut w = with_header();
        messages::write_close_response(&mut w, Some(&times));
        let (flags, t) = parse_close_response(&w.buf).unwrap();
        assert_eq!((flags, t.end_of_file), (1, 10));
    }
}
