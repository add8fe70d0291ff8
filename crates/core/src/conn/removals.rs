//! Closes the connection makes on its own (a letter ends a session or asks
//! for an open, a disconnected durable open's time is up, a user leaves
//! the store, a re-authentication fails): the last close of a file to be
//! deleted removes it, which may wait for a disk, so the removal leaves as
//! a call and the close is finished ([`Connection::released`]) when it
//! comes back. An engine then never waits for a disk on the thread that
//! serves sockets for these.
//!
//! A close a request asks for (CLOSE, TREE_DISCONNECT, LOGOFF, a CREATE
//! that ends a parked open in its way) removes the file before its reply
//! goes: the client may look for the file as soon as it hears, and a
//! CREATE goes on to open the name. A connection that ends before a
//! removal's result is handed in finishes its close without it
//! ([`Connection::settle_removals`]), as it abandons a CLOSE.

use std::collections::HashMap;

use crate::conn::connection::Connection;
use crate::conn::pending::Closing;
use crate::intent::{Call, Token};
use crate::local::OwnGuard;
use crate::open::Open;

/// Where a release removes a file that goes with its last close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoveBy {
    /// While the request that asked for the close is handled.
    Here,
    /// By a call (see the module's note).
    Call,
}

/// A close whose removal is under way.
struct Removal {
    closing: Closing,
    /// The name it removes (path, and whether a folder); None for a
    /// named stream.
    name: Option<(String, bool)>,
    /// The removal is the server's own change until it is made.
    _mark: OwnGuard,
}

#[derive(Default)]
pub(crate) struct Removals {
    /// Made, for the engine to perform.
    pub(crate) calls: Vec<Call>,
    under_way: HashMap<Token, Removal>,
}

impl Connection {
    /// Closes an open (see [`Connection::release_here`]), removing its
    /// file, when its close is the last of one to be deleted, as `how`
    /// says.
    pub(crate) fn release(&mut self, session_id: u64, open: Open, how: RemoveBy) {
        match how {
            RemoveBy::Here => self.release_here(session_id, open),
            RemoveBy::Call => self.release_by_call(session_id, open),
        }
    }

    fn release_by_call(&mut self, session_id: u64, open: Open) {
        let mark = self.mark_removal(&open);
        let (closing, unlink) = self.let_go(session_id, open);
        let Some(unlink) = unlink else {
            self.released(closing, None);
            return;
        };
        let (vfs, op, name) = unlink.into_call();
        let token = self.next_token;
        self.next_token += 1;
        self.removals.calls.push(Call { token, vfs, op });
        let removal = Removal {
            closing,
            name,
            _mark: mark,
        };
        self.removals.under_way.insert(token, removal);
    }

    /// Finishes the closes whose removals did not come back before the
    /// connection ended: what waited on their opens is woken; watchers
    /// are not told of a removal that is not known to be made.
    pub(crate) fn settle_removals(&mut self) {
        for (_, r) in std::mem::take(&mut self.removals.under_way) {
            self.released(r.closing, None);
        }
    }

    /// The removal `token` was made (or failed: a folder no longer
    /// empty stays, as on Windows); false when no close waits for it.
    pub(crate) fn removed_by_call(
        &mut self,
        token: Token,
        result: &copyless_vfs::VfsResult<()>,
    ) -> bool {
        let Some(r) = self.removals.under_way.remove(&token) else {
            return false;
        };
        let removed = r.name.filter(|_| result.is_ok());
        self.released(r.closing, removed);
        true
    }
}
