//! CREATE contexts (MS-SMB2 2.2.13.2, 2.2.14.2).

use crate::wire::{slice_at, Error, Reader, Result, Writer};

pub const MXAC: &[u8] = b"MxAc";
pub const QFID: &[u8] = b"QFid";
pub const SECD: &[u8] = b"SecD";
pub const EXTA: &[u8] = b"ExtA";
pub const ALSI: &[u8] = b"AlSi";
pub const TWRP: &[u8] = b"TWrp";
pub const RQLS: &[u8] = b"RqLs";
pub const DHNQ: &[u8] = b"DHnQ";
pub const DHNC: &[u8] = b"DHnC";
pub const DH2Q: &[u8] = b"DH2Q";
pub const DH2C: &[u8] = b"DH2C";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateContext<'a> {
    pub name: &'a [u8],
    pub data: &'a [u8],
}

/// Parses the chain found at `buf` (the CreateContexts area itself).
pub fn parse_chain(buf: &[u8]) -> Result<Vec<CreateContext<'_>>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    if buf.is_empty() {
        return Ok(out);
    }
    loop {
        let mut r = Reader::at(buf, off)?;
        let next = r.u32()? as usize;
        let name_off = r.u16()? as usize;
        let name_len = r.u16()? as usize;
        r.skip(2)?;
        let data_off = r.u16()? as usize;
        let data_len = r.u32()? as usize;
        let entry_len = if next == 0 { buf.len() - off } else { next };
        let entry = slice_at(buf, off, entry_len)?;
        if name_len == 0 {
            return Err(Error("create context without name"));
        }
        let name = slice_at(entry, name_off, name_len)?;
        let data = slice_at(entry, data_off, data_len)?;
        out.push(CreateContext { name, data });
        if next == 0 {
            break;
        }
        if !next.is_multiple_of(8) || next < 16 {
            return Err(Error("misaligned create context"));
        }
        off = off.checked_add(next).ok_or(Error("overflow"))?;
    }
    Ok(out)
}

/// Builds a chain of response contexts; returns the bytes (8-aligned
/// entries, the last one unpadded).
pub fn build_chain(items: &[(&[u8], Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new();
    for (i, (name, data)) in items.iter().enumerate() {
        let start = w.len();
        // Header 16 bytes, name at 16, data 8-aligned after the name.
        let data_off = (16 + name.len()).next_multiple_of(8);
        w.u32(0)
            .u16(16)
            .u16(name.len() as u16)
            .u16(0)
            .u16(if data.is_empty() { 0 } else { data_off as u16 })
            .u32(data.len() as u32)
            .bytes(name);
        if !data.is_empty() {
            w.zeros(start + data_off - w.len());
            w.bytes(data);
        }
        if i + 1 < items.len() {
            w.align(8);
            let next = (w.len() - start) as u32;
            w.put_u32_at(start, next);
        }
    }
    w.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_round_trip() {
        let bytes = build_chain(&[(MXAC, vec![1, 2, 3, 4, 5, 6, 7, 8]), (QFID, vec![9; 32])]);
        let parsed = parse_chain(&bytes).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[0].name, MXAC);
        assert_eq!(parsed[0].data, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(parsed[1].name, QFID);
        assert_eq!(parsed[1].data.len(), 32);
        for n in 1..bytes.len() {
            let _ = parse_chain(&bytes[..n]);
        }
    }
}
