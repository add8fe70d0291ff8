//! TREE_CONNECT and TREE_DISCONNECT: disk shares and IPC$.

use std::sync::Arc;

use copyless_proto::messages::{self, TreeConnectRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;
use copyless_vfs::{Identity, RootState};

use crate::access;
use crate::conn::connection::{Connection, Reply, Req};
use crate::conn::removals::RemoveBy;
use crate::conn::session::Session;
use crate::server::{includes, Server, Share, ShareAccess};

pub enum TreeKind {
    Disk { index: usize, share: Arc<Share> },
    Ipc,
}

pub struct Tree {
    pub id: u32,
    pub kind: TreeKind,
    /// The shares' generation its share was last found current in.
    pub generation: u64,
    pub read_only: bool,
    pub maximal_access: u32,
    /// Who file work through this tree is done as: the session's
    /// identity, or the share's forced user and group.
    pub who: Identity,
}

fn maximal_access(read_only: bool) -> u32 {
    if read_only {
        access::FILE_GENERIC_READ | access::FILE_GENERIC_EXECUTE
    } else {
        access::FILE_ALL_ACCESS
    }
}

/// What `session` may do on `share`: ACCESS_DENIED when it may not
/// connect, as Windows answers; else whether it may only read, and who its
/// file work there is done as.
fn share_access(
    server: &Server,
    share: &Share,
    session: &Session,
) -> Result<(bool, Identity), NtStatus> {
    let rights = share_rights(server, share, session);
    if !rights.allowed {
        return Err(status::ACCESS_DENIED);
    }
    Ok((rights.read_only, rights.who))
}

/// Whether `session` may connect to `share`, by its access lists (the
/// client's address aside).
pub(crate) fn may_connect(server: &Server, share: &Share, session: &Session) -> bool {
    share_rights(server, share, session).allowed
}

struct Rights {
    allowed: bool,
    read_only: bool,
    who: Identity,
}

fn share_rights(server: &Server, share: &Share, session: &Session) -> Rights {
    let rules = &share.access;
    let guest = session.guest || session.anonymous;
    let groups = match server.credentials.unix_account(&session.user) {
        Some(account) if !guest => account.groups.clone(),
        _ => Vec::new(),
    };
    let user = if guest { "" } else { session.user.as_str() };
    let allowed = if guest {
        rules.guest_ok
    } else {
        rules
            .valid_users
            .as_ref()
            .is_none_or(|valid| includes(valid, user, &groups))
    };
    let read_only = if share.read_only {
        !includes(&rules.write_users, user, &groups)
    } else {
        includes(&rules.read_only_users, user, &groups)
    };
    Rights {
        allowed,
        read_only,
        who: forced(server, rules, &session.who),
    }
}

/// The session re-authenticated as someone else: its tree connects stay
/// (Windows keeps them), but what is done through them from now on is
/// done as the new user, with the new user's rights on each share.
pub(crate) fn reidentify_trees(server: &Server, session: &mut Session) {
    let mut trees = std::mem::take(&mut session.trees);
    for tree in trees.values_mut() {
        match &tree.kind {
            TreeKind::Ipc => tree.who = session.who.clone(),
            TreeKind::Disk { share, .. } => {
                let rights = share_rights(server, share, session);
                tree.read_only = rights.read_only;
                tree.maximal_access = maximal_access(rights.read_only);
                tree.who = rights.who;
            }
        }
    }
    session.trees = trees;
}

/// The identity a share's force_user and force_group make of `who`.
fn forced(server: &Server, rules: &ShareAccess, who: &Identity) -> Identity {
    if !server.config.act_as_users {
        return who.clone();
    }
    let who = rules.force_user.as_ref().unwrap_or(who);
    match (rules.force_group, who) {
        (Some(gid), Identity::Unix(ids)) => {
            let mut groups = ids.groups.clone();
            if !groups.contains(&gid) {
                groups.push(gid);
            }
            Identity::unix(ids.uid, gid, groups)
        }
        _ => who.clone(),
    }
}

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
        let session = self
            .sessions
            .get(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        // Read before the share is looked up: a reload in between makes
        // the tree look stale, and it is checked again, never the reverse.
        let generation = self.server.shares.generation();
        let (kind, read_only, who) = if name.eq_ignore_ascii_case("IPC$") {
            (TreeKind::Ipc, false, session.who.clone())
        } else {
            let (index, share) = self.share_to_connect(name, session)?;
            if !share.access.hosts.admits(self.client_addr.ip()) {
                return Err(status::ACCESS_DENIED);
            }
            let (read_only, who) = share_access(&self.server, &share, session)?;
            (TreeKind::Disk { index, share }, read_only, who)
        };
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        if session.trees.len() as u32 >= self.server.limits().max_tree_connects {
            return Err(status::INSUFFICIENT_RESOURCES);
        }
        let maximal_access = maximal_access(read_only);
        let id = session.next_tree_id;
        session.next_tree_id = session.next_tree_id.wrapping_add(1).max(1);
        let (share_type, share_flags) = match &kind {
            TreeKind::Ipc => (messages::SHARE_TYPE_PIPE, 0),
            // Clients show that a share hides what its reader may not
            // open (smbtorture smb2.acls.ACCESSBASED asks).
            TreeKind::Disk { share, .. } => (
                messages::SHARE_TYPE_DISK,
                if share.access.access_based_enumeration {
                    messages::SHAREFLAG_ACCESS_BASED_DIRECTORY_ENUM
                } else {
                    0
                },
            ),
        };
        session.trees.insert(
            id,
            Tree {
                id,
                kind,
                generation,
                read_only,
                maximal_access,
                who,
            },
        );
        reply.tree_id = id;
        reply.header_tree_id = id;
        messages::write_tree_connect_response(w, share_type, share_flags, 0, maximal_access);
        Ok(status::SUCCESS)
    }

    /// The share `name` names, when its folder is still the one it
    /// serves. A share whose folder was removed, or whose filesystem was
    /// unmounted, answers BAD_NETWORK_NAME, as a share that is not there:
    /// nothing may be written through a descriptor of what is gone. The
    /// keeper of the shares looks first, so that a folder made again is
    /// served at once. A user who logged on (not a guest) connecting to a
    /// share of their own name, where no other share has it, gets their
    /// home share (`[homes]`), made the first time.
    fn share_to_connect(
        &self,
        name: &str,
        session: &Session,
    ) -> Result<(usize, Arc<Share>), NtStatus> {
        let shares = &self.server.shares;
        let current = |found: Option<(usize, Arc<Share>)>| {
            found.filter(|(_, s)| s.vfs.root_state() == RootState::Current)
        };
        if let Some(found) = current(shares.find(name)) {
            return Ok(found);
        }
        let own_home =
            !session.anonymous && !session.guest && name.eq_ignore_ascii_case(&session.user);
        if let Some(homes) = self.server.homes().filter(|_| own_home) {
            let made = homes.home(&self.server, &session.user, &session.who);
            return current(made).ok_or(status::BAD_NETWORK_NAME);
        }
        self.server.check_shares();
        current(shares.find(name)).ok_or(status::BAD_NETWORK_NAME)
    }

    pub(crate) fn tree_disconnect(
        &mut self,
        req: &Req<'_>,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        messages::parse_empty(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        self.end_tree(req.session_id, req.tree_id)?;
        messages::write_empty_response(w);
        Ok(status::SUCCESS)
    }

    /// Removes a tree connect and closes the opens made through it.
    fn end_tree(&mut self, session_id: u64, tree_id: u32) -> Result<(), NtStatus> {
        let session = self
            .sessions
            .get_mut(&session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        session
            .trees
            .remove(&tree_id)
            .ok_or(status::NETWORK_NAME_DELETED)?;
        let ids: Vec<u64> = session
            .opens
            .iter()
            .filter(|(_, o)| o.tree_id == tree_id)
            .map(|(id, _)| *id)
            .collect();
        let opens = ids
            .iter()
            .filter_map(|id| session.opens.remove(id))
            .collect();
        self.release_all(session_id, opens, RemoveBy::Here);
        Ok(())
    }

    /// The shares changed since the tree was last checked (a reload): a
    /// tree connect whose share was removed or changed ends, with its
    /// opens, and the request gets STATUS_NETWORK_NAME_DELETED, as on
    /// Windows when a share is deleted; the client connects again and
    /// gets the new settings.
    pub(crate) fn recheck_tree(&mut self, session_id: u64, tree_id: u32) -> Result<(), NtStatus> {
        let generation = self.server.shares.generation();
        let Some(tree) = self
            .sessions
            .get_mut(&session_id)
            .and_then(|s| s.trees.get_mut(&tree_id))
        else {
            return Err(status::NETWORK_NAME_DELETED);
        };
        let current = match &tree.kind {
            TreeKind::Ipc => true,
            TreeKind::Disk { index, share } => self.server.shares.holds(*index, share),
        };
        if current {
            tree.generation = generation;
            return Ok(());
        }
        self.end_tree(session_id, tree_id)?;
        self.publish_status();
        Err(status::NETWORK_NAME_DELETED)
    }
}
