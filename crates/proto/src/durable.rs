//! Durable handles on the wire (MS-SMB2 2.2.13.2.3-4, 2.2.13.2.11-13,
//! 2.2.14.2.3-4, 2.2.14.2.12): the request and reconnect contexts of both
//! versions, their responses, and the application instance id.

use crate::messages::FileId;
use crate::wire::{Error, Reader, Result, Writer};

/// DH2Q and DH2C: the handle is to be persistent (continuous
/// availability), which only a CA share can give.
pub const FLAG_PERSISTENT: u32 = 0x02;

/// The application instance id context's name (a GUID, 2.2.13.2.13).
pub const APP_INSTANCE_ID: [u8; 16] = [
    0x45, 0xBC, 0xA6, 0x6A, 0xEF, 0xA7, 0xF7, 0x4A, 0x90, 0x08, 0xFA, 0x46, 0x2E, 0x14, 0x4D, 0x74,
];

/// DHnQ: 16 reserved bytes; nothing in them is read.
pub fn parse_request_v1(data: &[u8]) -> Result<()> {
    if data.len() != 16 {
        return Err(Error("bad DHnQ size"));
    }
    Ok(())
}

/// DHnC: the file id of the open to reconnect.
pub fn parse_reconnect_v1(data: &[u8]) -> Result<FileId> {
    if data.len() != 16 {
        return Err(Error("bad DHnC size"));
    }
    file_id(&mut Reader::new(data))
}

/// DH2Q.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestV2 {
    /// Milliseconds; zero lets the server choose.
    pub timeout: u32,
    pub flags: u32,
    pub create_guid: [u8; 16],
}

pub fn parse_request_v2(data: &[u8]) -> Result<RequestV2> {
    if data.len() != 32 {
        return Err(Error("bad DH2Q size"));
    }
    let mut r = Reader::new(data);
    let timeout = r.u32()?;
    let flags = r.u32()?;
    r.skip(8)?;
    let create_guid = r.array::<16>()?;
    Ok(RequestV2 {
        timeout,
        flags,
        create_guid,
    })
}

/// DH2C.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectV2 {
    pub file_id: FileId,
    pub create_guid: [u8; 16],
    pub flags: u32,
}

pub fn parse_reconnect_v2(data: &[u8]) -> Result<ReconnectV2> {
    if data.len() != 36 {
        return Err(Error("bad DH2C size"));
    }
    let mut r = Reader::new(data);
    let file_id = file_id(&mut r)?;
    let create_guid = r.array::<16>()?;
    let flags = r.u32()?;
    Ok(ReconnectV2 {
        file_id,
        create_guid,
        flags,
    })
}

/// The application instance id context: StructureSize 20, two reserved
/// bytes, the id.
pub fn parse_app_instance_id(data: &[u8]) -> Result<[u8; 16]> {
    let mut r = Reader::new(data);
    if data.len() != 20 || r.u16()? != 20 {
        return Err(Error("bad application instance id context"));
    }
    r.skip(2)?;
    r.array::<16>()
}

/// The DHnQ response: eight reserved bytes.
pub fn response_v1() -> Vec<u8> {
    vec![0; 8]
}

/// The DH2Q response: the timeout the server keeps the handle for, and
/// its flags.
pub fn response_v2(timeout: u32, flags: u32) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(timeout).u32(flags);
    w.into_vec()
}

fn file_id(r: &mut Reader<'_>) -> Result<FileId> {
    Ok(FileId {
        persistent: r.u64()?,
        volatile: r.u64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_of_the_wrong_size_are_malformed() {
        assert!(parse_request_v1(&[0; 15]).is_err());
        assert!(parse_reconnect_v1(&[0; 17]).is_err());
        assert!(parse_request_v2(&[0; 31]).is_err());
        assert!(parse_reconnect_v2(&[0; 32]).is_err());
        assert!(parse_app_instance_id(&[0; 20]).is_err());
    }

    #[test]
    fn fields_are_read_where_the_specification_puts_them() {
        let mut dh2q = Vec::new();
        dh2q.extend_from_slice(&60_000u32.to_le_bytes());
        dh2q.extend_from_slice(&FLAG_PERSISTENT.to_le_bytes());
        dh2q.extend_from_slice(&[0; 8]);
        dh2q.extend_from_slice(&[7; 16]);
        assert_eq!(
            parse_request_v2(&dh2q).unwrap(),
            RequestV2 {
                timeout: 60_000,
                flags: FLAG_PERSISTENT,
                create_guid: [7; 16]
            }
        );
        let mut dh2c = Vec::new();
        dh2c.extend_from_slice(&1u64.to_le_bytes());
        dh2c.extend_from_slice(&2u64.to_le_bytes());
        dh2c.extend_from_slice(&[9; 16]);
        dh2c.extend_from_slice(&0u32.to_le_bytes());
        let r = parse_reconnect_v2(&dh2c).unwrap();
        assert_eq!(
            (r.file_id.persistent, r.file_id.volatile, r.create_guid),
            (1, 2, [9; 16])
        );
        let mut app = vec![20, 0, 0, 0];
        app.extend_from_slice(&[5; 16]);
        assert_eq!(parse_app_instance_id(&app).unwrap(), [5; 16]);
        assert_eq!(response_v2(1000, 0), [0xe8, 3, 0, 0, 0, 0, 0, 0]);
    }
}
