//! Requests the workloads send, built as [`Msg`]s, and the few blocking
//! helpers that setup code uses (make a directory, create a file of some
//! size, remove a tree).

use copyless_proto::client::{self as wire, CreateParams, CreateReply};
use copyless_proto::command;
use copyless_proto::messages::FileId;
use copyless_proto::status;

use super::{Connection, Error, Msg};

pub use copyless_proto::client::{
    ACCESS_DELETE, ACCESS_READ_ATTRIBUTES, ACCESS_READ_CONTROL, ACCESS_READ_DATA, ACCESS_READ_EA,
    ACCESS_SYNCHRONIZE, ACCESS_WRITE_ATTRIBUTES, ACCESS_WRITE_DATA, ACCESS_WRITE_EA,
    ATTRIBUTE_DIRECTORY, ATTRIBUTE_NORMAL, DISPOSITION_CREATE, DISPOSITION_OPEN,
    DISPOSITION_OPEN_IF, DISPOSITION_OVERWRITE_IF, OPTION_DELETE_ON_CLOSE, OPTION_DIRECTORY_FILE,
    OPTION_NON_DIRECTORY_FILE, SHARE_DELETE, SHARE_READ, SHARE_WRITE,
};

/// SMB2 QUERY_INFO / SET_INFO InfoType for files (MS-SMB2 2.2.37).
pub const INFO_FILE: u8 = 1;
// File information classes (MS-FSCC 2.4).
pub const FILE_BASIC_INFORMATION: u8 = 4;
pub const FILE_STANDARD_INFORMATION: u8 = 5;
pub const FILE_RENAME_INFORMATION: u8 = 10;
pub const FILE_ALL_INFORMATION: u8 = 18;
pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;
pub const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 37;

/// QUERY_DIRECTORY flag: start from the beginning.
pub const RESTART_SCANS: u8 = 0x01;

/// Read and write access as a copy program asks for it.
pub const ACCESS_RW: u32 = ACCESS_READ_DATA
    | ACCESS_WRITE_DATA
    | ACCESS_READ_ATTRIBUTES
    | ACCESS_WRITE_ATTRIBUTES
    | ACCESS_READ_EA
    | ACCESS_WRITE_EA
    | ACCESS_READ_CONTROL
    | ACCESS_SYNCHRONIZE;

pub const SHARE_ALL: u32 = SHARE_READ | SHARE_WRITE | SHARE_DELETE;

pub fn create(
    name: &str,
    desired_access: u32,
    disposition: u32,
    options: u32,
) -> Result<Msg, Error> {
    let mut msg = Msg::new(command::CREATE);
    let file_attributes = if options & OPTION_DIRECTORY_FILE != 0 {
        ATTRIBUTE_DIRECTORY
    } else {
        ATTRIBUTE_NORMAL
    };
    wire::write_create_request(
        &mut msg.buf,
        &CreateParams {
            oplock_level: 0,
            desired_access,
            file_attributes,
            share_access: SHARE_ALL,
            disposition,
            options,
            name,
            contexts: &[],
        },
    )?;
    Ok(msg)
}

pub fn close(file_id: FileId) -> Msg {
    let mut msg = Msg::new(command::CLOSE);
    wire::write_close_request(&mut msg.buf, 0, file_id);
    msg
}

pub fn read(file_id: FileId, offset: u64, length: u32) -> Msg {
    let mut msg = Msg::new(command::READ);
    wire::write_read_request(&mut msg.buf, file_id, offset, length, 0);
    msg.reply_size = length;
    msg
}

pub fn write(file_id: FileId, offset: u64, data: &[u8]) -> Result<Msg, Error> {
    let len =
        u32::try_from(data.len()).map_err(|_| Error::Protocol("write larger than 4 GiB".into()))?;
    let mut msg = Msg::new(command::WRITE);
    msg.buf.buf.reserve(48 + data.len());
    wire::write_write_request_head(&mut msg.buf, file_id, offset, len, 0);
    msg.buf.bytes(data);
    msg.payload = len;
    Ok(msg)
}

pub fn query_info(file_id: FileId, class: u8, output_len: u32) -> Msg {
    let mut msg = Msg::new(command::QUERY_INFO);
    wire::write_query_info_request(&mut msg.buf, INFO_FILE, class, output_len, 0, 0, file_id);
    msg.reply_size = output_len;
    msg
}

pub fn set_info(file_id: FileId, class: u8, buffer: &[u8]) -> Result<Msg, Error> {
    let mut msg = Msg::new(command::SET_INFO);
    wire::write_set_info_request(&mut msg.buf, INFO_FILE, class, 0, file_id, buffer)?;
    Ok(msg)
}

pub fn query_directory(file_id: FileId, flags: u8, output_len: u32) -> Result<Msg, Error> {
    let mut msg = Msg::new(command::QUERY_DIRECTORY);
    wire::write_query_directory_request(
        &mut msg.buf,
        FILE_ID_BOTH_DIRECTORY_INFORMATION,
        flags,
        file_id,
        "*",
        output_len,
    )?;
    msg.reply_size = output_len;
    Ok(msg)
}

pub fn echo() -> Msg {
    let mut msg = Msg::new(command::ECHO);
    wire::write_empty_request(&mut msg.buf);
    msg
}

/// FileEndOfFileInformation (MS-FSCC 2.4.14).
pub fn end_of_file_info(size: u64) -> [u8; 8] {
    size.to_le_bytes()
}

/// FileBasicInformation (MS-FSCC 2.4.7) setting only the last write time,
/// as a copy does to carry the source's time over; zero means "leave".
pub fn basic_info_write_time(filetime: u64) -> [u8; 40] {
    let mut out = [0u8; 40];
    out[16..24].copy_from_slice(&filetime.to_le_bytes());
    out
}

/// FileRenameInformation for SMB2 (MS-FSCC 2.4.42.2): replace-if-exists
/// off, no root directory, the new name relative to the share root.
pub fn rename_info(new_name: &str) -> Vec<u8> {
    let name = copyless_proto::utf16::encode(new_name);
    let mut out = vec![0u8; 20];
    out[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&name);
    // The structure is at least 24 bytes long.
    if out.len() < 24 {
        out.resize(24, 0);
    }
    out
}

/// The FileId of a CREATE reply, after checking its status.
pub fn created(reply: super::Reply, what: &str) -> Result<FileId, Error> {
    let reply = reply.check(what)?;
    Ok(CreateReply::parse(&reply.msg)?.file_id)
}

/// Opens (creating if needed) a directory, and closes it again.
pub fn make_dir(conn: &mut Connection, path: &str) -> Result<(), Error> {
    let reply = conn.call(create(
        path,
        ACCESS_READ_ATTRIBUTES | ACCESS_SYNCHRONIZE,
        DISPOSITION_OPEN_IF,
        OPTION_DIRECTORY_FILE,
    )?)?;
    let id = created(reply, path)?;
    conn.call(close(id))?.check(path)?;
    Ok(())
}

/// Makes every directory along `path` (backslash-separated).
pub fn make_dirs(conn: &mut Connection, path: &str) -> Result<(), Error> {
    let mut so_far = String::new();
    for part in path.split('\\').filter(|p| !p.is_empty()) {
        if !so_far.is_empty() {
            so_far.push('\\');
        }
        so_far.push_str(part);
        make_dir(conn, &so_far)?;
    }
    Ok(())
}

/// Opens a file for reading and writing, creating it if missing.
pub fn open_file(conn: &mut Connection, path: &str, disposition: u32) -> Result<FileId, Error> {
    let reply = conn.call(create(
        path,
        ACCESS_RW,
        disposition,
        OPTION_NON_DIRECTORY_FILE,
    )?)?;
    created(reply, path)
}

/// Whether a file or directory exists (opened and closed again).
pub fn exists(conn: &mut Connection, path: &str) -> Result<bool, Error> {
    let reply = conn.call(create(
        path,
        ACCESS_READ_ATTRIBUTES | ACCESS_SYNCHRONIZE,
        DISPOSITION_OPEN,
        0,
    )?)?;
    if reply.status() == status::OBJECT_NAME_NOT_FOUND {
        return Ok(false);
    }
    let id = created(reply, path)?;
    conn.call(close(id))?.check(path)?;
    Ok(true)
}

/// Size of an open file (FileStandardInformation's EndOfFile).
pub fn file_size(conn: &mut Connection, id: FileId) -> Result<u64, Error> {
    let reply = conn
        .call(query_info(id, FILE_STANDARD_INFORMATION, 24))?
        .check("FileStandardInformation")?;
    let data = wire::buffer_response_data(&reply.msg)?;
    let eof = data
        .get(8..16)
        .ok_or(Error::Malformed(copyless_proto::Error(
            "short FileStandardInformation",
        )))?;
    let mut b = [0u8; 8];
    b.copy_from_slice(eof);
    Ok(u64::from_le_bytes(b))
}

/// Counts the entries of one QUERY_DIRECTORY output buffer
/// (FileIdBothDirectoryInformation, MS-FSCC 2.4.17), leaving out `.` and
/// `..`. Every NextEntryOffset and name length is checked.
pub fn count_dir_entries(buf: &[u8]) -> Result<u64, Error> {
    const NAME_OFFSET: usize = 104;
    let bad = || Error::Malformed(copyless_proto::Error("bad directory entry"));
    let mut count = 0;
    let mut pos = 0usize;
    loop {
        let entry = buf.get(pos..).ok_or_else(bad)?;
        let next = entry.get(0..4).ok_or_else(bad)?;
        let next = u32::from_le_bytes([next[0], next[1], next[2], next[3]]) as usize;
        let len = entry.get(60..64).ok_or_else(bad)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let name = entry
            .get(NAME_OFFSET..NAME_OFFSET.checked_add(len).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        if name != b".\0" && name != b".\0.\0" {
            count += 1;
        }
        if next == 0 {
            return Ok(count);
        }
        if next < NAME_OFFSET || !next.is_multiple_of(8) {
            return Err(bad());
        }
        pos = pos.checked_add(next).ok_or_else(bad)?;
    }
}

/// Lists a directory through one handle; returns the number of entries
/// (without `.` and `..`) and the number of QUERY_DIRECTORY requests.
pub fn list_dir(conn: &mut Connection, path: &str, buffer: u32) -> Result<(u64, u64), Error> {
    let reply = conn.call(create(
        path,
        ACCESS_READ_DATA | ACCESS_READ_ATTRIBUTES | ACCESS_SYNCHRONIZE,
        DISPOSITION_OPEN,
        OPTION_DIRECTORY_FILE,
    )?)?;
    let id = created(reply, path)?;
    let mut entries = 0;
    let mut requests = 0;
    let mut flags = RESTART_SCANS;
    loop {
        let reply = conn.call(query_directory(id, flags, buffer)?)?;
        requests += 1;
        flags = 0;
        if reply.status() == status::NO_MORE_FILES {
            break;
        }
        let reply = reply.check(path)?;
        entries += count_dir_entries(wire::buffer_response_data(&reply.msg)?)?;
    }
    conn.call(close(id))?.check(path)?;
    Ok((entries, requests))
}

/// Sends requests (single ones or compounds) keeping up to `depth`
/// messages in flight, and hands every reply to `on_reply`.
pub fn pipeline<I>(
    conn: &mut Connection,
    depth: usize,
    items: I,
    mut on_reply: impl FnMut(super::Reply) -> Result<(), Error>,
) -> Result<(), Error>
where
    I: IntoIterator<Item = Result<Vec<Msg>, Error>>,
{
    let mut items = items.into_iter();
    let mut outstanding = 0usize;
    let mut done = false;
    loop {
        while !done && outstanding < depth {
            match items.next() {
                Some(msgs) => {
                    let msgs = msgs?;
                    outstanding += msgs.len();
                    conn.submit(msgs)?;
                }
                None => done = true,
            }
        }
        if outstanding == 0 {
            return Ok(());
        }
        let reply = conn.next_reply()?;
        outstanding -= 1;
        on_reply(reply)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, last: bool) -> Vec<u8> {
        let name = copyless_proto::utf16::encode(name);
        let mut e = vec![0u8; 104];
        e.extend_from_slice(&name);
        while !last && !e.len().is_multiple_of(8) {
            e.push(0);
        }
        let next = if last { 0 } else { e.len() as u32 };
        e[0..4].copy_from_slice(&next.to_le_bytes());
        e[60..64].copy_from_slice(&(name.len() as u32).to_le_bytes());
        e
    }

    #[test]
    fn directory_entries_are_counted_without_dot_entries() {
        let mut buf = entry(".", false);
        buf.extend(entry("..", false));
        buf.extend(entry("file-1", false));
        buf.extend(entry("file-2", true));
        assert_eq!(count_dir_entries(&buf).unwrap(), 2);
        for n in 0..buf.len() - 1 {
            // Truncation anywhere is an error, never a panic or a miscount.
            if let Ok(c) = count_dir_entries(&buf[..n]) {
                panic!("truncated to {n} gave {c}");
            }
        }
        // A NextEntryOffset pointing backwards or inside the entry.
        let mut bad = entry("a", false);
        bad[0..4].copy_from_slice(&8u32.to_le_bytes());
        bad.extend(entry("b", true));
        assert!(count_dir_entries(&bad).is_err());
    }

    #[test]
    fn info_buffers_have_the_fscc_layouts() {
        assert_eq!(end_of_file_info(10240), 10240u64.to_le_bytes());
        let basic = basic_info_write_time(0x01d9_0000_0000_0001);
        assert_eq!(&basic[16..24], &0x01d9_0000_0000_0001u64.to_le_bytes());
        assert!(basic[..16].iter().chain(&basic[24..]).all(|b| *b == 0));
        let rename = rename_info("d\\new");
        assert_eq!(&rename[16..20], &10u32.to_le_bytes());
        assert_eq!(
            &rename[20..],
            copyless_proto::utf16::encode("d\\new").as_slice()
        );
        assert_eq!(rename_info("a").len(), 24);
    }
}
