//! Requests and responses of the SMB2 commands past NEGOTIATE
//! (MS-SMB2 2.2.5 - 2.2.40). Request parsers take the whole message from
//! the header on, since buffer offsets count from the header start.
//! Response writers append a body to a `Writer` that holds the header.

use crate::wire::{slice_at, Error, Reader, Result, Writer};
use crate::HEADER_LEN;

fn body(msg: &[u8], structure_size: u16) -> Result<Reader<'_>> {
    let mut r = Reader::at(msg, HEADER_LEN)?;
    if r.u16()? != structure_size {
        return Err(Error("bad structure size"));
    }
    Ok(r)
}

/// Persistent and volatile halves of an SMB2_FILEID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// The id a related compound request uses for "the file of the
    /// previous request".
    pub const RELATED: FileId = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<FileId> {
        Ok(FileId {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }

    fn write(&self, w: &mut Writer) {
        w.u64(self.persistent).u64(self.volatile);
    }
}

// ---- SESSION_SETUP ----

pub const SESSION_FLAG_BINDING: u8 = 0x01;
pub const SESSION_FLAG_IS_GUEST: u16 = 0x0001;
pub const SESSION_FLAG_IS_NULL: u16 = 0x0002;
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x0004;

#[derive(Debug)]
pub struct SessionSetupRequest<'a> {
    pub flags: u8,
    pub security_mode: u8,
    pub capabilities: u32,
    pub previous_session_id: u64,
    pub security_buffer: &'a [u8],
}

impl<'a> SessionSetupRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 25)?;
        let flags = r.u8()?;
        let security_mode = r.u8()?;
        let capabilities = r.u32()?;
        r.skip(4)?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let previous_session_id = r.u64()?;
        Ok(SessionSetupRequest {
            flags,
            security_mode,
            capabilities,
            previous_session_id,
            security_buffer: slice_at(msg, off, len)?,
        })
    }
}

pub fn write_session_setup_response(w: &mut Writer, session_flags: u16, token: &[u8]) {
    w.u16(9)
        .u16(session_flags)
        .u16((HEADER_LEN + 8) as u16)
        .u16(token.len() as u16)
        .bytes(token);
    if token.is_empty() {
        w.u8(0);
    }
}

// ---- small fixed bodies ----

/// LOGOFF, TREE_DISCONNECT, ECHO requests: StructureSize 4 and reserved.
pub fn parse_empty(msg: &[u8]) -> Result<()> {
    body(msg, 4).map(|_| ())
}

/// LOGOFF, TREE_DISCONNECT, ECHO responses.
pub fn write_empty_response(w: &mut Writer) {
    w.u16(4).u16(0);
}

/// ERROR response (MS-SMB2 2.2.2), with optional error data.
pub fn write_error_response(w: &mut Writer, data: &[u8]) {
    w.u16(9).u8(0).u8(0).u32(data.len() as u32);
    if data.is_empty() {
        w.u8(0);
    } else {
        w.bytes(data);
    }
}

// ---- TREE_CONNECT ----

#[derive(Debug)]
pub struct TreeConnectRequest {
    pub flags: u16,
    pub path: String,
}

impl TreeConnectRequest {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 9)?;
        let flags = r.u16()?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let path = crate::utf16::decode(slice_at(msg, off, len)?)?;
        Ok(TreeConnectRequest { flags, path })
    }
}

pub const SHARE_TYPE_DISK: u8 = 1;
pub const SHARE_TYPE_PIPE: u8 = 2;
/// ShareFlags: listings leave out what the reader may not open.
pub const SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM: u32 = 0x0000_0800;

pub fn write_tree_connect_response(
    w: &mut Writer,
    share_type: u8,
    share_flags: u32,
    capabilities: u32,
    maximal_access: u32,
) {
    w.u16(16)
        .u8(share_type)
        .u8(0)
        .u32(share_flags)
        .u32(capabilities)
        .u32(maximal_access);
}

// ---- CREATE ----

#[derive(Debug)]
pub struct CreateRequest<'a> {
    pub security_flags: u8,
    pub oplock_level: u8,
    pub impersonation_level: u32,
    pub desired_access: u32,
    pub file_attributes: u32,
    pub share_access: u32,
    pub create_disposition: u32,
    pub create_options: u32,
    /// UTF-16LE bytes, undecoded (validation is the core's).
    pub name: &'a [u8],
    pub contexts: &'a [u8],
}

impl<'a> CreateRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 57)?;
        let security_flags = r.u8()?;
        let oplock_level = r.u8()?;
        let impersonation_level = r.u32()?;
        r.skip(16)?;
        let desired_access = r.u32()?;
        let file_attributes = r.u32()?;
        let share_access = r.u32()?;
        let create_disposition = r.u32()?;
        let create_options = r.u32()?;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        let ctx_off = r.u32()? as usize;
        let ctx_len = r.u32()? as usize;
        Ok(CreateRequest {
            security_flags,
            oplock_level,
            impersonation_level,
            desired_access,
            file_attributes,
            share_access,
            create_disposition,
            create_options,
            name: slice_at(msg, name_off, name_len)?,
            contexts: slice_at(msg, ctx_off, ctx_len)?,
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct FileTimes {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub allocation_size: u64,
    pub end_of_file: u64,
    pub attributes: u32,
}

impl FileTimes {
    fn write(&self, w: &mut Writer) {
        w.u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.allocation_size)
            .u64(self.end_of_file)
            .u32(self.attributes);
    }
}

pub fn write_create_response(
    w: &mut Writer,
    oplock_level: u8,
    create_action: u32,
    times: &FileTimes,
    file_id: FileId,
    contexts: &[u8],
) {
    w.u16(89).u8(oplock_level).u8(0).u32(create_action);
    times.write(w);
    w.u32(0);
    file_id.write(w);
    let ctx_off = if contexts.is_empty() {
        0
    } else {
        HEADER_LEN + 88
    };
    w.u32(ctx_off as u32).u32(contexts.len() as u32);
    if contexts.is_empty() {
        w.u8(0);
    } else {
        w.bytes(contexts);
    }
}

// ---- CLOSE ----

pub const CLOSE_FLAG_POSTQUERY_ATTRIB: u16 = 0x0001;

#[derive(Debug)]
pub struct CloseRequest {
    pub flags: u16,
    pub file_id: FileId,
}

impl CloseRequest {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 24)?;
        let flags = r.u16()?;
        r.skip(4)?;
        Ok(CloseRequest {
            flags,
            file_id: FileId::read(&mut r)?,
        })
    }
}

/// `times` None: the flags are 0 and every attribute field is zero.
pub fn write_close_response(w: &mut Writer, times: Option<&FileTimes>) {
    w.u16(60);
    match times {
        Some(t) => {
            w.u16(CLOSE_FLAG_POSTQUERY_ATTRIB).u32(0);
            t.write(w);
        }
        None => {
            w.u16(0).u32(0).zeros(52);
        }
    }
}

// ---- LOCK ----

pub const LOCKFLAG_SHARED: u32 = 0x1;
pub const LOCKFLAG_EXCLUSIVE: u32 = 0x2;
pub const LOCKFLAG_UNLOCK: u32 = 0x4;
pub const LOCKFLAG_FAIL_IMMEDIATELY: u32 = 0x10;

/// One SMB2_LOCK_ELEMENT (MS-SMB2 2.2.26.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockElement {
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
}

/// SMB2 LOCK Request (MS-SMB2 2.2.26).
#[derive(Debug)]
pub struct LockRequest {
    /// LockSequenceNumber (low 4 bits) and LockSequenceIndex.
    pub sequence: u32,
    pub file_id: FileId,
    pub locks: Vec<LockElement>,
}

impl LockRequest {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 48)?;
        let count = usize::from(r.u16()?);
        let sequence = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        // As many as the message holds, whatever the count claims.
        let mut locks = Vec::with_capacity(count.min(r.remaining() / 24));
        for _ in 0..count {
            let (offset, length, flags) = (r.u64()?, r.u64()?, r.u32()?);
            r.skip(4)?;
            locks.push(LockElement {
                offset,
                length,
                flags,
            });
        }
        Ok(LockRequest {
            sequence,
            file_id,
            locks,
        })
    }
}

// ---- OPLOCK_BREAK ----

pub const OPLOCK_LEVEL_NONE: u8 = 0x00;
pub const OPLOCK_LEVEL_II: u8 = 0x01;
pub const OPLOCK_LEVEL_EXCLUSIVE: u8 = 0x08;
pub const OPLOCK_LEVEL_BATCH: u8 = 0x09;
pub const OPLOCK_LEVEL_LEASE: u8 = 0xFF;

/// SMB2 Oplock Break Acknowledgment (MS-SMB2 2.2.24.1): the level the
/// client lowered its oplock to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OplockBreakAck {
    pub oplock_level: u8,
    pub file_id: FileId,
}

impl OplockBreakAck {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 24)?;
        let oplock_level = r.u8()?;
        r.skip(5)?;
        let file_id = FileId::read(&mut r)?;
        Ok(OplockBreakAck {
            oplock_level,
            file_id,
        })
    }
}

/// The Oplock Break Notification and the Oplock Break Response
/// (MS-SMB2 2.2.23.1, 2.2.25.1), which share one layout.
pub fn write_oplock_break(w: &mut Writer, oplock_level: u8, file_id: FileId) {
    w.u16(24).u8(oplock_level).u8(0).u32(0);
    file_id.write(w);
}

// ---- CHANGE_NOTIFY ----

/// Watch the directory's whole subtree, not only its entries.
pub const WATCH_TREE: u16 = 0x0001;

/// SMB2 CHANGE_NOTIFY Request (MS-SMB2 2.2.35).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeNotifyRequest {
    pub flags: u16,
    pub output_buffer_length: u32,
    pub file_id: FileId,
    pub completion_filter: u32,
}

impl ChangeNotifyRequest {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 32)?;
        let flags = r.u16()?;
        let output_buffer_length = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let completion_filter = r.u32()?;
        Ok(ChangeNotifyRequest {
            flags,
            output_buffer_length,
            file_id,
            completion_filter,
        })
    }
}

/// SMB2 CHANGE_NOTIFY Response (MS-SMB2 2.2.36) around `changes`, a
/// FILE_NOTIFY_INFORMATION chain (empty when there is nothing to say).
pub fn write_change_notify_response(w: &mut Writer, changes: &[u8]) {
    let offset = if changes.is_empty() {
        0
    } else {
        HEADER_LEN as u16 + 8
    };
    w.u16(9).u16(offset).u32(changes.len() as u32);
    if changes.is_empty() {
        w.u8(0);
    } else {
        w.bytes(changes);
    }
}

// ---- FLUSH ----

pub fn parse_flush(msg: &[u8]) -> Result<FileId> {
    let mut r = body(msg, 24)?;
    r.skip(6)?;
    FileId::read(&mut r)
}

// ---- READ ----

#[derive(Debug)]
pub struct ReadRequest {
    pub flags: u8,
    pub length: u32,
    pub offset: u64,
    pub file_id: FileId,
    pub minimum_count: u32,
}

impl ReadRequest {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = body(msg, 49)?;
        r.skip(1)?;
        let flags = r.u8()?;
        let length = r.u32()?;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        let minimum_count = r.u32()?;
        Ok(ReadRequest {
            flags,
            length,
            offset,
            file_id,
            minimum_count,
        })
    }
}

/// Writes the fixed part of a READ response for `data_len` bytes of data
/// that the caller appends right after (at offset 80 from the header).
pub fn write_read_response_head(w: &mut Writer, data_len: u32) {
    w.u16(17)
        .u8((HEADER_LEN + 16) as u8)
        .u8(0)
        .u32(data_len)
        .u32(0)
        .u32(0);
}

// ---- WRITE ----

pub const WRITEFLAG_WRITE_THROUGH: u32 = 0x0000_0001;

#[derive(Debug)]
pub struct WriteRequest<'a> {
    pub offset: u64,
    pub file_id: FileId,
    pub flags: u32,
    pub data: &'a [u8],
    /// Where `data` starts in the message.
    pub data_offset: usize,
}

impl<'a> WriteRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 49)?;
        let data_off = r.u16()? as usize;
        let length = r.u32()? as usize;
        let offset = r.u64()?;
        let file_id = FileId::read(&mut r)?;
        r.skip(4 + 4 + 2 + 2)?;
        let flags = r.u32()?;
        Ok(WriteRequest {
            offset,
            file_id,
            flags,
            data: slice_at(msg, data_off, length)?,
            data_offset: data_off,
        })
    }
}

pub fn write_write_response(w: &mut Writer, count: u32) {
    w.u16(17).u16(0).u32(count).u32(0).u16(0).u16(0);
}

// ---- QUERY_DIRECTORY ----

pub const QD_RESTART_SCANS: u8 = 0x01;
pub const QD_RETURN_SINGLE_ENTRY: u8 = 0x02;
pub const QD_INDEX_SPECIFIED: u8 = 0x04;
pub const QD_REOPEN: u8 = 0x10;

#[derive(Debug)]
pub struct QueryDirectoryRequest<'a> {
    pub class: u8,
    pub flags: u8,
    pub file_index: u32,
    pub file_id: FileId,
    pub pattern: &'a [u8],
    pub output_buffer_length: u32,
}

impl<'a> QueryDirectoryRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 33)?;
        let class = r.u8()?;
        let flags = r.u8()?;
        let file_index = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let off = r.u16()? as usize;
        let len = r.u16()? as usize;
        let output_buffer_length = r.u32()?;
        Ok(QueryDirectoryRequest {
            class,
            flags,
            file_index,
            file_id,
            pattern: slice_at(msg, off, len)?,
            output_buffer_length,
        })
    }
}

/// QUERY_DIRECTORY, QUERY_INFO and IOCTL-less "buffer" responses share
/// this shape: StructureSize 9, offset, length, data.
pub fn write_buffer_response(w: &mut Writer, data: &[u8]) {
    w.u16(9).u16((HEADER_LEN + 8) as u16).u32(data.len() as u32);
    if data.is_empty() {
        w.u8(0);
    } else {
        w.bytes(data);
    }
}

// ---- QUERY_INFO ----

pub const INFO_FILE: u8 = 1;
pub const INFO_FILESYSTEM: u8 = 2;
pub const INFO_SECURITY: u8 = 3;
pub const INFO_QUOTA: u8 = 4;

#[derive(Debug)]
pub struct QueryInfoRequest<'a> {
    pub info_type: u8,
    pub class: u8,
    pub output_buffer_length: u32,
    pub input: &'a [u8],
    pub additional_information: u32,
    pub flags: u32,
    pub file_id: FileId,
}

impl<'a> QueryInfoRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 41)?;
        let info_type = r.u8()?;
        let class = r.u8()?;
        let output_buffer_length = r.u32()?;
        let in_off = r.u16()? as usize;
        r.skip(2)?;
        let in_len = r.u32()? as usize;
        let additional_information = r.u32()?;
        let flags = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        Ok(QueryInfoRequest {
            info_type,
            class,
            output_buffer_length,
            input: slice_at(msg, in_off, in_len)?,
            additional_information,
            flags,
            file_id,
        })
    }
}

// ---- SET_INFO ----

#[derive(Debug)]
pub struct SetInfoRequest<'a> {
    pub info_type: u8,
    pub class: u8,
    pub buffer: &'a [u8],
    pub additional_information: u32,
    pub file_id: FileId,
}

impl<'a> SetInfoRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 33)?;
        let info_type = r.u8()?;
        let class = r.u8()?;
        let len = r.u32()? as usize;
        let off = r.u16()? as usize;
        r.skip(2)?;
        let additional_information = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        Ok(SetInfoRequest {
            info_type,
            class,
            buffer: slice_at(msg, off, len)?,
            additional_information,
            file_id,
        })
    }
}

pub fn write_set_info_response(w: &mut Writer) {
    w.u16(2);
}

// ---- IOCTL ----

pub const FSCTL_DFS_GET_REFERRALS: u32 = 0x0006_0194;
pub const FSCTL_DFS_GET_REFERRALS_EX: u32 = 0x0006_01B0;
pub const FSCTL_PIPE_PEEK: u32 = 0x0011_400C;
pub const FSCTL_PIPE_WAIT: u32 = 0x0011_0018;
pub const FSCTL_PIPE_TRANSCEIVE: u32 = 0x0011_C017;
pub const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;
pub const FSCTL_QUERY_NETWORK_INTERFACE_INFO: u32 = 0x0014_01FC;
pub const IOCTL_IS_FSCTL: u32 = 0x0000_0001;

#[derive(Debug)]
pub struct IoctlRequest<'a> {
    pub ctl_code: u32,
    pub file_id: FileId,
    pub input: &'a [u8],
    pub max_input_response: u32,
    pub max_output_response: u32,
    pub flags: u32,
}

impl<'a> IoctlRequest<'a> {
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = body(msg, 57)?;
        r.skip(2)?;
        let ctl_code = r.u32()?;
        let file_id = FileId::read(&mut r)?;
        let in_off = r.u32()? as usize;
        let in_len = r.u32()? as usize;
        let max_input_response = r.u32()?;
        let _out_off = r.u32()?;
        let _out_len = r.u32()?;
        let max_output_response = r.u32()?;
        let flags = r.u32()?;
        Ok(IoctlRequest {
            ctl_code,
            file_id,
            input: slice_at(msg, in_off, in_len)?,
            max_input_response,
            max_output_response,
            flags,
        })
    }
}

pub fn write_ioctl_response(w: &mut Writer, ctl_code: u32, file_id: FileId, output: &[u8]) {
    let data_off = (HEADER_LEN + 48) as u32;
    w.u16(49).u16(0).u32(ctl_code);
    file_id.write(w);
    w.u32(data_off)
        .u32(0)
        .u32(data_off)
        .u32(output.len() as u32)
        .u32(0)
        .u32(0);
    if !output.is_empty() {
        w.bytes(output);
    }
}

/// FSCTL_VALIDATE_NEGOTIATE_INFO input (MS-SMB2 2.2.31.4).
#[derive(Debug)]
pub struct ValidateNegotiateInfo {
    pub capabilities: u32,
    pub guid: [u8; 16],
    pub security_mode: u16,
    pub dialects: Vec<u16>,
}

impl ValidateNegotiateInfo {
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        let capabilities = r.u32()?;
        let guid = r.array()?;
        let security_mode = r.u16()?;
        let count = r.u16()? as usize;
        let mut dialects = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            dialects.push(r.u16()?);
        }
        Ok(ValidateNegotiateInfo {
            capabilities,
            guid,
            security_mode,
            dialects,
        })
    }
}

// ---- any command ----

/// The FileId the request `msg` of `command` names, where the command
/// carries one: a related request after it in a compound acts on the
/// same file (MS-SMB2 3.3.5.2.7.2). None for commands without one (an
/// oplock break acknowledgment has one, a lease break acknowledgment
/// has not) and for a body too short to hold it; the handler refuses
/// those.
pub fn named_file_id(command: u16, msg: &[u8]) -> Option<FileId> {
    use crate::command as cmd;
    // Where the FileId lies in each command's fixed part.
    let at = match command {
        cmd::CLOSE
        | cmd::FLUSH
        | cmd::LOCK
        | cmd::IOCTL
        | cmd::QUERY_DIRECTORY
        | cmd::CHANGE_NOTIFY => 8,
        cmd::OPLOCK_BREAK => return OplockBreakAck::parse(msg).ok().map(|a| a.file_id),
        cmd::READ | cmd::WRITE | cmd::SET_INFO => 16,
        cmd::QUERY_INFO => 24,
        _ => return None,
    };
    let mut r = Reader::at(msg, HEADER_LEN + at).ok()?;
    FileId::read(&mut r).ok()
}

// ---- CANCEL ----

pub fn parse_cancel(msg: &[u8]) -> Result<()> {
    body(msg, 4).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;

    fn msg(body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        Header::default().write(&mut v);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn write_request_checks_data_bounds() {
        let mut w = Writer::new();
        w.u16(49).u16(112).u32(4).u64(10).u64(1).u64(2);
        w.u32(0).u32(0).u16(0).u16(0).u32(1);
        w.bytes(b"data");
        let m = msg(&w.buf);
        let req = WriteRequest::parse(&m).unwrap();
        assert_eq!(req.data, b"data");
        assert_eq!(req.offset, 10);
        assert_eq!(req.flags, WRITEFLAG_WRITE_THROUGH);
        assert!(WriteRequest::parse(&m[..m.len() - 1]).is_err());
    }

    #[test]
    fn named_file_ids_lie_where_each_command_keeps_them() {
        let id = FileId {
            persistent: 7,
            volatile: 9,
        };
        let mut flush = Writer::new();
        flush.u16(24).u16(0).u32(0);
        id.write(&mut flush);
        let m = msg(&flush.buf);
        assert_eq!(named_file_id(crate::command::FLUSH, &m), Some(id));
        assert_eq!(
            named_file_id(crate::command::FLUSH, &m[..m.len() - 1]),
            None
        );
        assert_eq!(named_file_id(crate::command::CREATE, &m), None);
        let mut query = Writer::new();
        query
            .u16(41)
            .u8(1)
            .u8(4)
            .u32(0)
            .u16(0)
            .u16(0)
            .u32(0)
            .u32(0)
            .u32(0);
        id.write(&mut query);
        assert_eq!(
            named_file_id(crate::command::QUERY_INFO, &msg(&query.buf)),
            Some(id)
        );
        let mut lease_ack = Writer::new();
        lease_ack.u16(36).zeros(34);
        let m = msg(&lease_ack.buf);
        assert_eq!(named_file_id(crate::command::OPLOCK_BREAK, &m), None);
    }

    #[test]
    fn truncated_bodies_are_errors() {
        let mut w = Writer::new();
        w.u16(57).zeros(56);
        let m = msg(&w.buf);
        assert!(CreateRequest::parse(&m).is_ok());
        for n in 0..HEADER_LEN + 56 {
            assert!(CreateRequest::parse(&m[..n]).is_err());
            let _ = IoctlRequest::parse(&m[..n]);
            let _ = QueryInfoRequest::parse(&m[..n]);
        }
    }
}
