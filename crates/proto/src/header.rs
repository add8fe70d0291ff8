//! The 64-byte SMB2 header (MS-SMB2 2.2.1).

use crate::wire::{Error, Reader, Result};

pub const HEADER_LEN: usize = 64;
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];

pub const FLAG_SERVER_TO_REDIR: u32 = 0x0000_0001;
pub const FLAG_ASYNC_COMMAND: u32 = 0x0000_0002;
pub const FLAG_RELATED_OPERATIONS: u32 = 0x0000_0004;
pub const FLAG_SIGNED: u32 = 0x0000_0008;
pub const FLAG_PRIORITY_MASK: u32 = 0x0000_0070;
pub const FLAG_DFS_OPERATIONS: u32 = 0x1000_0000;
pub const FLAG_REPLAY_OPERATION: u32 = 0x2000_0000;

/// Byte range of the signature field.
pub const SIGNATURE_RANGE: std::ops::Range<usize> = 48..64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub credit_charge: u16,
    /// Status in responses; ChannelSequence/Reserved in requests.
    pub status: u32,
    pub command: u16,
    /// CreditRequest in requests, CreditResponse in responses.
    pub credits: u16,
    pub flags: u32,
    pub next_command: u32,
    pub message_id: u64,
    /// AsyncId when FLAG_ASYNC_COMMAND is set; else ProcessId (low 32
    /// bits) and TreeId (high 32 bits) share these 8 bytes.
    pub async_id: u64,
    pub process_id: u32,
    pub tree_id: u32,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Header {
    pub fn parse(buf: &[u8]) -> Result<Header> {
        let mut r = Reader::new(buf);
        if r.array::<4>()? != PROTOCOL_ID {
            return Err(Error("bad protocol id"));
        }
        if r.u16()? != 64 {
            return Err(Error("bad header structure size"));
        }
        let credit_charge = r.u16()?;
        let status = r.u32()?;
        let command = r.u16()?;
        let credits = r.u16()?;
        let flags = r.u32()?;
        let next_command = r.u32()?;
        let message_id = r.u64()?;
        let (async_id, process_id, tree_id) = if flags & FLAG_ASYNC_COMMAND != 0 {
            (r.u64()?, 0, 0)
        } else {
            (0, r.u32()?, r.u32()?)
        };
        let session_id = r.u64()?;
        let signature = r.array()?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            async_id,
            process_id,
            tree_id,
            session_id,
            signature,
        })
    }

    pub fn is_async(&self) -> bool {
        self.flags & FLAG_ASYNC_COMMAND != 0
    }

    pub fn is_related(&self) -> bool {
        self.flags & FLAG_RELATED_OPERATIONS != 0
    }

    pub fn is_signed(&self) -> bool {
        self.flags & FLAG_SIGNED != 0
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&PROTOCOL_ID);
        out.extend_from_slice(&64u16.to_le_bytes());
        out.extend_from_slice(&self.credit_charge.to_le_bytes());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&self.command.to_le_bytes());
        out.extend_from_slice(&self.credits.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.next_command.to_le_bytes());
        out.extend_from_slice(&self.message_id.to_le_bytes());
        if self.is_async() {
            out.extend_from_slice(&self.async_id.to_le_bytes());
        } else {
            out.extend_from_slice(&self.process_id.to_le_bytes());
            out.extend_from_slice(&self.tree_id.to_le_bytes());
        }
        out.extend_from_slice(&self.session_id.to_le_bytes());
        out.extend_from_slice(&self.signature);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = Header {
            credit_charge: 1,
            status: 0,
            command: 5,
            credits: 10,
            flags: FLAG_SIGNED | FLAG_RELATED_OPERATIONS,
            next_command: 128,
            message_id: 77,
            async_id: 0,
            process_id: 0xfeff,
            tree_id: 9,
            session_id: 0x1234,
            signature: [7; 16],
        };
        let mut v = Vec::new();
        h.write(&mut v);
        assert_eq!(v.len(), HEADER_LEN);
        assert_eq!(Header::parse(&v).unwrap(), h);
        assert!(Header::parse(&v[..63]).is_err());
        v[0] = 0xff;
        assert!(Header::parse(&v).is_err());
    }
}
