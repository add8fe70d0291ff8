//! IOCTL (MS-SMB2 3.3.5.15): named pipe transceive, negotiate validation,
//! interface list, DFS referrals (none), snapshots (none), object ids,
//! resiliency; the controls on a file's data are data_fsctl.rs's.

use std::net::SocketAddr;

use copyless_proto::messages::{self as m, FileId, IoctlRequest, ValidateNegotiateInfo};
use copyless_proto::negotiate::DIALECT_210;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::tree::TreeKind;
use crate::durable::{Durable, MAX_RESILIENT_TIMEOUT_MS};
use crate::env::Env;
use crate::handlers::fsctl::Work;
use crate::open::{current_path, OpenKind};

const FSCTL_SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
const FSCTL_GET_OBJECT_ID: u32 = 0x0009_009C;
const FSCTL_LMR_REQUEST_RESILIENCY: u32 = 0x0014_01D4;
const FSCTL_CREATE_OR_GET_OBJECT_ID: u32 = 0x0009_00C0;
/// What we report as link speed: 10 Gbit/s.
const LINK_SPEED: u64 = 10_000_000_000;

/// Whether the FSCTL `ctl_code` is answered from what the server keeps
/// in memory: the negotiation to validate, this connection's address,
/// the referrals there are none of, object ids (made of the file's
/// identity) and an open's resiliency; the controls on a file's data
/// (data_fsctl.rs) and the list of snapshots check the server's tables
/// and leave their work to a call. A pipe's transaction (whose RPC may look users up,
/// which may ask a directory server) is not.
pub(crate) fn in_place(ctl_code: u32) -> bool {
    matches!(
        ctl_code,
        m::FSCTL_VALIDATE_NEGOTIATE_INFO
            | m::FSCTL_QUERY_NETWORK_INTERFACE_INFO
            | m::FSCTL_DFS_GET_REFERRALS
            | m::FSCTL_DFS_GET_REFERRALS_EX
            | FSCTL_SRV_ENUMERATE_SNAPSHOTS
            | FSCTL_GET_OBJECT_ID
            | FSCTL_CREATE_OR_GET_OBJECT_ID
            | FSCTL_LMR_REQUEST_RESILIENCY
    ) || crate::handlers::data_fsctl::serves(ctl_code)
}

impl Connection {
    pub(crate) fn ioctl(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        let io = IoctlRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        // MS-SMB2 3.3.5.15: nothing larger than MaxTransactSize either way,
        // and the credit charge pays for the larger of the two.
        let max = self.max_io;
        if io.input.len() as u64 > u64::from(max)
            || io.max_input_response > max
            || io.max_output_response > max
        {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, io.max_output_response.max(io.input.len() as u32))?;
        if io.flags & m::IOCTL_IS_FSCTL == 0 {
            return Err(status::NOT_SUPPORTED);
        }
        if crate::handlers::data_fsctl::serves(io.ctl_code) {
            return self.data_fsctl(req, compound, &io, reply, w, env);
        }
        match io.ctl_code {
            m::FSCTL_VALIDATE_NEGOTIATE_INFO => {
                let v = match ValidateNegotiateInfo::parse(io.input) {
                    Ok(v) => v,
                    Err(_) => {
                        reply.disconnect = true;
                        return Err(status::INVALID_PARAMETER);
                    }
                };
                if v.capabilities != self.client_capabilities
                    || v.guid != self.client_guid
                    || v.security_mode != self.client_security_mode
                    || v.dialects != self.client_dialects
                {
                    // A tampered negotiation: end the connection (3.3.5.15.12).
                    reply.disconnect = true;
                    return Err(status::ACCESS_DENIED);
                }
                let mut out = Writer::new();
                out.u32(self.server_capabilities)
                    .bytes(&self.server.config.server_guid)
                    .u16(self.server_security_mode)
                    .u16(self.dialect);
                m::write_ioctl_response(w, io.ctl_code, io.file_id, &out.buf);
                Ok(status::SUCCESS)
            }
            m::FSCTL_QUERY_NETWORK_INTERFACE_INFO => {
                let out = interface_info(self.local_addr);
                if out.len() > io.max_output_response as usize {
                    return Err(status::BUFFER_TOO_SMALL);
                }
                m::write_ioctl_response(w, io.ctl_code, io.file_id, &out);
                Ok(status::SUCCESS)
            }
            m::FSCTL_DFS_GET_REFERRALS | m::FSCTL_DFS_GET_REFERRALS_EX => Err(status::NOT_FOUND),
            m::FSCTL_PIPE_TRANSCEIVE => {
                let max = io.max_output_response as usize;
                let file_id: FileId = self.file_id(io.file_id, compound)?;
                let open = self.open_mut(req, compound, io.file_id)?;
                let OpenKind::Pipe(p) = &mut open.kind else {
                    return Err(status::INVALID_DEVICE_REQUEST);
                };
                p.write(io.input).map_err(|_| status::INVALID_PARAMETER)?;
                let out = p.read(max);
                let more = p.pending() > 0;
                m::write_ioctl_response(w, io.ctl_code, file_id, &out);
                Ok(if more {
                    status::BUFFER_OVERFLOW
                } else {
                    status::SUCCESS
                })
            }
            FSCTL_SRV_ENUMERATE_SNAPSHOTS => {
                let file_id = self.file_id(io.file_id, compound)?;
                if io.max_output_response < 16 {
                    return Err(status::INVALID_PARAMETER);
                }
                let tree = self
                    .sessions
                    .get(&req.session_id)
                    .and_then(|s| s.trees.get(&req.tree_id));
                let (snapshots, who) = match tree {
                    Some(tree) => match &tree.kind {
                        TreeKind::Disk { share, .. } => (share.snapshots.clone(), tree.who.clone()),
                        TreeKind::Ipc => return Err(status::INVALID_DEVICE_REQUEST),
                    },
                    None => return Err(status::NETWORK_NAME_DELETED),
                };
                let server = self.server.clone();
                let open = self.open_mut(req, compound, io.file_id)?;
                let OpenKind::File(f) = &open.kind else {
                    return Err(status::INVALID_DEVICE_REQUEST);
                };
                let path = current_path(&server, &f.key).unwrap_or_default();
                let work = Work::Snapshots {
                    snapshots,
                    who,
                    path,
                    room: io.max_output_response as usize,
                };
                crate::handlers::data_fsctl::call(reply, &f.data_file(), file_id, io.ctl_code, work)
            }
            FSCTL_GET_OBJECT_ID | FSCTL_CREATE_OR_GET_OBJECT_ID => {
                let file_id = self.file_id(io.file_id, compound)?;
                let open = self.open_mut(req, compound, io.file_id)?;
                let OpenKind::File(f) = &open.kind else {
                    return Err(status::INVALID_DEVICE_REQUEST);
                };
                if io.max_output_response < 64 {
                    return Err(status::BUFFER_TOO_SMALL);
                }
                // The object id is derived from the file's identity, so
                // it is stable without being stored (FILE_OBJECTID_BUFFER,
                // MS-FSCC 2.1.3).
                let (_, dev, ino, _) = f.key;
                let mut out = Writer::new();
                out.u64(ino).u64(dev);
                out.u64(dev).u64(0);
                out.u64(ino).u64(dev);
                out.zeros(16);
                m::write_ioctl_response(w, io.ctl_code, file_id, &out.buf);
                Ok(status::SUCCESS)
            }
            FSCTL_LMR_REQUEST_RESILIENCY => {
                // MS-SMB2 3.3.5.15.9: the open is kept after a network
                // failure, whatever it caches, for the time asked.
                if self.dialect < DIALECT_210 {
                    return Err(status::INVALID_DEVICE_REQUEST);
                }
                let file_id = self.file_id(io.file_id, compound)?;
                let open = self.open_mut(req, compound, io.file_id)?;
                let OpenKind::File(f) = &mut open.kind else {
                    return Err(status::INVALID_DEVICE_REQUEST);
                };
                let timeout = match io.input.get(..4) {
                    Some(t) => u32::from_le_bytes([t[0], t[1], t[2], t[3]]),
                    None => return Err(status::INVALID_PARAMETER),
                };
                if io.input.len() < 8 || timeout > MAX_RESILIENT_TIMEOUT_MS {
                    return Err(status::INVALID_PARAMETER);
                }
                let timeout = if timeout == 0 {
                    MAX_RESILIENT_TIMEOUT_MS
                } else {
                    timeout
                };
                f.durable = Some(Box::new(Durable::resilient(timeout)));
                m::write_ioctl_response(w, io.ctl_code, file_id, &[]);
                Ok(status::SUCCESS)
            }
            _ => {
                self.open_mut(req, compound, io.file_id)?;
                Err(status::INVALID_DEVICE_REQUEST)
            }
        }
    }
}

/// One NETWORK_INTERFACE_INFO (MS-SMB2 2.2.32.5) for the address the
/// client reached us on.
fn interface_info(local: SocketAddr) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(0).u32(1).u32(0).u32(0).u64(LINK_SPEED);
    let start = w.len();
    match local {
        SocketAddr::V4(a) => {
            w.u16(0x0002)
                .bytes(&a.port().to_be_bytes())
                .bytes(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            w.u16(0x0017)
                .bytes(&a.port().to_be_bytes())
                .u32(a.flowinfo())
                .bytes(&a.ip().octets())
                .u32(a.scope_id());
        }
    }
    w.zeros(128 - (w.len() - start));
    w.into_vec()
}
