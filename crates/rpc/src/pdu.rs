//! Connection-oriented DCE/RPC PDUs (C706 chapter 12, MS-RPCE 2.2.2):
//! parsing what clients send and building what the server answers.

use crate::RpcError;

pub const HEADER_LEN: usize = 16;
/// Header plus alloc_hint, p_cont_id, opnum (request) or cancel count (response).
pub const REQUEST_HEADER_LEN: usize = 24;
pub const RESPONSE_HEADER_LEN: usize = 24;

pub const PTYPE_REQUEST: u8 = 0;
pub const PTYPE_RESPONSE: u8 = 2;
pub const PTYPE_FAULT: u8 = 3;
pub const PTYPE_BIND: u8 = 11;
pub const PTYPE_BIND_ACK: u8 = 12;
pub const PTYPE_BIND_NAK: u8 = 13;
pub const PTYPE_ALTER_CONTEXT: u8 = 14;
pub const PTYPE_ALTER_CONTEXT_RESP: u8 = 15;
pub const PTYPE_AUTH3: u8 = 16;
pub const PTYPE_CO_CANCEL: u8 = 18;
pub const PTYPE_ORPHANED: u8 = 19;

pub const PFC_FIRST_FRAG: u8 = 0x01;
pub const PFC_LAST_FRAG: u8 = 0x02;
pub const PFC_DID_NOT_EXECUTE: u8 = 0x20;
pub const PFC_OBJECT_UUID: u8 = 0x80;

/// Little-endian integers, ASCII characters, IEEE floats.
const DREP_LE: [u8; 4] = [0x10, 0, 0, 0];

// p_cont_def_result_t
pub const RESULT_ACCEPTANCE: u16 = 0;
pub const RESULT_PROVIDER_REJECTION: u16 = 2;
/// MS-RPCE 3.3.1.5.3: the answer to a bind time feature negotiation item.
pub const RESULT_NEGOTIATE_ACK: u16 = 3;

// p_provider_reason_t
pub const REASON_NOT_SPECIFIED: u16 = 0;
pub const REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED: u16 = 1;
pub const REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED: u16 = 2;
pub const REASON_LOCAL_LIMIT_EXCEEDED: u16 = 3;

// bind_nak reject reasons
pub const NAK_REASON_NOT_SPECIFIED: u16 = 0;
pub const NAK_PROTOCOL_VERSION_NOT_SUPPORTED: u16 = 4;
pub const NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED: u16 = 8;

/// Builds the wire (little-endian) form of a UUID from its textual fields.
const fn uuid(time_low: u32, time_mid: u16, time_hi: u16, rest: [u8; 8]) -> [u8; 16] {
    let a = time_low.to_le_bytes();
    let b = time_mid.to_le_bytes();
    let c = time_hi.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], rest[0], rest[1], rest[2], rest[3],
        rest[4], rest[5], rest[6], rest[7],
    ]
}

/// An interface or transfer syntax: UUID (wire order) and version
/// (major in the low 16 bits, minor in the high 16 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntaxId {
    pub uuid: [u8; 16],
    pub version: u32,
}

impl SyntaxId {
    pub const NULL: SyntaxId = SyntaxId {
        uuid: [0; 16],
        version: 0,
    };

    /// 8a885d04-1ceb-11c9-9fe8-08002b104860 v2.0
    pub const NDR20: SyntaxId = SyntaxId {
        uuid: uuid(
            0x8a88_5d04,
            0x1ceb,
            0x11c9,
            [0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10, 0x48, 0x60],
        ),
        version: 2,
    };

    /// 71710533-beba-4937-8319-b5dbef9ccc36 v1.0
    #[cfg(test)]
    pub const NDR64: SyntaxId = SyntaxId {
        uuid: uuid(
            0x7171_0533,
            0xbeba,
            0x4937,
            [0x83, 0x19, 0xb5, 0xdb, 0xef, 0x9c, 0xcc, 0x36],
        ),
        version: 1,
    };

    /// 4b324fc8-1670-01d3-1278-5a47bf6ee188 v3.0
    pub const SRVSVC: SyntaxId = SyntaxId {
        uuid: uuid(
            0x4b32_4fc8,
            0x1670,
            0x01d3,
            [0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e, 0xe1, 0x88],
        ),
        version: 3,
    };

    /// MS-RPCE 3.3.1.5.3: a transfer syntax 6cb71c2c-9812-4540-xxxx-xxxxxxxxxxxx
    /// v1.0 whose last eight octets are the client's feature bitmask.
    pub fn bind_time_features(&self) -> Option<u8> {
        const PREFIX: [u8; 8] = [0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45];
        if self.uuid[..8] == PREFIX && self.version == 1 {
            // Only the two low bits of the first octet are defined.
            Some(self.uuid[8])
        } else {
            None
        }
    }

    fn parse(b: &[u8]) -> Result<SyntaxId, RpcError> {
        let uuid: [u8; 16] = b
            .get(..16)
            .and_then(|s| s.try_into().ok())
            .ok_or(RpcError::Malformed("syntax id truncated"))?;
        let version = le_u32(b, 16).ok_or(RpcError::Malformed("syntax id truncated"))?;
        Ok(SyntaxId { uuid, version })
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.uuid);
        out.extend_from_slice(&self.version.to_le_bytes());
    }
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// The 16-byte common header of every connection-oriented PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub ptype: u8,
    pub flags: u8,
    pub frag_length: u16,
    pub auth_length: u16,
    pub call_id: u32,
}

impl Header {
    pub fn parse(b: &[u8]) -> Result<Header, RpcError> {
        let h = b
            .get(..HEADER_LEN)
            .ok_or(RpcError::Malformed("short header"))?;
        // Version 5; minor 0 and 1 differ only in features we do not use.
        if h[0] != 5 || h[1] > 1 {
            return Err(RpcError::Unsupported("protocol version"));
        }
        if h[4] & 0xf0 != 0x10 {
            return Err(RpcError::Unsupported("big-endian data representation"));
        }
        let frag_length = u16::from_le_bytes([h[8], h[9]]);
        if usize::from(frag_length) < HEADER_LEN {
            return Err(RpcError::Malformed("frag_length below header size"));
        }
        Ok(Header {
            ptype: h[2],
            flags: h[3],
            frag_length,
            auth_length: u16::from_le_bytes([h[10], h[11]]),
            call_id: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
        })
    }

    /// Writes the header with frag_length 0; [`finish_pdu`] patches it.
    fn write(ptype: u8, flags: u8, call_id: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(&[5, 0, ptype, flags]);
        out.extend_from_slice(&DREP_LE);
        out.extend_from_slice(&0u16.to_le_bytes()); // frag_length
        out.extend_from_slice(&0u16.to_le_bytes()); // auth_length
        out.extend_from_slice(&call_id.to_le_bytes());
    }
}

/// Sets frag_length of the PDU that starts at `start` to its built size.
/// Callers only build PDUs below 64 KiB (fragments are capped far lower).
fn finish_pdu(out: &mut [u8], start: usize) {
    let len = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
    out[start + 8..start + 10].copy_from_slice(&len.to_le_bytes());
}

fn pad_to_4(out: &mut Vec<u8>, start: usize) {
    let padded = start + (out.len() - start).next_multiple_of(4);
    out.resize(padded, 0);
}

/// One presentation context offered in a bind or alter_context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextItem {
    pub context_id: u16,
    pub abstract_syntax: SyntaxId,
    pub transfer_syntaxes: Vec<SyntaxId>,
}

/// The body of a bind or alter_context PDU (they share a layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    pub contexts: Vec<ContextItem>,
}

impl Bind {
    /// Parses a whole bind/alter_context PDU (header included).
    pub fn parse(pdu: &[u8]) -> Result<Bind, RpcError> {
        const TRUNC: RpcError = RpcError::Malformed("bind truncated");
        let max_xmit_frag = le_u16(pdu, 16).ok_or(TRUNC)?;
        let max_recv_frag = le_u16(pdu, 18).ok_or(TRUNC)?;
        let assoc_group_id = le_u32(pdu, 20).ok_or(TRUNC)?;
        let n_items = *pdu.get(24).ok_or(TRUNC)?;
        let mut at = 28;
        let mut contexts = Vec::with_capacity(usize::from(n_items));
        for _ in 0..n_items {
            let context_id = le_u16(pdu, at).ok_or(TRUNC)?;
            let n_syntaxes = *pdu.get(at + 2).ok_or(TRUNC)?;
            let abstract_syntax = SyntaxId::parse(pdu.get(at + 4..).ok_or(TRUNC)?)?;
            at += 24;
            let mut transfer_syntaxes = Vec::with_capacity(usize::from(n_syntaxes));
            for _ in 0..n_syntaxes {
                transfer_syntaxes.push(SyntaxId::parse(pdu.get(at..).ok_or(TRUNC)?)?);
                at += 20;
            }
            contexts.push(ContextItem {
                context_id,
                abstract_syntax,
                transfer_syntaxes,
            });
        }
        Ok(Bind {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            contexts,
        })
    }

    /// Client side, for tests.
    #[cfg(test)]
    pub fn encode(&self, ptype: u8, call_id: u32) -> Vec<u8> {
        let mut out = Vec::new();
        Header::write(ptype, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id, &mut out);
        out.extend_from_slice(&self.max_xmit_frag.to_le_bytes());
        out.extend_from_slice(&self.max_recv_frag.to_le_bytes());
        out.extend_from_slice(&self.assoc_group_id.to_le_bytes());
        out.extend_from_slice(&[self.contexts.len() as u8, 0, 0, 0]);
        for c in &self.contexts {
            out.extend_from_slice(&c.context_id.to_le_bytes());
            out.extend_from_slice(&[c.transfer_syntaxes.len() as u8, 0]);
            c.abstract_syntax.write(&mut out);
            for t in &c.transfer_syntaxes {
                t.write(&mut out);
            }
        }
        finish_pdu(&mut out, 0);
        out
    }
}

/// One entry of a bind_ack's p_result_list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextResult {
    pub result: u16,
    pub reason: u16,
    pub transfer_syntax: SyntaxId,
}

/// The body of a bind_ack or alter_context_resp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAck {
    pub max_xmit_frag: u16,
    pub max_recv_frag: u16,
    pub assoc_group_id: u32,
    /// e.g. "\PIPE\srvsvc"; empty in an alter_context_resp.
    pub secondary_address: String,
    pub results: Vec<ContextResult>,
}

impl BindAck {
    pub fn encode(&self, ptype: u8, call_id: u32, out: &mut Vec<u8>) {
        let start = out.len();
        Header::write(ptype, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id, out);
        out.extend_from_slice(&self.max_xmit_frag.to_le_bytes());
        out.extend_from_slice(&self.max_recv_frag.to_le_bytes());
        out.extend_from_slice(&self.assoc_group_id.to_le_bytes());
        // port_any_t: length including the NUL, or 0 with no bytes at all.
        let addr = self.secondary_address.as_bytes();
        if addr.is_empty() {
            out.extend_from_slice(&0u16.to_le_bytes());
        } else {
            let len = u16::try_from(addr.len() + 1).unwrap_or(u16::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(addr);
            out.push(0);
        }
        pad_to_4(out, start);
        // Callers pass at most 255 results: one per offered item, and the
        // offer's count is a u8.
        out.extend_from_slice(&[self.results.len() as u8, 0, 0, 0]);
        for r in &self.results {
            out.extend_from_slice(&r.result.to_le_bytes());
            out.extend_from_slice(&r.reason.to_le_bytes());
            r.transfer_syntax.write(out);
        }
        finish_pdu(out, start);
    }

    /// Client side, for tests.
    #[cfg(test)]
    pub fn parse(pdu: &[u8]) -> Result<BindAck, RpcError> {
        const TRUNC: RpcError = RpcError::Malformed("bind_ack truncated");
        let max_xmit_frag = le_u16(pdu, 16).ok_or(TRUNC)?;
        let max_recv_frag = le_u16(pdu, 18).ok_or(TRUNC)?;
        let assoc_group_id = le_u32(pdu, 20).ok_or(TRUNC)?;
        let addr_len = usize::from(le_u16(pdu, 24).ok_or(TRUNC)?);
        let addr = pdu.get(26..26 + addr_len).ok_or(TRUNC)?;
        let secondary_address = String::from_utf8_lossy(addr)
            .trim_end_matches('\0')
            .to_string();
        let mut at = (26 + addr_len).next_multiple_of(4);
        let n = *pdu.get(at).ok_or(TRUNC)?;
        at += 4;
        let mut results = Vec::new();
        for _ in 0..n {
            results.push(ContextResult {
                result: le_u16(pdu, at).ok_or(TRUNC)?,
                reason: le_u16(pdu, at + 2).ok_or(TRUNC)?,
                transfer_syntax: SyntaxId::parse(pdu.get(at + 4..).ok_or(TRUNC)?)?,
            });
            at += 24;
        }
        Ok(BindAck {
            max_xmit_frag,
            max_recv_frag,
            assoc_group_id,
            secondary_address,
            results,
        })
    }
}

pub fn encode_bind_nak(call_id: u32, reason: u16, out: &mut Vec<u8>) {
    let start = out.len();
    Header::write(PTYPE_BIND_NAK, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id, out);
    out.extend_from_slice(&reason.to_le_bytes());
    // p_rt_versions_supported: one version, 5.0
    out.extend_from_slice(&[1, 5, 0]);
    pad_to_4(out, start);
    finish_pdu(out, start);
}

/// A request PDU's fixed fields and its stub data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub context_id: u16,
    pub opnum: u16,
    pub stub: &'a [u8],
}

impl<'a> Request<'a> {
    /// Parses a whole request PDU. The caller has checked that
    /// auth_length is 0: we offer no DCE/RPC-level security.
    pub fn parse(header: &Header, pdu: &'a [u8]) -> Result<Request<'a>, RpcError> {
        const TRUNC: RpcError = RpcError::Malformed("request truncated");
        let context_id = le_u16(pdu, 20).ok_or(TRUNC)?;
        let opnum = le_u16(pdu, 22).ok_or(TRUNC)?;
        let mut stub_start = REQUEST_HEADER_LEN;
        if header.flags & PFC_OBJECT_UUID != 0 {
            stub_start += 16;
        }
        let stub = pdu.get(stub_start..).ok_or(TRUNC)?;
        Ok(Request {
            context_id,
            opnum,
            stub,
        })
    }

    /// Client side, for tests.
    #[cfg(test)]
    pub fn encode(&self, call_id: u32, flags: u8, alloc_hint: u32) -> Vec<u8> {
        let mut out = Vec::new();
        Header::write(PTYPE_REQUEST, flags, call_id, &mut out);
        out.extend_from_slice(&alloc_hint.to_le_bytes());
        out.extend_from_slice(&self.context_id.to_le_bytes());
        out.extend_from_slice(&self.opnum.to_le_bytes());
        out.extend_from_slice(self.stub);
        finish_pdu(&mut out, 0);
        out
    }
}

/// Appends response PDUs carrying `stub`, split so that no fragment exceeds
/// `max_frag` bytes.
pub fn encode_response(
    call_id: u32,
    context_id: u16,
    stub: &[u8],
    max_frag: usize,
    out: &mut Vec<u8>,
) {
    // Every fragment but the last carries a multiple of 8 stub octets so
    // that NDR alignment is the same whichever fragment a value lands in.
    let chunk = (max_frag.saturating_sub(RESPONSE_HEADER_LEN) & !7).max(8);
    let mut offset = 0;
    loop {
        let end = stub.len().min(offset + chunk);
        let mut flags = 0;
        if offset == 0 {
            flags |= PFC_FIRST_FRAG;
        }
        if end == stub.len() {
            flags |= PFC_LAST_FRAG;
        }
        let start = out.len();
        Header::write(PTYPE_RESPONSE, flags, call_id, out);
        // alloc_hint: the stub bytes still to come, this fragment's included.
        let remaining = u32::try_from(stub.len() - offset).unwrap_or(u32::MAX);
        out.extend_from_slice(&remaining.to_le_bytes());
        out.extend_from_slice(&context_id.to_le_bytes());
        out.extend_from_slice(&[0, 0]); // cancel_count, reserved
        out.extend_from_slice(&stub[offset..end]);
        finish_pdu(out, start);
        offset = end;
        if offset == stub.len() {
            break;
        }
    }
}

/// Appends a fault PDU (C706 12.6.4.7) for a call that did not execute.
pub fn encode_fault(call_id: u32, context_id: u16, status: u32, out: &mut Vec<u8>) {
    let start = out.len();
    let flags = PFC_FIRST_FRAG | PFC_LAST_FRAG | PFC_DID_NOT_EXECUTE;
    Header::write(PTYPE_FAULT, flags, call_id, out);
    // Samba and Windows both send this alloc_hint for a fault without stub.
    out.extend_from_slice(&24u32.to_le_bytes());
    out.extend_from_slice(&context_id.to_le_bytes());
    out.extend_from_slice(&[0, 0]); // cancel_count, reserved
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // reserved
    finish_pdu(out, start);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_uuids_in_wire_order() {
        // NDR20 as it appears in every bind captured on the wire.
        assert_eq!(
            SyntaxId::NDR20.uuid,
            [
                0x04, 0x5d, 0x88, 0x8a, 0xeb, 0x1c, 0xc9, 0x11, 0x9f, 0xe8, 0x08, 0x00, 0x2b, 0x10,
                0x48, 0x60
            ]
        );
        assert_eq!(
            SyntaxId::SRVSVC.uuid,
            [
                0xc8, 0x4f, 0x32, 0x4b, 0x70, 0x16, 0xd3, 0x01, 0x12, 0x78, 0x5a, 0x47, 0xbf, 0x6e,
                0xe1, 0x88
            ]
        );
    }

    #[test]
    fn bind_time_feature_syntax_is_recognised() {
        let mut s = SyntaxId {
            uuid: uuid(0x6cb7_1c2c, 0x9812, 0x4540, [3, 0, 0, 0, 0, 0, 0, 0]),
            version: 1,
        };
        assert_eq!(s.bind_time_features(), Some(3));
        s.version = 2;
        assert_eq!(s.bind_time_features(), None);
        assert_eq!(SyntaxId::NDR20.bind_time_features(), None);
    }

    #[test]
    fn bind_round_trip() {
        let bind = Bind {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0,
            contexts: vec![
                ContextItem {
                    context_id: 0,
                    abstract_syntax: SyntaxId::SRVSVC,
                    transfer_syntaxes: vec![SyntaxId::NDR20],
                },
                ContextItem {
                    context_id: 1,
                    abstract_syntax: SyntaxId::SRVSVC,
                    transfer_syntaxes: vec![SyntaxId::NDR64, SyntaxId::NDR20],
                },
            ],
        };
        let pdu = bind.encode(PTYPE_BIND, 7);
        assert_eq!(pdu.len(), 28 + 44 + 64);
        let h = Header::parse(&pdu).unwrap();
        assert_eq!(h.ptype, PTYPE_BIND);
        assert_eq!(h.call_id, 7);
        assert_eq!(usize::from(h.frag_length), pdu.len());
        assert_eq!(Bind::parse(&pdu).unwrap(), bind);
    }

    #[test]
    fn bind_ack_round_trip_and_layout() {
        let ack = BindAck {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0x1234,
            secondary_address: "\\PIPE\\srvsvc".into(),
            results: vec![
                ContextResult {
                    result: RESULT_ACCEPTANCE,
                    reason: 0,
                    transfer_syntax: SyntaxId::NDR20,
                },
                ContextResult {
                    result: RESULT_PROVIDER_REJECTION,
                    reason: REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED,
                    transfer_syntax: SyntaxId::NULL,
                },
            ],
        };
        let mut pdu = Vec::new();
        ack.encode(PTYPE_BIND_ACK, 9, &mut pdu);
        // 24 fixed + 2 + 13 ("\PIPE\srvsvc\0") = 39, padded to 40, + 4 + 2*24
        assert_eq!(pdu.len(), 92);
        assert_eq!(&pdu[24..26], &[13, 0]);
        assert_eq!(&pdu[26..39], b"\\PIPE\\srvsvc\0");
        assert_eq!(pdu[39], 0, "padding");
        assert_eq!(pdu[40], 2, "n_results");
        let h = Header::parse(&pdu).unwrap();
        assert_eq!((h.ptype, h.call_id, h.frag_length), (PTYPE_BIND_ACK, 9, 92));
        assert_eq!(BindAck::parse(&pdu).unwrap(), ack);

        let alter = BindAck {
            secondary_address: String::new(),
            ..ack
        };
        let mut pdu = Vec::new();
        alter.encode(PTYPE_ALTER_CONTEXT_RESP, 10, &mut pdu);
        // 24 + 2 = 26, padded to 28
        assert_eq!(pdu.len(), 28 + 4 + 48);
        assert_eq!(BindAck::parse(&pdu).unwrap(), alter);
    }

    #[test]
    fn header_rejects_bad_input() {
        let mut pdu = Bind {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0,
            contexts: vec![],
        }
        .encode(PTYPE_BIND, 1);
        assert!(Header::parse(&pdu[..15]).is_err());
        pdu[4] = 0x00; // big-endian integers
        assert!(matches!(Header::parse(&pdu), Err(RpcError::Unsupported(_))));
        pdu[4] = 0x10;
        pdu[0] = 4;
        assert!(Header::parse(&pdu).is_err());
        pdu[0] = 5;
        pdu[8] = 15;
        pdu[9] = 0;
        assert!(matches!(Header::parse(&pdu), Err(RpcError::Malformed(_))));
    }

    #[test]
    fn response_fragments_respect_max_and_alignment() {
        let stub: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut out = Vec::new();
        encode_response(5, 1, &stub, 100, &mut out);
        let mut at = 0;
        let mut got = Vec::new();
        let mut frags = Vec::new();
        while at < out.len() {
            let h = Header::parse(&out[at..]).unwrap();
            let len = usize::from(h.frag_length);
            assert!(len <= 100);
            assert_eq!(h.ptype, PTYPE_RESPONSE);
            assert_eq!(h.call_id, 5);
            let alloc_hint = le_u32(&out, at + 16).unwrap() as usize;
            assert_eq!(alloc_hint, stub.len() - got.len());
            let body = &out[at + 24..at + len];
            frags.push((h.flags, body.len()));
            got.extend_from_slice(body);
            at += len;
        }
        assert_eq!(got, stub);
        // (100 - 24) & !7 = 72 stub bytes per fragment: 13 full + 64
        assert_eq!(frags.len(), 14);
        assert_eq!(frags[0], (PFC_FIRST_FRAG, 72));
        assert_eq!(frags[1], (0, 72));
        assert_eq!(frags[13], (PFC_LAST_FRAG, 1000 - 13 * 72));
    }

    #[test]
    fn small_response_is_one_fragment_and_empty_stub_works() {
        let mut out = Vec::new();
        encode_response(1, 0, &[], 4280, &mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(out[3], PFC_FIRST_FRAG | PFC_LAST_FRAG);
    }

    #[test]
    fn fault_layout() {
        let mut out = Vec::new();
        encode_fault(3, 0, 0x1c01_0002, &mut out);
        assert_eq!(out.len(), 32);
        let h = Header::parse(&out).unwrap();
        assert_eq!(h.ptype, PTYPE_FAULT);
        assert_eq!(h.flags, 0x23);
        assert_eq!(h.frag_length, 32);
        assert_eq!(le_u32(&out, 24), Some(0x1c01_0002));
    }

    #[test]
    fn bind_nak_layout() {
        let mut out = Vec::new();
        encode_bind_nak(2, NAK_PROTOCOL_VERSION_NOT_SUPPORTED, &mut out);
        assert_eq!(out.len(), 24);
        assert_eq!(out[2], PTYPE_BIND_NAK);
        assert_eq!(&out[16..21], &[4, 0, 1, 5, 0]);
    }
}
