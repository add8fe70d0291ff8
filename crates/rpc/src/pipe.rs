//! One open of a named pipe: PDU framing, binding and call dispatch.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::pdu::{
    self, Bind, BindAck, ContextResult, Header, Request, SyntaxId, HEADER_LEN, REQUEST_HEADER_LEN,
};
use crate::srvsvc::{self, CallError};
use crate::{RpcError, ShareInfo};

/// nca_op_rng_error: the interface has no such operation.
const NCA_OP_RNG_ERROR: u32 = 0x1c01_0002;
/// nca_unk_if: the presentation context is not bound.
const NCA_UNK_IF: u32 = 0x1c01_0003;
/// nca_proto_error: the call breaks the protocol (request before bind,
/// stray fragment, oversized request).
const NCA_PROTO_ERROR: u32 = 0x1c01_000b;
/// nca_s_fault_access_denied: a request with an auth verifier we never set up.
const NCA_ACCESS_DENIED: u32 = 0x0000_0005;
/// nca_s_fault_ndr (RPC_X_BAD_STUB_DATA).
const NCA_FAULT_NDR: u32 = 0x0000_06f7;

/// What smbd uses for SMB named pipes; clients ask for 4280 or 5840.
const MAX_FRAG: u16 = 4280;
/// C706 lets a server refuse fragments below 1432; Samba and Windows
/// instead raise small offers to 2048.
const MIN_FRAG: u16 = 2048;
/// srvsvc requests are a few hundred bytes; a larger one is an attack.
const MAX_REQUEST_STUB: usize = 256 * 1024;
/// Presentation contexts one pipe keeps: every call looks its context up,
/// so a client must not grow the list to the 65,536 ids it could name.
const MAX_CONTEXTS: usize = 64;
/// Replies the client has not read yet; beyond this it is not reading.
const MAX_PENDING_OUTPUT: usize = 1024 * 1024;

/// MS-RPCE 2.2.2.14 KeepConnectionOnOrphanSupported: we never close the
/// pipe after an orphaned PDU, so we can grant it. Security context
/// multiplexing is not offered: we have no DCE/RPC security at all.
const FEATURE_KEEP_CONNECTION_ON_ORPHAN: u8 = 0x02;

/// Association groups only need to be non-zero and distinct per open;
/// with no cross-connection state to join, a process-wide counter does.
static NEXT_ASSOC_GROUP: AtomicU32 = AtomicU32::new(0x0000_5301);

fn new_assoc_group() -> u32 {
    loop {
        let id = NEXT_ASSOC_GROUP.fetch_add(1, Ordering::Relaxed);
        if id != 0 {
            return id;
        }
    }
}

/// The served pipe's canonical name, if `name` is one of ours.
pub(crate) fn canonical_pipe_name(name: &str) -> Option<&'static str> {
    let mut n = name.trim_start_matches('\\');
    if n.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("pipe\\")) {
        n = n.get(5..).unwrap_or_default().trim_start_matches('\\');
    }
    if n.eq_ignore_ascii_case("srvsvc") {
        Some("srvsvc")
    } else {
        None
    }
}

/// A request whose fragments are still arriving.
struct PartialCall {
    call_id: u32,
    context_id: u16,
    opnum: u16,
    stub: Vec<u8>,
}

/// One open of a pipe.
pub struct Pipe {
    /// Canonical pipe name, or None for a pipe we do not serve (every
    /// interface is then refused at bind time).
    pipe_name: Option<&'static str>,
    server_name: String,
    server_comment: String,
    shares: Vec<ShareInfo>,
    /// Bytes of an incomplete PDU.
    input: Vec<u8>,
    output: VecDeque<u8>,
    bound: bool,
    assoc_group_id: u32,
    max_xmit_frag: u16,
    max_recv_frag: u16,
    /// Presentation context ids accepted for srvsvc over NDR20.
    contexts: Vec<u16>,
    partial: Option<PartialCall>,
}

impl Pipe {
    pub fn new(pipe_name: &str, server_name: &str, shares: Vec<ShareInfo>) -> Pipe {
        Pipe {
            pipe_name: canonical_pipe_name(pipe_name),
            server_name: server_name.to_string(),
            server_comment: String::new(),
            shares,
            input: Vec::new(),
            output: VecDeque::new(),
            bound: false,
            assoc_group_id: 0,
            max_xmit_frag: MAX_FRAG,
            max_recv_frag: MAX_FRAG,
            contexts: Vec::new(),
            partial: None,
        }
    }

    /// The server's description, as NetrServerGetInfo gives it.
    pub fn with_comment(mut self, comment: &str) -> Pipe {
        self.server_comment = comment.to_string();
        self
    }

    /// Bytes written by the client (WRITE or the input of an FSCTL_PIPE_TRANSCEIVE). May contain a partial PDU (keep it until complete) or several PDUs. Responses are queued. Malformed input -> Err (the core then fails that request), never a panic.
    pub fn write(&mut self, data: &[u8]) -> Result<(), RpcError> {
        let result = self.consume(data);
        if result.is_err() {
            // The stream is out of step; whatever follows cannot be framed.
            self.input.clear();
            self.partial = None;
        }
        result
    }

    fn consume(&mut self, data: &[u8]) -> Result<(), RpcError> {
        let mut buf = std::mem::take(&mut self.input);
        buf.extend_from_slice(data);
        let mut at = 0;
        while let Some(rest) = buf.get(at..).filter(|r| r.len() >= HEADER_LEN) {
            let header = Header::parse(rest)?;
            let len = usize::from(header.frag_length);
            let Some(pdu) = rest.get(..len) else {
                break;
            };
            if self.output.len() > MAX_PENDING_OUTPUT {
                return Err(RpcError::OutputFull);
            }
            self.handle_pdu(&header, pdu)?;
            at += len;
        }
        buf.drain(..at);
        self.input = buf;
        Ok(())
    }

    /// Takes up to `max` bytes of queued output (READ). Returns fewer or zero if less is queued.
    pub fn read(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.output.len());
        self.output.drain(..n).collect()
    }

    /// Bytes still queued.
    pub fn pending(&self) -> usize {
        self.output.len()
    }

    fn handle_pdu(&mut self, header: &Header, pdu: &[u8]) -> Result<(), RpcError> {
        match header.ptype {
            pdu::PTYPE_BIND => self.handle_bind(header, pdu, false),
            pdu::PTYPE_ALTER_CONTEXT => self.handle_bind(header, pdu, true),
            pdu::PTYPE_REQUEST => self.handle_request(header, pdu),
            // Without DCE/RPC security there is no third leg to finish, and
            // calls complete before the next PDU is read, so nothing to cancel.
            pdu::PTYPE_AUTH3 | pdu::PTYPE_CO_CANCEL => Ok(()),
            pdu::PTYPE_ORPHANED => {
                if self
                    .partial
                    .as_ref()
                    .is_some_and(|p| p.call_id == header.call_id)
                {
                    self.partial = None;
                }
                Ok(())
            }
            _ => Err(RpcError::Unsupported("PDU type not sent by clients")),
        }
    }

    fn queue(&mut self, bytes: Vec<u8>) {
        self.output.extend(bytes);
    }

    fn handle_bind(&mut self, header: &Header, pdu: &[u8], alter: bool) -> Result<(), RpcError> {
        let bind = Bind::parse(pdu)?;
        let mut out = Vec::new();
        if alter && !self.bound {
            pdu::encode_fault(header.call_id, 0, NCA_PROTO_ERROR, &mut out);
            self.queue(out);
            return Ok(());
        }
        let nak = if !alter && self.bound {
            Some(pdu::NAK_REASON_NOT_SPECIFIED)
        } else if header.auth_length != 0 {
            Some(pdu::NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED)
        } else if bind.contexts.is_empty() {
            Some(pdu::NAK_PROTOCOL_VERSION_NOT_SUPPORTED)
        } else if bind.contexts.iter().any(|c| c.transfer_syntaxes.is_empty()) {
            Some(pdu::NAK_REASON_NOT_SPECIFIED)
        } else {
            None
        };
        if let Some(reason) = nak {
            pdu::encode_bind_nak(header.call_id, reason, &mut out);
            self.queue(out);
            return Ok(());
        }

        let mut feature_item_seen = false;
        let mut results = Vec::with_capacity(bind.contexts.len());
        for item in &bind.contexts {
            // Only the first transfer syntax marks a feature negotiation item
            // (as Samba and Windows read MS-RPCE 3.3.1.5.3).
            let features = item
                .transfer_syntaxes
                .first()
                .and_then(SyntaxId::bind_time_features);
            let result = if let Some(offered) = features.filter(|_| !feature_item_seen) {
                feature_item_seen = true;
                ContextResult {
                    result: pdu::RESULT_NEGOTIATE_ACK,
                    reason: u16::from(offered & FEATURE_KEEP_CONNECTION_ON_ORPHAN),
                    transfer_syntax: SyntaxId::NULL,
                }
            } else if self.pipe_name.is_none() || item.abstract_syntax != SyntaxId::SRVSVC {
                ContextResult {
                    result: pdu::RESULT_PROVIDER_REJECTION,
                    reason: pdu::REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED,
                    transfer_syntax: SyntaxId::NULL,
                }
            } else if !self.contexts.contains(&item.context_id)
                && self.contexts.len() >= MAX_CONTEXTS
            {
                ContextResult {
                    result: pdu::RESULT_PROVIDER_REJECTION,
                    reason: pdu::REASON_LOCAL_LIMIT_EXCEEDED,
                    transfer_syntax: SyntaxId::NULL,
                }
            } else if item.transfer_syntaxes.contains(&SyntaxId::NDR20) {
                if !self.contexts.contains(&item.context_id) {
                    self.contexts.push(item.context_id);
                }
                ContextResult {
                    result: pdu::RESULT_ACCEPTANCE,
                    reason: pdu::REASON_NOT_SPECIFIED,
                    transfer_syntax: SyntaxId::NDR20,
                }
            } else {
                ContextResult {
                    result: pdu::RESULT_PROVIDER_REJECTION,
                    reason: pdu::REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED,
                    transfer_syntax: SyntaxId::NULL,
                }
            };
            results.push(result);
        }

        let (ptype, secondary_address) = if alter {
            (pdu::PTYPE_ALTER_CONTEXT_RESP, String::new())
        } else {
            // Both directions get the same size, as Samba and Windows do;
            // kept a multiple of 8 so response stubs split on NDR alignment.
            let offered = bind.max_xmit_frag.min(bind.max_recv_frag);
            let frag = offered.clamp(MIN_FRAG, MAX_FRAG) & !7;
            self.max_xmit_frag = frag;
            self.max_recv_frag = frag;
            self.assoc_group_id = if bind.assoc_group_id != 0 {
                bind.assoc_group_id
            } else {
                new_assoc_group()
            };
            self.bound = true;
            let name = self.pipe_name.unwrap_or_default();
            let addr = if name.is_empty() {
                String::new()
            } else {
                format!("\\PIPE\\{name}")
            };
            (pdu::PTYPE_BIND_ACK, addr)
        };
        BindAck {
            max_xmit_frag: self.max_xmit_frag,
            max_recv_frag: self.max_recv_frag,
            assoc_group_id: self.assoc_group_id,
            secondary_address,
            results,
        }
        .encode(ptype, header.call_id, &mut out);
        self.queue(out);
        Ok(())
    }

    fn handle_request(&mut self, header: &Header, pdu: &[u8]) -> Result<(), RpcError> {
        if pdu.len() < REQUEST_HEADER_LEN {
            return Err(RpcError::Malformed("request truncated"));
        }
        let request = Request::parse(header, pdu)?;
        let call_id = header.call_id;
        if !self.bound {
            return self.fault(call_id, 0, NCA_PROTO_ERROR);
        }
        if header.auth_length != 0 {
            self.partial = None;
            return self.fault(call_id, request.context_id, NCA_ACCESS_DENIED);
        }

        let first = header.flags & pdu::PFC_FIRST_FRAG != 0;
        let last = header.flags & pdu::PFC_LAST_FRAG != 0;
        let call = if first {
            // A new call abandons any half-received one.
            PartialCall {
                call_id,
                context_id: request.context_id,
                opnum: request.opnum,
                stub: request.stub.to_vec(),
            }
        } else {
            match self.partial.take() {
                Some(mut p) if p.call_id == call_id => {
                    if p.stub.len() + request.stub.len() > MAX_REQUEST_STUB {
                        return self.fault(call_id, p.context_id, NCA_PROTO_ERROR);
                    }
                    p.stub.extend_from_slice(request.stub);
                    p
                }
                _ => return self.fault(call_id, request.context_id, NCA_PROTO_ERROR),
            }
        };
        if !last {
            self.partial = Some(call);
            return Ok(());
        }

        if !self.contexts.contains(&call.context_id) {
            return self.fault(call_id, call.context_id, NCA_UNK_IF);
        }
        let server = srvsvc::Server {
            name: &self.server_name,
            comment: &self.server_comment,
            shares: &self.shares,
        };
        let mut out = Vec::new();
        match server.call(call.opnum, &call.stub) {
            Ok(stub) => pdu::encode_response(
                call_id,
                call.context_id,
                &stub,
                usize::from(self.max_xmit_frag),
                &mut out,
            ),
            Err(CallError::UnknownOpnum) => {
                pdu::encode_fault(call_id, call.context_id, NCA_OP_RNG_ERROR, &mut out)
            }
            Err(CallError::BadStub) => {
                pdu::encode_fault(call_id, call.context_id, NCA_FAULT_NDR, &mut out)
            }
        }
        self.queue(out);
        Ok(())
    }

    fn fault(&mut self, call_id: u32, context_id: u16, status: u32) -> Result<(), RpcError> {
        let mut out = Vec::new();
        pdu::encode_fault(call_id, context_id, status, &mut out);
        self.queue(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdu::{ContextItem, PFC_FIRST_FRAG, PFC_LAST_FRAG};
    use crate::srvsvc::tests::{
        decode_share_enum, share_enum_request, shares, unhex, Entry, SAMBA_SHARE_ENUM_ALL_L1,
    };
    use crate::ShareKind;

    const BTFN_3: SyntaxId = SyntaxId {
        uuid: [
            0x2c, 0x1c, 0xb7, 0x6c, 0x12, 0x98, 0x40, 0x45, 3, 0, 0, 0, 0, 0, 0, 0,
        ],
        version: 1,
    };
    const NDR64: SyntaxId = SyntaxId::NDR64;

    fn item(context_id: u16, abstract_syntax: SyntaxId, ts: &[SyntaxId]) -> ContextItem {
        ContextItem {
            context_id,
            abstract_syntax,
            transfer_syntaxes: ts.to_vec(),
        }
    }

    fn bind_pdu(contexts: Vec<ContextItem>) -> Vec<u8> {
        Bind {
            max_xmit_frag: 5840,
            max_recv_frag: 5840,
            assoc_group_id: 0,
            contexts,
        }
        .encode(pdu::PTYPE_BIND, 1)
    }

    fn srvsvc_bind() -> Vec<u8> {
        bind_pdu(vec![item(0, SyntaxId::SRVSVC, &[SyntaxId::NDR20])])
    }

    /// Splits queued output into PDUs, checking each frame's length.
    fn take_pdus(pipe: &mut Pipe) -> Vec<(Header, Vec<u8>)> {
        let bytes = pipe.read(usize::MAX);
        assert_eq!(pipe.pending(), 0);
        let mut pdus = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let h = Header::parse(&bytes[at..]).unwrap();
            let len = usize::from(h.frag_length);
            pdus.push((h, bytes[at..at + len].to_vec()));
            at += len;
        }
        assert_eq!(at, bytes.len(), "output ends on a PDU boundary");
        pdus
    }

    /// Reassembles the response stub of one call from its fragments.
    fn response_stub(pdus: &[(Header, Vec<u8>)], max_frag: usize) -> Vec<u8> {
        let mut stub = Vec::new();
        for (i, (h, pdu)) in pdus.iter().enumerate() {
            assert_eq!(h.ptype, pdu::PTYPE_RESPONSE, "{pdu:02x?}");
            assert!(pdu.len() <= max_frag);
            assert_eq!(h.flags & PFC_FIRST_FRAG != 0, i == 0);
            assert_eq!(h.flags & PFC_LAST_FRAG != 0, i == pdus.len() - 1);
            stub.extend_from_slice(&pdu[24..]);
        }
        stub
    }

    fn fault_status(pdu: &[u8]) -> u32 {
        assert_eq!(pdu[2], pdu::PTYPE_FAULT);
        assert_eq!(pdu.len(), 32);
        u32::from_le_bytes(pdu[24..28].try_into().unwrap())
    }

    fn bound_pipe() -> Pipe {
        let mut pipe = Pipe::new("\\PIPE\\srvsvc", "HOST", shares());
        pipe.write(&srvsvc_bind()).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus[0].0.ptype, pdu::PTYPE_BIND_ACK);
        pipe
    }

    fn enum_request(call_id: u32) -> Vec<u8> {
        let stub = share_enum_request(1);
        Request {
            context_id: 0,
            opnum: 15,
            stub: &stub,
        }
        .encode(call_id, PFC_FIRST_FRAG | PFC_LAST_FRAG, stub.len() as u32)
    }

    /// A bind as Samba's newest client builds it (python3-samba
    /// `ndr_pack(ncacn_packet)`): srvsvc over NDR20 plus a bind time feature
    /// negotiation item offering both features.
    const SAMBA_BIND: &str = "05000b03100000007400000001000000b810b81000000000\
        0200000000000100c84f324b7016d30112785a47bf6ee18803000000045d888aeb1cc9119fe8\
        08002b1048600200000001000100c84f324b7016d30112785a47bf6ee188030000002c1cb76c\
        12984045030000000000000001000000";

    #[test]
    fn samba_client_bind_and_share_enum() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&unhex(SAMBA_BIND)).unwrap();
        let pdus = take_pdus(&mut pipe);
        let ack = BindAck::parse(&pdus[0].1).unwrap();
        let got: Vec<_> = ack.results.iter().map(|r| (r.result, r.reason)).collect();
        assert_eq!(
            got,
            [(pdu::RESULT_ACCEPTANCE, 0), (pdu::RESULT_NEGOTIATE_ACK, 2)]
        );
        let stub = unhex(SAMBA_SHARE_ENUM_ALL_L1);
        let req = Request {
            context_id: 0,
            opnum: 15,
            stub: &stub,
        }
        .encode(2, PFC_FIRST_FRAG | PFC_LAST_FRAG, stub.len() as u32);
        pipe.write(&req).unwrap();
        let (_, entries, total, _, status) =
            decode_share_enum(&response_stub(&take_pdus(&mut pipe), 4280));
        assert_eq!((entries.len(), total, status), (3, 3, 0));
    }

    #[test]
    fn bind_is_acknowledged() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&srvsvc_bind()).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus.len(), 1);
        let (h, pdu) = &pdus[0];
        assert_eq!((h.ptype, h.call_id, h.flags), (pdu::PTYPE_BIND_ACK, 1, 3));
        let ack = BindAck::parse(pdu).unwrap();
        assert_eq!((ack.max_xmit_frag, ack.max_recv_frag), (4280, 4280));
        assert_ne!(ack.assoc_group_id, 0);
        assert_eq!(ack.secondary_address, "\\PIPE\\srvsvc");
        assert_eq!(
            ack.results,
            [ContextResult {
                result: pdu::RESULT_ACCEPTANCE,
                reason: 0,
                transfer_syntax: SyntaxId::NDR20
            }]
        );
    }

    #[test]
    fn windows_style_bind_with_ndr64_and_feature_negotiation() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&bind_pdu(vec![
            item(0, SyntaxId::SRVSVC, &[SyntaxId::NDR20]),
            item(1, SyntaxId::SRVSVC, &[NDR64]),
            item(2, SyntaxId::SRVSVC, &[BTFN_3]),
        ]))
        .unwrap();
        let pdus = take_pdus(&mut pipe);
        let ack = BindAck::parse(&pdus[0].1).unwrap();
        let got: Vec<_> = ack.results.iter().map(|r| (r.result, r.reason)).collect();
        assert_eq!(
            got,
            [
                (pdu::RESULT_ACCEPTANCE, 0),
                (
                    pdu::RESULT_PROVIDER_REJECTION,
                    pdu::REASON_TRANSFER_SYNTAXES_NOT_SUPPORTED
                ),
                (pdu::RESULT_NEGOTIATE_ACK, 2),
            ]
        );
        assert_eq!(ack.results[0].transfer_syntax, SyntaxId::NDR20);
        assert_eq!(ack.results[1].transfer_syntax, SyntaxId::NULL);
        assert_eq!(ack.results[2].transfer_syntax, SyntaxId::NULL);

        // Context 1 was refused: calls on it are faulted, context 0 works.
        let stub = share_enum_request(1);
        let req = |ctx| {
            Request {
                context_id: ctx,
                opnum: 15,
                stub: &stub,
            }
            .encode(2, 3, 0)
        };
        pipe.write(&req(1)).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_UNK_IF);
        pipe.write(&req(0)).unwrap();
        assert_eq!(take_pdus(&mut pipe)[0].0.ptype, pdu::PTYPE_RESPONSE);
    }

    #[test]
    fn unknown_interface_is_rejected() {
        let lsarpc = SyntaxId {
            uuid: [
                0x78, 0x57, 0x34, 0x12, 0x34, 0x12, 0xcd, 0xab, 0xef, 0, 1, 0x23, 0x45, 0x67, 0x89,
                0xab,
            ],
            version: 0,
        };
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&bind_pdu(vec![item(0, lsarpc, &[SyntaxId::NDR20])]))
            .unwrap();
        let ack = BindAck::parse(&take_pdus(&mut pipe)[0].1).unwrap();
        assert_eq!(ack.results[0].result, pdu::RESULT_PROVIDER_REJECTION);
        assert_eq!(
            ack.results[0].reason,
            pdu::REASON_ABSTRACT_SYNTAX_NOT_SUPPORTED
        );
        // srvsvc v2 is another interface as far as binding goes.
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        let v2 = SyntaxId {
            version: 2,
            ..SyntaxId::SRVSVC
        };
        pipe.write(&bind_pdu(vec![item(0, v2, &[SyntaxId::NDR20])]))
            .unwrap();
        let ack = BindAck::parse(&take_pdus(&mut pipe)[0].1).unwrap();
        assert_eq!(ack.results[0].result, pdu::RESULT_PROVIDER_REJECTION);
        // Requests on the unbound context fault with nca_unk_if.
        pipe.write(&enum_request(2)).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_UNK_IF);
    }

    #[test]
    fn frag_sizes_are_negotiated_down() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        let mut bind = srvsvc_bind();
        bind[16..18].copy_from_slice(&3001u16.to_le_bytes());
        pipe.write(&bind).unwrap();
        let ack = BindAck::parse(&take_pdus(&mut pipe)[0].1).unwrap();
        assert_eq!((ack.max_xmit_frag, ack.max_recv_frag), (3000, 3000));

        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        bind[16..18].copy_from_slice(&100u16.to_le_bytes());
        pipe.write(&bind).unwrap();
        let ack = BindAck::parse(&take_pdus(&mut pipe)[0].1).unwrap();
        assert_eq!((ack.max_xmit_frag, ack.max_recv_frag), (2048, 2048));
    }

    #[test]
    fn second_bind_is_refused_and_alter_context_answers() {
        let mut pipe = bound_pipe();
        pipe.write(&srvsvc_bind()).unwrap();
        assert_eq!(take_pdus(&mut pipe)[0].0.ptype, pdu::PTYPE_BIND_NAK);

        let alter = Bind {
            max_xmit_frag: 4280,
            max_recv_frag: 4280,
            assoc_group_id: 0,
            contexts: vec![item(5, SyntaxId::SRVSVC, &[SyntaxId::NDR20])],
        }
        .encode(pdu::PTYPE_ALTER_CONTEXT, 3);
        pipe.write(&alter).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus[0].0.ptype, pdu::PTYPE_ALTER_CONTEXT_RESP);
        let resp = BindAck::parse(&pdus[0].1).unwrap();
        assert_eq!(resp.secondary_address, "");
        assert_eq!(resp.results[0].result, pdu::RESULT_ACCEPTANCE);
        // And the new context serves calls.
        let stub = share_enum_request(1);
        let req = Request {
            context_id: 5,
            opnum: 15,
            stub: &stub,
        }
        .encode(4, 3, 0);
        pipe.write(&req).unwrap();
        assert_eq!(take_pdus(&mut pipe)[0].0.ptype, pdu::PTYPE_RESPONSE);
    }

    #[test]
    fn contexts_past_the_limit_are_refused_and_known_ones_still_serve() {
        let mut pipe = bound_pipe();
        let mut results = Vec::new();
        for round in 0..3u16 {
            let alter = Bind {
                max_xmit_frag: 4280,
                max_recv_frag: 4280,
                assoc_group_id: 0,
                contexts: (0..40)
                    .map(|i| item(1 + round * 40 + i, SyntaxId::SRVSVC, &[SyntaxId::NDR20]))
                    .collect(),
            }
            .encode(pdu::PTYPE_ALTER_CONTEXT, 2 + u32::from(round));
            pipe.write(&alter).unwrap();
            let pdus = take_pdus(&mut pipe);
            results.extend(BindAck::parse(&pdus[0].1).unwrap().results);
        }
        let accepted = results
            .iter()
            .filter(|r| r.result == pdu::RESULT_ACCEPTANCE)
            .count();
        // Context 0 came with the bind.
        assert_eq!(accepted + 1, MAX_CONTEXTS);
        assert!(results[accepted..]
            .iter()
            .all(|r| r.reason == pdu::REASON_LOCAL_LIMIT_EXCEEDED));
        pipe.write(&enum_request(9)).unwrap();
        assert_eq!(take_pdus(&mut pipe)[0].0.ptype, pdu::PTYPE_RESPONSE);
    }

    #[test]
    fn alter_context_before_bind_faults() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        let alter = Bind::parse(&srvsvc_bind())
            .unwrap()
            .encode(pdu::PTYPE_ALTER_CONTEXT, 1);
        pipe.write(&alter).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_PROTO_ERROR);
    }

    #[test]
    fn bind_with_auth_is_refused() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        let mut bind = srvsvc_bind();
        bind[10] = 8;
        pipe.write(&bind).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus[0].0.ptype, pdu::PTYPE_BIND_NAK);
        assert_eq!(
            u16::from_le_bytes([pdus[0].1[16], pdus[0].1[17]]),
            pdu::NAK_AUTHENTICATION_TYPE_NOT_RECOGNIZED
        );
    }

    #[test]
    fn share_enum_over_the_pipe() {
        let mut pipe = bound_pipe();
        pipe.write(&enum_request(2)).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus.len(), 1);
        assert_eq!(pdus[0].0.call_id, 2);
        let stub = response_stub(&pdus, 4280);
        let (level, entries, total, _, status) = decode_share_enum(&stub);
        assert_eq!((level, total, status), (1, 3, 0));
        assert_eq!(
            entries[2],
            Entry {
                name: "IPC$".into(),
                kind: 0x8000_0003,
                comment: "IPC Service".into()
            }
        );
    }

    #[test]
    fn bind_and_request_in_one_write_and_byte_by_byte() {
        let mut stream = srvsvc_bind();
        stream.extend_from_slice(&enum_request(2));
        stream.extend_from_slice(&enum_request(3));

        let mut whole = Pipe::new("srvsvc", "HOST", shares());
        whole.write(&stream).unwrap();
        let expected = whole.read(usize::MAX);

        let mut bytewise = Pipe::new("srvsvc", "HOST", shares());
        for b in &stream {
            bytewise.write(std::slice::from_ref(b)).unwrap();
        }
        let got = bytewise.read(usize::MAX);
        // Assoc group ids differ per pipe; compare with it masked out.
        let mask = |mut v: Vec<u8>| {
            v[20..24].fill(0);
            v
        };
        assert_eq!(mask(got), mask(expected.clone()));
        let mut check = Pipe::new("srvsvc", "HOST", shares());
        check.output.extend(expected);
        let pdus = take_pdus(&mut check);
        let kinds: Vec<_> = pdus.iter().map(|(h, _)| (h.ptype, h.call_id)).collect();
        assert_eq!(
            kinds,
            [
                (pdu::PTYPE_BIND_ACK, 1),
                (pdu::PTYPE_RESPONSE, 2),
                (pdu::PTYPE_RESPONSE, 3)
            ]
        );
    }

    #[test]
    fn fragmented_request_is_reassembled() {
        let mut pipe = bound_pipe();
        let stub = share_enum_request(1);
        let parts = [&stub[..8], &stub[8..24], &stub[24..]];
        for (i, part) in parts.iter().enumerate() {
            let mut flags = 0;
            if i == 0 {
                flags |= PFC_FIRST_FRAG;
            }
            if i == parts.len() - 1 {
                flags |= PFC_LAST_FRAG;
            }
            let pdu = Request {
                context_id: 0,
                opnum: 15,
                stub: part,
            }
            .encode(7, flags, stub.len() as u32);
            pipe.write(&pdu).unwrap();
            if i < parts.len() - 1 {
                assert_eq!(pipe.pending(), 0, "no reply before the last fragment");
            }
        }
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus[0].0.call_id, 7);
        let (_, entries, _, _, status) = decode_share_enum(&response_stub(&pdus, 4280));
        assert_eq!((entries.len(), status), (3, 0));
    }

    #[test]
    fn stray_middle_fragment_faults() {
        let mut pipe = bound_pipe();
        let pdu = Request {
            context_id: 0,
            opnum: 15,
            stub: &[0; 8],
        }
        .encode(9, PFC_LAST_FRAG, 8);
        pipe.write(&pdu).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_PROTO_ERROR);
    }

    #[test]
    fn oversized_fragmented_request_faults() {
        let mut pipe = bound_pipe();
        let chunk = [0u8; 4096];
        let first = Request {
            context_id: 0,
            opnum: 15,
            stub: &chunk,
        };
        pipe.write(&first.encode(4, PFC_FIRST_FRAG, 0)).unwrap();
        for _ in 0..MAX_REQUEST_STUB / chunk.len() {
            pipe.write(&first.encode(4, 0, 0)).unwrap();
        }
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_PROTO_ERROR);
    }

    #[test]
    fn large_response_is_fragmented() {
        let many: Vec<ShareInfo> = (0..200)
            .map(|i| ShareInfo {
                browseable: true,
                name: format!("share{i:03}"),
                kind: ShareKind::Disk,
                comment: format!("comment number {i}"),
                path: format!("/srv/{i}"),
            })
            .collect();
        let mut pipe = Pipe::new("srvsvc", "HOST", many.clone());
        pipe.write(&srvsvc_bind()).unwrap();
        take_pdus(&mut pipe);
        pipe.write(&enum_request(2)).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert!(pdus.len() > 2);
        let (_, entries, total, _, status) = decode_share_enum(&response_stub(&pdus, 4280));
        assert_eq!((total, status), (200, 0));
        for (e, s) in entries.iter().zip(&many) {
            assert_eq!((&e.name, e.kind, &e.comment), (&s.name, 0, &s.comment));
        }
        assert_eq!(entries.len(), 200);
    }

    #[test]
    fn read_returns_at_most_max() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&srvsvc_bind()).unwrap();
        let total = pipe.pending();
        assert!(total > 10);
        let a = pipe.read(10);
        assert_eq!(a.len(), 10);
        assert_eq!(pipe.pending(), total - 10);
        let b = pipe.read(usize::MAX);
        assert_eq!(b.len(), total - 10);
        assert!(pipe.read(100).is_empty());
        let mut all = a;
        all.extend(b);
        assert_eq!(BindAck::parse(&all).unwrap().results.len(), 1);
    }

    #[test]
    fn unknown_opnum_faults() {
        let mut pipe = bound_pipe();
        let pdu = Request {
            context_id: 0,
            opnum: 200,
            stub: &[],
        }
        .encode(5, 3, 0);
        pipe.write(&pdu).unwrap();
        let pdus = take_pdus(&mut pipe);
        assert_eq!(pdus[0].0.call_id, 5);
        assert_eq!(pdus[0].0.flags, 0x23);
        assert_eq!(fault_status(&pdus[0].1), NCA_OP_RNG_ERROR);
    }

    #[test]
    fn bad_stub_faults_with_ndr_error() {
        let mut pipe = bound_pipe();
        let pdu = Request {
            context_id: 0,
            opnum: 15,
            stub: &[1, 2, 3],
        }
        .encode(5, 3, 0);
        pipe.write(&pdu).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_FAULT_NDR);
    }

    #[test]
    fn request_before_bind_faults() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&enum_request(1)).unwrap();
        assert_eq!(fault_status(&take_pdus(&mut pipe)[0].1), NCA_PROTO_ERROR);
    }

    #[test]
    fn framing_errors_are_errors() {
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        let mut bind = srvsvc_bind();
        bind[4] = 0; // big-endian
        assert!(matches!(pipe.write(&bind), Err(RpcError::Unsupported(_))));
        // The pipe recovers for the next, well-formed write.
        pipe.write(&srvsvc_bind()).unwrap();
        assert_eq!(take_pdus(&mut pipe)[0].0.ptype, pdu::PTYPE_BIND_ACK);

        let mut resp = Vec::new();
        pdu::encode_response(1, 0, &[], 4280, &mut resp);
        assert!(
            pipe.write(&resp).is_err(),
            "servers do not accept responses"
        );

        let mut short = enum_request(2);
        short[8..10].copy_from_slice(&20u16.to_le_bytes());
        short.truncate(20);
        assert!(matches!(pipe.write(&short), Err(RpcError::Malformed(_))));
    }

    #[test]
    fn unserved_pipe_rejects_every_interface() {
        let mut pipe = Pipe::new("lsarpc", "HOST", shares());
        pipe.write(&srvsvc_bind()).unwrap();
        let ack = BindAck::parse(&take_pdus(&mut pipe)[0].1).unwrap();
        assert_eq!(ack.results[0].result, pdu::RESULT_PROVIDER_REJECTION);
    }

    /// xorshift64*: deterministic, dependency-free noise for the tests below.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn valid_stream() -> Vec<u8> {
        let mut stream = bind_pdu(vec![
            item(0, SyntaxId::SRVSVC, &[SyntaxId::NDR20]),
            item(1, SyntaxId::SRVSVC, &[NDR64]),
            item(2, SyntaxId::SRVSVC, &[BTFN_3]),
        ]);
        stream.extend_from_slice(&enum_request(2));
        let mut w = crate::ndr::NdrWriter::new();
        w.pointer(true);
        w.string("\\\\host");
        w.string("public");
        w.u32(2);
        let stub = w.finish();
        stream.extend_from_slice(
            &Request {
                context_id: 0,
                opnum: 16,
                stub: &stub,
            }
            .encode(3, PFC_FIRST_FRAG, 0),
        );
        stream.extend_from_slice(
            &Request {
                context_id: 0,
                opnum: 16,
                stub: &[],
            }
            .encode(3, PFC_LAST_FRAG, 0),
        );
        stream
    }

    #[test]
    fn every_prefix_never_panics() {
        let stream = valid_stream();
        for n in 0..=stream.len() {
            let mut pipe = Pipe::new("srvsvc", "HOST", shares());
            pipe.write(&stream[..n]).unwrap();
            let _ = pipe.read(usize::MAX);
        }
        // The whole stream yields bind_ack, a response and, once
        // reassembled, the GetInfo response.
        let mut pipe = Pipe::new("srvsvc", "HOST", shares());
        pipe.write(&stream).unwrap();
        let kinds: Vec<_> = take_pdus(&mut pipe).iter().map(|(h, _)| h.ptype).collect();
        assert_eq!(
            kinds,
            [
                pdu::PTYPE_BIND_ACK,
                pdu::PTYPE_RESPONSE,
                pdu::PTYPE_RESPONSE
            ]
        );
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..2000 {
            let mut pipe = Pipe::new("srvsvc", "HOST", shares());
            let len = rng.below(300);
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let _ = pipe.write(&data);
            let _ = pipe.read(rng.below(5000));
        }
    }

    #[test]
    fn mutated_valid_streams_never_panic() {
        let stream = valid_stream();
        let mut rng = Rng(0xdead_beef_cafe_f00d);
        for _ in 0..5000 {
            let mut data = stream.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(data.len());
                data[at] = rng.next() as u8;
            }
            let mut pipe = Pipe::new("srvsvc", "HOST", shares());
            let mut at = 0;
            while at < data.len() {
                let n = 1 + rng.below(200);
                let end = (at + n).min(data.len());
                let _ = pipe.write(&data[at..end]);
                at = end;
            }
            let _ = pipe.read(usize::MAX);
        }
    }
}
