//! Leases on the wire (MS-SMB2 2.2.13.2.8, 2.2.13.2.10, 2.2.14.2.10-11,
//! 2.2.23.2, 2.2.24.2, 2.2.25.2): the RqLs create context of both
//! versions, the lease break notification, its acknowledgment and the
//! response to that.

use crate::wire::{Error, Reader, Result, Writer};
use crate::HEADER_LEN;

pub const READ_CACHING: u32 = 0x01;
pub const HANDLE_CACHING: u32 = 0x02;
pub const WRITE_CACHING: u32 = 0x04;

/// A break of the lease is under way (responses only).
pub const FLAG_BREAK_IN_PROGRESS: u32 = 0x02;
/// The v2 request names a parent directory's lease.
pub const FLAG_PARENT_LEASE_KEY_SET: u32 = 0x04;
/// The notification wants an acknowledgment.
pub const NOTIFY_ACK_REQUIRED: u32 = 0x01;

/// An RqLs context, either version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseContext {
    pub key: [u8; 16],
    pub state: u32,
    pub flags: u32,
    /// Version 2: the parent directory's lease key and the epoch.
    pub v2: Option<([u8; 16], u16)>,
}

impl LeaseContext {
    /// Parses a request's RqLs data: 32 bytes (version 1) or 52 (version
    /// 2); any other size is malformed.
    pub fn parse(data: &[u8]) -> Result<Self> {
        if data.len() != 32 && data.len() != 52 {
            return Err(Error("bad lease context size"));
        }
        let mut r = Reader::new(data);
        let key = r.array::<16>()?;
        let state = r.u32()?;
        let flags = r.u32()?;
        r.skip(8)?; // LeaseDuration
        let v2 = if data.len() == 52 {
            let parent = r.array::<16>()?;
            Some((parent, r.u16()?))
        } else {
            None
        };
        Ok(LeaseContext {
            key,
            state,
            flags,
            v2,
        })
    }

    /// The response's RqLs data, in the lease's own version.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(52);
        w.bytes(&self.key).u32(self.state).u32(self.flags).u64(0);
        if let Some((parent, epoch)) = self.v2 {
            w.bytes(&parent).u16(epoch).u16(0);
        }
        w.into_vec()
    }
}

/// A Lease Break Notification's body (MS-SMB2 2.2.23.2).
pub fn write_lease_break(
    w: &mut Writer,
    epoch: u16,
    flags: u32,
    key: &[u8; 16],
    current: u32,
    new: u32,
) {
    w.u16(44).u16(epoch).u32(flags).bytes(key);
    w.u32(current).u32(new).u32(0).u32(0).u32(0);
}

/// A Lease Break Acknowledgment (MS-SMB2 2.2.24.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreakAck {
    pub key: [u8; 16],
    pub state: u32,
}

impl LeaseBreakAck {
    pub fn parse(msg: &[u8]) -> Result<Self> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        if r.u16()? != 36 {
            return Err(Error("bad structure size"));
        }
        r.skip(6)?; // Reserved, Flags
        let key = r.array::<16>()?;
        let state = r.u32()?;
        r.skip(8)?; // LeaseDuration
        Ok(LeaseBreakAck { key, state })
    }
}

/// A Lease Break Response (MS-SMB2 2.2.25.2): the acknowledged state.
pub fn write_lease_break_response(w: &mut Writer, key: &[u8; 16], state: u32) {
    w.u16(36).u16(0).u32(0).bytes(key).u32(state).u64(0);
}

/// The StructureSize of an OPLOCK_BREAK request: 24 for an oplock's
/// acknowledgment, 36 for a lease's.
pub fn break_ack_size(msg: &[u8]) -> Option<u16> {
    let mut r = Reader::at(msg, HEADER_LEN).ok()?;
    r.u16().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_round_trip_in_both_versions() {
        let v1 = LeaseContext {
            key: [7; 16],
            state: READ_CACHING | HANDLE_CACHING,
            flags: 0,
            v2: None,
        };
        assert_eq!(v1.encode().len(), 32);
        assert_eq!(LeaseContext::parse(&v1.encode()).unwrap(), v1);
        let v2 = LeaseContext {
            v2: Some(([9; 16], 3)),
            flags: FLAG_PARENT_LEASE_KEY_SET,
            ..v1
        };
        assert_eq!(v2.encode().len(), 52);
        assert_eq!(LeaseContext::parse(&v2.encode()).unwrap(), v2);
        assert!(LeaseContext::parse(&[0; 40]).is_err());
    }
}
