//! TREE_CONNECT and TREE_DISCONNECT: disk shares and IPC$.

use std::sync::Arc;

use copyless_proto::messages::{self, TreeConnectRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use crate::access;
use crate::connection::{Connection, Reply, Req};
use crate::server::Share;

pub enum TreeKind {
    Disk { index: usize, share: Arc<Share> },
    Ipc,
}

pub struct Tree {
    pub id: u32,
    pub kind: TreeKind,
    pub read_only: bool,
    pub maximal_access: u32,
}

const READ_ONLY_ACCESS: u32 = access::FILE_GENERIC_READ | access::FILE_GENERIC_EXECUTE;

impl Connection {
    pub(crate) fn tree_connect(
        &mut self,
        req: &Req<'_>,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let tc = TreeConnectRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        // \\server\share: the server part is not checked, as Windows does not.
        let name = tc
            .path
            .strip_prefix("\\\\")
            .and_then(|p| p.split_once('\\'))
            .map(|(_, share)| share)
            .ok_or(status::BAD_NETWORK_NAME)?;
        let (kind, read_only) = if name.eq_ignore_ascii_case("IPC$") {
            (TreeKind::Ipc, false)
        } else {
            let index = self
                .server
                .share_index(name)
                .ok_or(status::BAD_NETWORK_NAME)?;
            let share = self.server.shares[index].clone();
            let ro = share.read_only;
            (TreeKind::Disk { index, share }, ro)
        };
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        if session.trees.len() as u32 >= self.server.config.max_tree_connects {
            return Err(status::INSUFFICIENT_RESOURCES);
        }
        let maximal_access = if read_only {
            READ_ONLY_ACCESS
        } else {
            access::FILE_ALL_ACCESS
        };
        let id = session.next_tree_id;
        session.next_tree_id = session.next_tree_id.wrapping_add(1).max(1);
        let share_type = match kind {
            TreeKind::Ipc => messages::SHARE_TYPE_PIPE,
            TreeKind::Disk { .. } => messages::SHARE_TYPE_DISK,
        };
        session.trees.insert(
            id,
            Tree {
                id,
                kind,
                read_only,
                maximal_access,
            },
        );
        reply.tree_id = id;
        reply.header_tree_id = id;
        messages::write_tree_connect_response(w, share_type, 0, 0, maximal_access);
        Ok(status::SUCCESS)
    }

    pub(crate) fn tree_disconnect(
        &mut self,
        req: &Req<'_>,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        messages::parse_empty(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let server = self.server.clone();
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        session
            .trees
            .remove(&req.tree_id)
            .ok_or(status::NETWORK_NAME_DELETED)?;
        let ids: Vec<u64> = session
            .opens
            .iter()
            .filter(|(_, o)| o.tree_id == req.tree_id)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(open) = session.opens.remove(&id) {
                crate::open::close_open(&server, open);
            }
        }
        messages::write_empty_response(w);
        Ok(status::SUCCESS)
    }
}
