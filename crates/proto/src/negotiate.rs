//! NEGOTIATE request and response with 3.1.1 negotiate contexts
//! (MS-SMB2 2.2.3, 2.2.4).

use crate::wire::{slice_at, Error, Reader, Result, Writer};
use crate::HEADER_LEN;

pub const DIALECT_202: u16 = 0x0202;
pub const DIALECT_210: u16 = 0x0210;
pub const DIALECT_300: u16 = 0x0300;
pub const DIALECT_302: u16 = 0x0302;
pub const DIALECT_311: u16 = 0x0311;
pub const DIALECT_WILDCARD: u16 = 0x02FF;

pub const SIGNING_ENABLED: u16 = 0x0001;
pub const SIGNING_REQUIRED: u16 = 0x0002;

pub const CAP_DFS: u32 = 0x0000_0001;
pub const CAP_LEASING: u32 = 0x0000_0002;
pub const CAP_LARGE_MTU: u32 = 0x0000_0004;
pub const CAP_MULTI_CHANNEL: u32 = 0x0000_0008;
pub const CAP_PERSISTENT_HANDLES: u32 = 0x0000_0010;
pub const CAP_DIRECTORY_LEASING: u32 = 0x0000_0020;
pub const CAP_ENCRYPTION: u32 = 0x0000_0040;

pub const CTX_PREAUTH_INTEGRITY: u16 = 0x0001;
pub const CTX_ENCRYPTION: u16 = 0x0002;
pub const CTX_COMPRESSION: u16 = 0x0003;
pub const CTX_NETNAME: u16 = 0x0005;
pub const CTX_TRANSPORT: u16 = 0x0006;
pub const CTX_RDMA_TRANSFORM: u16 = 0x0007;
pub const CTX_SIGNING: u16 = 0x0008;

pub const HASH_SHA512: u16 = 0x0001;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateContext<'a> {
    pub context_type: u16,
    pub data: &'a [u8],
}

/// The `count` negotiate contexts (MS-SMB2 2.2.3.1) starting at `offset`
/// of `msg`, each after the first 8-byte aligned; used for requests and,
/// by the client, for responses.
pub fn parse_contexts(
    msg: &[u8],
    offset: usize,
    count: usize,
) -> Result<Vec<NegotiateContext<'_>>> {
    let mut contexts = Vec::with_capacity(count.min(16));
    let mut off = offset;
    for i in 0..count {
        let mut cr = Reader::at(msg, off)?;
        let context_type = cr.u16()?;
        let len = cr.u16()? as usize;
        cr.skip(4)?;
        let data = cr.bytes(len)?;
        contexts.push(NegotiateContext { context_type, data });
        off = cr.pos();
        if i + 1 < count {
            off = off.next_multiple_of(8);
        }
    }
    Ok(contexts)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegotiateRequest<'a> {
    pub security_mode: u16,
    pub capabilities: u32,
    pub client_guid: [u8; 16],
    pub dialects: Vec<u16>,
    pub contexts: Vec<NegotiateContext<'a>>,
}

impl<'a> NegotiateRequest<'a> {
    /// `msg` is the whole message starting at the SMB2 header.
    pub fn parse(msg: &'a [u8]) -> Result<Self> {
        let mut r = Reader::at(msg, HEADER_LEN)?;
        if r.u16()? != 36 {
            return Err(Error("bad NEGOTIATE structure size"));
        }
        let dialect_count = r.u16()? as usize;
        let security_mode = r.u16()?;
        r.skip(2)?;
        let capabilities = r.u32()?;
        let client_guid = r.array()?;
        let ctx_offset = r.u32()? as usize;
        let ctx_count = r.u16()? as usize;
        r.skip(2)?;
        if dialect_count == 0 {
            return Err(Error("no dialects"));
        }
        // Room for what the bytes can hold, not for what the count says.
        let mut dialects = Vec::with_capacity(dialect_count.min(r.remaining() / 2));
        for _ in 0..dialect_count {
            dialects.push(r.u16()?);
        }
        let contexts = if dialects.contains(&DIALECT_311) {
            parse_contexts(msg, ctx_offset, ctx_count)?
        } else {
            Vec::new()
        };
        Ok(NegotiateRequest {
            security_mode,
            capabilities,
            client_guid,
            dialects,
            contexts,
        })
    }

    pub fn context(&self, context_type: u16) -> Option<&NegotiateContext<'a>> {
        self.contexts
            .iter()
            .find(|c| c.context_type == context_type)
    }
}

/// PREAUTH_INTEGRITY_CAPABILITIES: hash algorithm ids offered.
pub fn parse_preauth(data: &[u8]) -> Result<Vec<u16>> {
    let mut r = Reader::new(data);
    let count = r.u16()? as usize;
    let salt_len = r.u16()? as usize;
    let mut algs = Vec::with_capacity(count.min(r.remaining() / 2));
    for _ in 0..count {
        algs.push(r.u16()?);
    }
    r.skip(salt_len)?;
    Ok(algs)
}

/// ENCRYPTION_CAPABILITIES or SIGNING_CAPABILITIES: a count and u16 ids.
pub fn parse_id_list(data: &[u8]) -> Result<Vec<u16>> {
    let mut r = Reader::new(data);
    let count = r.u16()? as usize;
    let mut ids = Vec::with_capacity(count.min(r.remaining() / 2));
    for _ in 0..count {
        ids.push(r.u16()?);
    }
    Ok(ids)
}

#[derive(Debug, Clone)]
pub struct NegotiateResponse<'a> {
    pub security_mode: u16,
    pub dialect: u16,
    pub server_guid: [u8; 16],
    pub capabilities: u32,
    pub max_transact_size: u32,
    pub max_read_size: u32,
    pub max_write_size: u32,
    pub system_time: u64,
    pub server_start_time: u64,
    pub security_buffer: &'a [u8],
    /// (type, data) pairs, only for 3.1.1.
    pub contexts: Vec<(u16, Vec<u8>)>,
}

impl NegotiateResponse<'_> {
    /// Appends the body (after the header) to `out`, which must hold exactly
    /// the 64-byte header so far: offsets are from the header start.
    pub fn write(&self, out: &mut Writer) {
        debug_assert_eq!(out.len(), HEADER_LEN);
        let sec_off = HEADER_LEN + 64;
        out.u16(65)
            .u16(self.security_mode)
            .u16(self.dialect)
            .u16(self.contexts.len() as u16)
            .bytes(&self.server_guid)
            .u32(self.capabilities)
            .u32(self.max_transact_size)
            .u32(self.max_read_size)
            .u32(self.max_write_size)
            .u64(self.system_time)
            .u64(self.server_start_time)
            .u16(sec_off as u16)
            .u16(self.security_buffer.len() as u16);
        let ctx_off_pos = out.len();
        out.u32(0);
        out.bytes(self.security_buffer);
        if self.contexts.is_empty() {
            if self.security_buffer.is_empty() {
                out.u8(0);
            }
            return;
        }
        out.align(8);
        out.put_u32_at(ctx_off_pos, out.len() as u32);
        for (i, (t, data)) in self.contexts.iter().enumerate() {
            if i > 0 {
                out.align(8);
            }
            out.u16(*t).u16(data.len() as u16).u32(0).bytes(data);
        }
    }
}

pub fn preauth_context(salt: &[u8; 32]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u16(1).u16(32).u16(HASH_SHA512).bytes(salt);
    w.into_vec()
}

pub fn id_list_context(ids: &[u16]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u16(ids.len() as u16);
    for id in ids {
        w.u16(*id);
    }
    w.into_vec()
}

/// Checks that a security buffer lies inside the message.
pub fn security_buffer(msg: &[u8], offset: u16, len: u16) -> Result<&[u8]> {
    slice_at(msg, offset as usize, len as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;

    fn request(dialects: &[u16], ctxs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut w = Writer::new();
        Header::default().write(&mut w.buf);
        w.u16(36).u16(dialects.len() as u16).u16(1).u16(0).u32(0x7f);
        w.bytes(&[3; 16]);
        let off_pos = w.len();
        w.u32(0).u16(ctxs.len() as u16).u16(0);
        for d in dialects {
            w.u16(*d);
        }
        if !ctxs.is_empty() {
            w.align(8);
            let o = w.len() as u32;
            w.put_u32_at(off_pos, o);
            for (i, (t, d)) in ctxs.iter().enumerate() {
                if i > 0 {
                    w.align(8);
                }
                w.u16(*t).u16(d.len() as u16).u32(0).bytes(d);
            }
        }
        w.into_vec()
    }

    #[test]
    fn parses_contexts() {
        let pre = preauth_context(&[9; 32]);
        let sign = id_list_context(&[2, 1]);
        let msg = request(
            &[DIALECT_202, DIALECT_311],
            &[(CTX_PREAUTH_INTEGRITY, &pre), (CTX_SIGNING, &sign)],
        );
        let req = NegotiateRequest::parse(&msg).unwrap();
        assert_eq!(req.dialects, vec![DIALECT_202, DIALECT_311]);
        assert_eq!(req.contexts.len(), 2);
        assert_eq!(
            parse_preauth(req.context(CTX_PREAUTH_INTEGRITY).unwrap().data).unwrap(),
            vec![HASH_SHA512]
        );
        assert_eq!(
            parse_id_list(req.context(CTX_SIGNING).unwrap().data).unwrap(),
            vec![2, 1]
        );
        for n in 0..msg.len() {
            let _ = NegotiateRequest::parse(&msg[..n]);
        }
    }
}
