//! Requests answered later: a request that must wait for something another
//! request does (a byte-range lock in its way to go) gets an interim
//! response at once (STATUS_PENDING with an AsyncId, MS-SMB2 3.3.4.2) and
//! is kept here until it can be answered, is cancelled, or its open
//! closes. Its final response then goes out with whatever output comes
//! next: that of the request, letter or timer that ended the wait.
//!
//! Unlike [`crate::conn::waiting`], nothing here waits for the engine: what ends
//! a wait is another request, on this connection or (by a letter) on
//! another.

use std::mem;

use copyless_proto::header::{Header, FLAG_ASYNC_COMMAND, FLAG_SERVER_TO_REDIR};
use copyless_proto::messages;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{Writer, HEADER_LEN};

use crate::audit::AuditKind;
use crate::conn::channels::Via;
use crate::conn::connection::{Begun, Chain, Connection, Output};
use crate::conn::post::{ConnectionId, Kind};
use crate::conn::removals::RemoveBy;
use crate::env::Env;
use crate::file_table::{Closed, FileKey, LockWaiter, Locked};
use crate::leases::LeaseId;
use crate::local::OwnGuard;
use crate::locks::ByteLock;
use crate::open::{current_path, let_go, Open, Unlink};
use copyless_fscc::notify::{action, filter};

/// Requests one connection may have pending at once. Windows may fail
/// what would go asynchronous when resources are short (MS-SMB2
/// 3.3.4.2); past this, copyless does, so that no client holds more of
/// the server's memory and wake-ups than this.
pub(crate) const MAX_PENDING: usize = 512;

/// What a pending request waits for.
pub(crate) enum Awaits {
    /// LOCK: the locks of one open, until the locks in their way go.
    Lock {
        key: FileKey,
        open: u64,
        locks: Vec<ByteLock>,
    },
    /// CHANGE_NOTIFY: a change in the open's directory, to be reported in
    /// at most `room` bytes.
    Notify { open: u64, room: u32 },
}

/// A request that has had its interim response.
pub(crate) struct Pending {
    /// Its header carries the AsyncId; it grants no credits (the interim
    /// response did).
    begun: Begun,
    /// The request came sealed with this session's key.
    sealed: Option<u64>,
    /// It came relayed by this bound channel (channels.rs).
    via: Option<ConnectionId>,
    what: Awaits,
}

impl Pending {
    fn session_id(&self) -> u64 {
        self.begun.reply.session_id
    }

    /// The open it waits on, by volatile file id.
    fn open(&self) -> u64 {
        match &self.what {
            Awaits::Lock { open, .. } | Awaits::Notify { open, .. } => *open,
        }
    }
}

/// An open released up to the removal of its file (see
/// [`Connection::let_go`]).
pub(crate) struct Closing {
    session_id: u64,
    volatile: u64,
    share: Option<usize>,
    written: Option<String>,
    parent_lease: Option<LeaseId>,
    closed: Closed,
}

/// A final response decided, to be sent with the next output.
pub(crate) struct Answer {
    pending: Pending,
    result: Result<NtStatus, NtStatus>,
    /// The response's body behind room for its header.
    body: Writer,
}

/// The interim response to `hdr` (MS-SMB2 3.3.4.2): not signed; it grants
/// the request's credits.
pub(crate) fn interim_response(
    hdr: &Header,
    credits: u16,
    session_id: u64,
    async_id: u64,
) -> Vec<u8> {
    let interim = Header {
        credit_charge: hdr.credit_charge,
        status: status::PENDING,
        command: hdr.command,
        credits,
        flags: FLAG_SERVER_TO_REDIR | FLAG_ASYNC_COMMAND,
        next_command: 0,
        message_id: hdr.message_id,
        async_id,
        process_id: hdr.process_id,
        tree_id: 0,
        session_id,
        signature: [0; 16],
    };
    let mut msg = Vec::with_capacity(HEADER_LEN + 9);
    interim.write(&mut msg);
    let mut body = Writer::new();
    messages::write_error_response(&mut body, &[]);
    msg.extend_from_slice(&body.buf);
    msg
}

/// A body of no more than the header's room and the fixed part of an
/// empty response (LOCK's).
fn empty_body() -> Writer {
    let mut w = Writer::with_capacity(HEADER_LEN + 4);
    w.zeros(HEADER_LEN);
    messages::write_empty_response(&mut w);
    w
}

impl Connection {
    /// A new AsyncId: unique on the connection, never zero.
    pub(crate) fn next_async_id(&mut self) -> u64 {
        self.last_async_id += 1;
        self.last_async_id
    }

    /// Whether another request may go pending.
    pub(crate) fn may_pend(&self) -> bool {
        self.pending.len() < MAX_PENDING
    }

    /// Keeps the request `begun` under `async_id` until it is answered;
    /// returns its interim response.
    pub(crate) fn park(
        &mut self,
        mut begun: Begun,
        async_id: u64,
        what: Awaits,
        sealed: Option<u64>,
        via: Option<ConnectionId>,
    ) -> Vec<u8> {
        let interim = interim_response(
            &begun.hdr,
            begun.granted,
            begun.reply.header_session_id,
            async_id,
        );
        begun.hdr.flags |= FLAG_ASYNC_COMMAND;
        begun.hdr.async_id = async_id;
        begun.granted = 0;
        self.pending.insert(
            async_id,
            Pending {
                begun,
                sealed,
                via,
                what,
            },
        );
        interim
    }

    /// Ends the wait of request `async_id`; its final response goes out
    /// with the next output. Unknown ids (answered already) are ignored.
    pub(crate) fn answer(
        &mut self,
        async_id: u64,
        result: Result<NtStatus, NtStatus>,
        body: Writer,
    ) {
        if let Some(pending) = self.pending.remove(&async_id) {
            self.answers.push(Answer {
                pending,
                result,
                body,
            });
        }
    }

    /// Builds the final responses decided since the last output, each a
    /// frame of its own. One for a session that has gone altogether is
    /// dropped: nobody is left to read it.
    pub(crate) fn send_answers(&mut self, env: &mut dyn Env, out: &mut Output) {
        for a in mem::take(&mut self.answers) {
            let Pending {
                mut begun,
                sealed,
                via,
                ..
            } = a.pending;
            if !self.sessions.contains_key(&begun.reply.session_id) {
                continue;
            }
            if sealed.is_some_and(|sid| !self.sessions.contains_key(&sid)) {
                continue;
            }
            let mut chain = Chain::new(sealed);
            chain.via = via.map(Via::reply_to);
            let bytes = self.finish_one(&mut begun, a.result, a.body, &mut chain);
            out.requests
                .push(self.request_trace(&begun.hdr, Some((&bytes, &begun.reply))));
            chain.out = bytes;
            chain.prev = Some((0, begun.reply.signer()));
            chain.handled = 1;
            self.finish_chain(chain, env, out);
        }
    }

    /// CANCEL of a pending request (MS-SMB2 3.3.5.16), named by its
    /// AsyncId or, without one, by its MessageId and session: it ends with
    /// STATUS_CANCELLED. False when no such request is pending.
    pub(crate) fn cancel_pending(&mut self, hdr: &Header, via: Option<ConnectionId>) -> bool {
        let found = if hdr.flags & FLAG_ASYNC_COMMAND != 0 {
            self.pending
                .get_key_value(&hdr.async_id)
                .filter(|(_, p)| p.via == via)
        } else {
            self.pending.iter().find(|(_, p)| {
                p.begun.hdr.message_id == hdr.message_id
                    && p.begun.reply.session_id == hdr.session_id
                    && p.via == via
            })
        };
        let Some((&async_id, p)) = found else {
            return false;
        };
        match &p.what {
            Awaits::Lock { key, .. } => {
                let key = *key;
                self.server.files().forget_waiter(&key, self.id(), async_id);
            }
            Awaits::Notify { .. } => {}
        }
        self.answer(async_id, Err(status::CANCELLED), empty_body());
        true
    }

    /// Closes an open: what waited on it ends (a lock request with
    /// RANGE_NOT_LOCKED, a change notification with NOTIFY_CLEANUP, as
    /// on Windows), and lock requests its locks stood in the way of are
    /// tried again. The file its close removes is removed at once.
    pub(crate) fn release_here(&mut self, session_id: u64, open: Open) {
        let _own = self.mark_removal(&open);
        let (closing, unlink) = self.let_go(session_id, open);
        let removed = unlink.and_then(Unlink::remove_now);
        self.released(closing, removed);
    }

    /// Marks the path of `open`'s file as the server's own change
    /// (local.rs), from before the open leaves the table until the
    /// guard goes: the file its close may remove.
    pub(crate) fn mark_removal(&self, open: &Open) -> OwnGuard {
        let own = self.server.own_changes();
        let file = open.file().filter(|_| own.is_active());
        let path = file.and_then(|f| current_path(&self.server, &f.key));
        own.begin(file.map_or(0, |f| f.key.0), path.as_deref().as_slice())
    }

    /// Releases an open as [`Connection::release`] does, up to the removal
    /// of its file that its close may make, which is left to the caller,
    /// who then hands the outcome to [`Connection::released`].
    pub(crate) fn let_go(&mut self, session_id: u64, open: Open) -> (Closing, Option<Unlink>) {
        let volatile = open.file_id.volatile;
        let share = open.file().map(|f| f.key.0);
        // A file written through this open is reported modified as it
        // closes, once however many writes it took (MS-FSA 2.1.5.4), to
        // watchers and to the share's audit trail.
        let told = self.server.has_watchers() || self.server.has_oplocks();
        let written = open
            .file()
            .filter(|f| f.written && (told || f.audit.contains(AuditKind::Write)))
            .and_then(|f| current_path(&self.server, &f.key));
        let parent_lease = open
            .file()
            .and_then(|f| self.parent_lease_of(&f.key, volatile));
        let (closed, unlink) = let_go(&self.server, open);
        let closing = Closing {
            session_id,
            volatile,
            share,
            written,
            parent_lease,
            closed,
        };
        (closing, unlink)
    }

    /// Finishes a release once the file its close removes (`removed`:
    /// its path, and whether a directory) is gone.
    pub(crate) fn released(&mut self, closing: Closing, removed: Option<(String, bool)>) {
        let Closing {
            session_id,
            volatile,
            share,
            written,
            parent_lease,
            closed,
        } = closing;
        if let (Some(share), Some(path)) = (share, &written) {
            if removed.is_none() {
                let class = filter::LAST_WRITE | filter::SIZE;
                self.report_change(share, path, action::MODIFIED, class);
                self.break_parent_leases(share, path, parent_lease);
                self.audit_done(session_id, share, AuditKind::Write, path);
            }
        }
        if let (Some(share), Some((path, is_dir))) = (share, &removed) {
            self.report_name(share, path, action::REMOVED, *is_dir);
            self.break_parent_leases(share, path, parent_lease);
            self.audit_done(session_id, share, AuditKind::Delete, path);
        }
        self.seen.extend(closed.doomed);
        self.end_pending_of(session_id, volatile);
        self.wake(closed.wake);
        self.wake_held(closed.wake_held);
    }

    /// Ends the requests waiting on an open that closes or leaves with
    /// its session: a notify with NOTIFY_CLEANUP, a lock as never granted.
    pub(crate) fn end_pending_of(&mut self, session_id: u64, open: u64) {
        let ended: Vec<(u64, bool)> = self
            .pending
            .iter()
            .filter(|(_, p)| p.session_id() == session_id && p.open() == open)
            .map(|(id, p)| (*id, matches!(p.what, Awaits::Notify { .. })))
            .collect();
        for (async_id, notify) in ended {
            if notify {
                let body = crate::notify::response_body(&[]);
                self.answer(async_id, Ok(status::NOTIFY_CLEANUP), body);
            } else {
                self.answer(async_id, Err(status::RANGE_NOT_LOCKED), empty_body());
            }
        }
    }

    /// Forgets the requests a bound channel that went relayed here: nobody
    /// is left to answer.
    pub(crate) fn forget_relayed_from(&mut self, channel: ConnectionId) {
        let gone: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.via == Some(channel))
            .map(|(id, _)| *id)
            .collect();
        for async_id in gone {
            if let Some(Pending {
                what: Awaits::Lock { key, .. },
                ..
            }) = self.pending.remove(&async_id)
            {
                self.server.files().forget_waiter(&key, self.id(), async_id);
            }
        }
    }

    /// Closes every open of a session, or of one of its trees.
    pub(crate) fn release_all(&mut self, session_id: u64, opens: Vec<Open>, how: RemoveBy) {
        for open in opens {
            self.release(session_id, open, how);
        }
    }

    /// Tries again each lock request that waited for locks that went:
    /// this connection's now, others' by a letter.
    pub(crate) fn wake(&mut self, waiters: Vec<LockWaiter>) {
        for w in waiters {
            let async_id = w.async_id;
            self.post(w.connection, Kind::LocksReleased { async_id });
        }
    }

    /// The oldest CHANGE_NOTIFY waiting on open `open`, and its room.
    pub(crate) fn pending_notify(&self, open: u64) -> Option<(u64, u32)> {
        self.pending
            .iter()
            .filter_map(|(id, p)| match p.what {
                Awaits::Notify { open: o, room } if o == open => Some((*id, room)),
                _ => None,
            })
            .min()
    }

    /// Takes the locks request `async_id` waits for, if they can be had
    /// now; otherwise it waits on.
    pub(crate) fn retry_lock(&mut self, async_id: u64) {
        let Some(Awaits::Lock { key, open, locks }) = self.pending.get(&async_id).map(|p| &p.what)
        else {
            return;
        };
        let waiter = LockWaiter {
            connection: self.id(),
            async_id,
            open: *open,
        };
        let result = self.server.files().lock(key, locks, Some(waiter));
        match result {
            Ok(Locked::Waiting) => {}
            Ok(Locked::Granted) => self.answer(async_id, Ok(status::SUCCESS), empty_body()),
            Err(e) => self.answer(async_id, Err(e), empty_body()),
        }
    }
}
