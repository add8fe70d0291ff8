//! Requests whose replies wait for the engine. A READ, WRITE or FLUSH on a
//! file leaves as an [`Intent`], a filesystem call a handler cannot go on
//! without (an open that may create, a removal, a rename) as a [`Call`];
//! its compound stops there, with the replies made so far, until the
//! engine hands the result to [`Connection::complete`]. Then the reply is
//! finished (length, status, padding, signature), or the handler goes on
//! from the call's result as its [`Then`] says, and the rest of the
//! compound runs.

use std::mem;
use std::sync::Arc;
use std::time::Duration;

use copyless_proto::header::{Header, FLAG_ASYNC_COMMAND};
use copyless_proto::messages;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{Writer, HEADER_LEN};
use copyless_vfs::Vfs;

use crate::conn::channels::Via;
use crate::conn::connection::{Begun, Chain, Connection, Output, Req};
use crate::conn::pending::interim_response;
use crate::conn::post::ConnectionId;
use crate::env::Env;
use crate::file_table::FileKey;
use crate::handlers::{vfs_status, Then};
use crate::intent::{Call, CallOp, Completion, DataFile, Intent, Op, Token, WriteData};
use crate::local::OwnGuard;
use crate::open::OpenKind;

/// Bytes of a READ reply before its data: the header and the response's
/// fixed part (MS-SMB2 2.2.20, DataOffset 0x50).
const READ_HEAD: usize = HEADER_LEN + 16;

/// A request that has waited this long for its intent gets an interim
/// response (STATUS_PENDING with an AsyncId, MS-SMB2 3.3.4.2), so that
/// the client keeps waiting on a slow disk rather than timing out.
const INTERIM_AFTER: Duration = Duration::from_millis(500);

/// What a handler's reply waits for.
pub(crate) enum Wait {
    /// Data I/O on an open file.
    Data { file: DataFile, op: WaitOp },
    /// A filesystem call, whose result the handler goes on with as
    /// `then` says. `mark` holds what the call changes marked as the
    /// server's own change (local.rs) until its result is in.
    Call {
        vfs: Arc<dyn Vfs>,
        op: CallOp,
        then: Then,
        mark: Option<OwnGuard>,
    },
}

pub(crate) enum WaitOp {
    Read {
        offset: u64,
        len: u32,
        minimum: u32,
        volatile: u64,
    },
    Write {
        offset: u64,
        data: WriteData,
        sync: bool,
        volatile: u64,
    },
    Flush,
}

/// A compound stopped at a request whose reply waits for an intent.
pub(crate) struct Waiting {
    chain: Chain,
    begun: Begun,
    finish: Finish,
    /// The compound's messages after the waiting one.
    rest: Vec<u8>,
    /// Where the waiting reply starts in the compound's frame.
    start: usize,
    /// When it began to wait (FILETIME).
    since: u64,
    /// The client cancelled it; the engine was asked to stop its intent.
    cancelled: bool,
}

impl Waiting {
    /// Only a request alone in its frame gets an interim response here:
    /// one inside a compound waits with the replies before it.
    fn takes_interim(&self) -> bool {
        self.begun.hdr.flags & FLAG_ASYNC_COMMAND == 0 && self.start == 0 && self.rest.is_empty()
    }
}

/// What the completion must finish.
enum Finish {
    /// The reply starts at `start` in the intent's buffer; its data
    /// follows [`READ_HEAD`] bytes later.
    Read {
        start: usize,
        /// The replies before it, should the engine lose the buffer
        /// (a cancelled read): empty for a request of its own.
        prefix: Vec<u8>,
        len: u32,
        minimum: u32,
        offset: u64,
        volatile: u64,
    },
    Write {
        len: u32,
        offset: u64,
        volatile: u64,
    },
    Flush,
    /// The handler goes on with the call's result; the mark stays until
    /// then.
    Then(Then, Option<OwnGuard>),
    /// The request runs again from the start (see [`Hold`]).
    Retry {
        msg: Vec<u8>,
        key: FileKey,
        awaited: Awaited,
    },
}

/// A request that runs again from the start once what stood in its way is
/// gone: a CREATE waits so for other opens' oplocks to be broken
/// (oplock.rs). The handler has registered `token` with the file table's
/// waiters of file `key`, which wake it.
pub(crate) struct Hold {
    pub token: Token,
    pub key: FileKey,
    pub awaited: Awaited,
}

/// What a held request waits for, which says how long it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Awaited {
    /// Other opens' oplock or lease breaks: [`BREAK_TIMEOUT`], after
    /// which they are taken as acknowledged.
    Breaks,
    /// A durable open's connection to go, so that the open can be
    /// reclaimed: the server may not have seen yet that a client's old
    /// connection dropped. [`DEPARTURE_TIMEOUT`], after which the request
    /// runs again and finds what it finds.
    Departure,
    /// Another query of the same open, whose enumeration is with a call
    /// (handlers/dir.rs): as long as the call takes.
    Listing,
}

/// How long a reclaim waits for the open's old connection to go.
pub(crate) const DEPARTURE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request waits for an oplock break to be acknowledged before
/// the server takes it as given, as Windows does (35 s, MS-SMB2 3.3.2.1
/// Oplock Break Acknowledgment Timer).
pub(crate) const BREAK_TIMEOUT: Duration = Duration::from_secs(35);

impl Connection {
    /// Sends the wait's intent out and keeps the compound until its
    /// completion.
    pub(crate) fn suspend(
        &mut self,
        mut chain: Chain,
        begun: Begun,
        wait: Wait,
        rest: Vec<u8>,
        now: u64,
        out: &mut Output,
    ) {
        let token = self.next_token;
        self.next_token += 1;
        let start = self.link(&mut chain);
        let (file, op) = match wait {
            Wait::Data { file, op } => (file, op),
            Wait::Call {
                vfs,
                op,
                then,
                mark,
            } => {
                out.calls.push(Call { token, vfs, op });
                self.keep(
                    token,
                    chain,
                    begun,
                    Finish::Then(then, mark),
                    rest,
                    start,
                    now,
                );
                return;
            }
        };
        let (op, finish) = match op {
            WaitOp::Read {
                offset,
                len,
                minimum,
                volatile,
            } => {
                // The read appends its data behind the room for the
                // reply's head: the compound's frame is the buffer.
                let bare = start == 0
                    && rest.is_empty()
                    && chain.sealed.is_none()
                    && chain.via.is_none()
                    && self
                        .signer(&begun.hdr, &begun.reply, chain.compound.sign_sid)
                        .is_none();
                let prefix = chain.out.clone();
                chain.out.resize(start + READ_HEAD, 0);
                let buf = mem::take(&mut chain.out);
                (
                    Op::Read {
                        offset,
                        len: len as usize,
                        buf,
                        bare,
                    },
                    Finish::Read {
                        start,
                        prefix,
                        len,
                        minimum,
                        offset,
                        volatile,
                    },
                )
            }
            WaitOp::Write {
                offset,
                data,
                sync,
                volatile,
            } => {
                let len = data.len() as u32;
                (
                    Op::Write { offset, data, sync },
                    Finish::Write {
                        len,
                        offset,
                        volatile,
                    },
                )
            }
            WaitOp::Flush => (Op::Flush, Finish::Flush),
        };
        out.intents.push(Intent { token, file, op });
        self.keep(token, chain, begun, finish, rest, start, now);
    }

    #[allow(clippy::too_many_arguments)]
    fn keep(
        &mut self,
        token: Token,
        chain: Chain,
        begun: Begun,
        finish: Finish,
        rest: Vec<u8>,
        start: usize,
        now: u64,
    ) {
        self.waiting.insert(
            token,
            Waiting {
                chain,
                begun,
                finish,
                rest,
                start,
                since: now,
                cancelled: false,
            },
        );
    }

    /// When an interim response may become due: a request of its own (no
    /// replies before it in its frame, none after) waits without one.
    pub(crate) fn interim_due(&self) -> Option<Duration> {
        self.waiting
            .values()
            .any(|w| w.takes_interim())
            .then_some(INTERIM_AFTER)
    }

    /// Sends an interim response for each request that has waited long
    /// enough; its final response then carries the AsyncId and grants no
    /// credits (the interim one granted them).
    pub(crate) fn send_interim_responses(&mut self, env: &mut dyn Env, out: &mut Output) {
        let now = env.now();
        let after = INTERIM_AFTER.as_nanos() as u64 / 100;
        let due: Vec<Token> = self
            .waiting
            .iter()
            .filter(|(_, w)| {
                // A held request may wait the 35 s of a break: its
                // interim goes at once, as Windows sends it (smbtorture
                // smb2.lease.breaking6 expects it before the break's
                // acknowledgement is answered).
                let held = matches!(w.finish, Finish::Retry { .. });
                w.takes_interim() && (held || now.saturating_sub(w.since) >= after)
            })
            .map(|(t, _)| *t)
            .collect();
        for token in due {
            self.last_async_id += 1;
            let async_id = self.last_async_id;
            let Some(w) = self.waiting.get_mut(&token) else {
                continue;
            };
            let hdr = &mut w.begun.hdr;
            hdr.flags |= FLAG_ASYNC_COMMAND;
            hdr.async_id = async_id;
            let granted = mem::take(&mut w.begun.granted);
            let msg = interim_response(hdr, granted, w.begun.reply.header_session_id, async_id);
            // Not signed (MS-SMB2 3.3.4.2); sealed when the request was,
            // and sent where it came from.
            let mut interim = Chain::new(w.chain.sealed);
            interim.via = w.chain.via.as_ref().map(|v| Via::reply_to(v.to));
            interim.granted = mem::take(&mut w.chain.granted);
            interim.out = msg;
            self.finish_chain(interim, env, out);
        }
    }

    /// Keeps the compound stopped at a request that runs again when its
    /// hold's token is woken (or its break times out).
    pub(crate) fn hold(
        &mut self,
        mut chain: Chain,
        begun: Begun,
        msg: &[u8],
        rest: Vec<u8>,
        hold: Hold,
        now: u64,
    ) {
        let start = self.link(&mut chain);
        self.interim_now = true;
        let finish = Finish::Retry {
            msg: msg.to_vec(),
            key: hold.key,
            awaited: hold.awaited,
        };
        self.keep(hold.token, chain, begun, finish, rest, start, now);
    }

    /// A token for a request that is about to be held.
    pub(crate) fn next_hold_token(&mut self) -> Token {
        let token = self.next_token;
        self.next_token += 1;
        token
    }

    /// Runs held requests again: those woken since the last output, and
    /// those whose wait was cancelled (they end with STATUS_CANCELLED).
    pub(crate) fn run_retries(&mut self, env: &mut dyn Env, out: &mut Output) {
        loop {
            let (now, later): (Vec<Token>, Vec<Token>) = mem::take(&mut self.retries)
                .into_iter()
                .partition(|t| env.may_wait() || self.retries_in_place(*t));
            self.retries = later;
            if now.is_empty() {
                return;
            }
            for token in now {
                self.retry(token, env, out);
            }
        }
    }

    /// Whether the held request `token`, with the rest of its compound,
    /// runs again where nothing may wait, as [`Connection::may_block`]
    /// would let that frame run. Others wait for a tick where they may
    /// ([`Env::may_wait`]).
    fn retries_in_place(&self, token: Token) -> bool {
        match self.waiting.get(&token) {
            // The held message keeps its padding: the two are the
            // compound from it on, as it came.
            Some(Waiting {
                finish: Finish::Retry { msg, .. },
                rest,
                ..
            }) => !self.may_block(&[msg.as_slice(), rest].concat()),
            // No longer held: nothing runs.
            _ => true,
        }
    }

    fn retry(&mut self, token: Token, env: &mut dyn Env, out: &mut Output) {
        if !matches!(
            self.waiting.get(&token).map(|w| &w.finish),
            Some(Finish::Retry { .. })
        ) {
            return;
        }
        let Some(Waiting {
            mut chain,
            mut begun,
            finish: Finish::Retry { msg, .. },
            rest,
            cancelled,
            ..
        }) = self.waiting.remove(&token)
        else {
            return;
        };
        let mut w = Writer::with_capacity(HEADER_LEN + 128);
        w.zeros(HEADER_LEN);
        let result = if cancelled {
            Err(status::CANCELLED)
        } else {
            let req = Req::kept(&msg, &begun, &chain);
            self.retrying = true;
            let result = self.run(&req, &mut begun.reply, &mut chain.compound, &mut w, env);
            self.retrying = false;
            if let (Ok(_), Some(hold)) = (&result, begun.reply.hold.take()) {
                self.hold(chain, begun, &msg, rest, hold, env.now());
                return;
            }
            if let (Ok(_), Some(wait)) = (&result, begun.reply.wait.take()) {
                self.suspend(chain, begun, wait, rest, env.now(), out);
                return;
            }
            result
        };
        let bytes = self.finish_one(&mut begun, result, w, &mut chain);
        out.requests
            .push(self.request_trace(&begun.hdr, Some((&bytes, &begun.reply))));
        let start = chain.out.len();
        chain.out.extend_from_slice(&bytes);
        chain.prev = Some((start, begun.reply.signer()));
        if begun.reply.disconnect || rest.is_empty() {
            chain.disconnect |= begun.reply.disconnect;
            self.finish_chain(chain, env, out);
        } else {
            self.drive(chain, &rest, None, env, out);
        }
    }

    /// Whether an open is registered in the file table but its CREATE
    /// not yet answered: the CREATE waits for the truncation of what it
    /// opened, or for the watch of the folder it leased. Break notices
    /// wait meanwhile, so that one for the new open (or its lease)
    /// follows the CREATE's reply rather than being lost or coming first.
    pub(crate) fn making_opens(&self) -> bool {
        use crate::handlers::Then;
        self.waiting.values().any(|w| {
            matches!(
                w.finish,
                Finish::Then(Then::Overwrite { .. } | Then::Reply { .. }, _)
            )
        })
    }

    /// The query held longest while another query of its folder was with
    /// a call (of folder `key`; of any, when not known) runs again: one
    /// at a time, so that a client that sends many queries of one open
    /// at once makes each run again once, not once for every other.
    pub(crate) fn wake_held_query(&mut self, key: Option<FileKey>) {
        let oldest = self
            .waiting
            .iter()
            .filter(|(_, w)| match &w.finish {
                Finish::Retry {
                    awaited: Awaited::Listing,
                    key: k,
                    ..
                } => key.is_none_or(|key| *k == key),
                _ => false,
            })
            .map(|(token, _)| *token)
            .min();
        self.retries.extend(oldest);
    }

    /// Held requests whose oplock breaks were not acknowledged in time:
    /// the breaks are taken as done, and whoever waited on them runs
    /// again. A reclaim that waited long enough for a departure runs
    /// again too.
    pub(crate) fn expire_holds(&mut self, now: u64) {
        let ticks = |d: Duration| d.as_nanos() as u64 / 100;
        let mut departed = Vec::new();
        let mut expired = Vec::new();
        for (token, w) in &self.waiting {
            let waited = now.saturating_sub(w.since);
            match &w.finish {
                Finish::Retry {
                    key,
                    awaited: Awaited::Breaks,
                    ..
                } if waited >= ticks(BREAK_TIMEOUT) => expired.push(*key),
                Finish::Retry {
                    key,
                    awaited: Awaited::Departure,
                    ..
                } if waited >= ticks(DEPARTURE_TIMEOUT) => departed.push((*token, *key)),
                _ => {}
            }
        }
        for key in expired {
            let wake = self.server.files().end_breaks(&key);
            self.wake_held(wake);
        }
        let id = self.id();
        for (token, key) in departed {
            self.server.files().forget_break_waiter(&key, id, token);
            self.retries.push(token);
        }
    }

    /// CANCEL (MS-SMB2 3.3.5.16): finds the waiting request by AsyncId, or
    /// by MessageId when it has had no interim response, and asks the
    /// engine to stop its intent. A request the engine cannot stop ends as
    /// it would have. A pending request (pending.rs) ends at once.
    pub(crate) fn cancel(&mut self, hdr: &Header, via: Option<ConnectionId>) {
        let by_async = hdr.flags & FLAG_ASYNC_COMMAND != 0;
        if self.cancel_pending(hdr, via) {
            return;
        }
        // A CANCEL without an AsyncId names its request by MessageId,
        // whether or not an interim response has gone out meanwhile
        // (MS-SMB2 3.3.5.16 searches every request of the connection).
        let found = self.waiting.iter_mut().find(|(_, w)| {
            let h = &w.begun.hdr;
            if w.chain.via.as_ref().map(|v| v.to) != via {
                false
            } else if by_async {
                hdr.async_id != 0 && h.async_id == hdr.async_id
            } else {
                h.message_id == hdr.message_id
            }
        });
        let Some((token, w)) = found.filter(|(_, w)| !w.cancelled) else {
            return;
        };
        w.cancelled = true;
        let token = *token;
        match &w.finish {
            // A held request ends now; it leaves the file's waiters.
            Finish::Retry { key, .. } => {
                let key = *key;
                let id = self.id();
                self.server.files().forget_break_waiter(&key, id, token);
                self.retries.push(token);
            }
            _ => self.cancelled.push(token),
        }
    }

    /// The engine performed the intent `token`: its reply is finished, and
    /// the rest of its compound runs. An unknown token is ignored.
    pub fn complete(&mut self, token: Token, done: Completion, env: &mut dyn Env) -> Output {
        let mut out = Output::default();
        if let Completion::Sighted(visible) = &done {
            if self.sighted(token, visible) {
                self.collect(&mut out, env);
            }
            return out;
        }
        if let Completion::Unlinked(result) = &done {
            if self.removed_by_call(token, result) {
                self.collect(&mut out, env);
                return out;
            }
        }
        let Some(Waiting {
            mut chain,
            mut begun,
            finish,
            rest,
            cancelled,
            ..
        }) = self.waiting.remove(&token)
        else {
            return out;
        };
        let sid = begun.reply.session_id;
        let mut w = Writer::with_capacity(READ_HEAD);
        w.zeros(HEADER_LEN);
        let mut in_place = None;
        let mut aside = false;
        let mut aside_len = None;
        let result: Result<NtStatus, NtStatus> = match (finish, done) {
            (
                Finish::Read {
                    start,
                    prefix,
                    len,
                    minimum,
                    offset,
                    volatile,
                },
                done @ (Completion::Read(..) | Completion::ReadAside(..)),
            ) => {
                let read = match done {
                    Completion::Read(buf, r) => {
                        let lost = buf.len() < start + READ_HEAD;
                        chain.out = if lost { prefix } else { buf };
                        let n = chain.out.len().saturating_sub(start + READ_HEAD);
                        match r {
                            Err(e) => Err(vfs_status(&e)),
                            Ok(()) if lost => Err(status::INTERNAL_ERROR),
                            Ok(()) => Ok(n),
                        }
                    }
                    // Only a bare read goes aside: its reply opens its
                    // frame, and the buffer holds the room for its head.
                    Completion::ReadAside(buf, r) if start == 0 && buf.len() == READ_HEAD => {
                        chain.out = buf;
                        aside = true;
                        r.map_err(|e| vfs_status(&e))
                    }
                    _ => {
                        out.disconnect = true;
                        return out;
                    }
                };
                let read = read.and_then(|n| {
                    if (n == 0 && len > 0) || n < minimum as usize {
                        Err(status::END_OF_FILE)
                    } else {
                        Ok(n)
                    }
                });
                match read {
                    Ok(n) => {
                        self.set_position(sid, volatile, offset + n as u64);
                        messages::write_read_response_head(&mut w, n as u32);
                        in_place = Some(start);
                        aside_len = aside.then_some(n);
                        Ok(status::SUCCESS)
                    }
                    Err(s) => {
                        chain.out.truncate(start);
                        Err(s)
                    }
                }
            }
            (
                Finish::Write {
                    len,
                    offset,
                    volatile,
                },
                Completion::Write(r),
            ) => r.map_err(|e| vfs_status(&e)).map(|()| {
                self.set_position(sid, volatile, offset + u64::from(len));
                messages::write_write_response(&mut w, len);
                status::SUCCESS
            }),
            (Finish::Flush, Completion::Flush(r)) => r.map_err(|e| vfs_status(&e)).map(|()| {
                w.u16(4).u16(0);
                status::SUCCESS
            }),
            // A CHANGE_NOTIFY cancelled while its watch was set up ends
            // now, as one cancelled while pending would; the watch stays.
            (Finish::Then(crate::handlers::Then::Notify { .. }, _), Completion::Watched)
                if cancelled =>
            {
                Err(status::CANCELLED)
            }
            (Finish::Then(then, mark), done) => {
                let msg = then.request().map(<[u8]>::to_vec);
                let result = self.resume(then, done, &mut begun, &mut chain, &mut w, env);
                drop(mark);
                if let (Ok(_), Some(wait)) = (&result, begun.reply.wait.take()) {
                    // One more call before the reply.
                    self.suspend(chain, begun, wait, rest, env.now(), &mut out);
                    self.collect(&mut out, env);
                    return out;
                }
                if let (Ok(_), Some(hold), Some(msg)) = (&result, begun.reply.hold.take(), msg) {
                    // Other opens' oplocks are in the way, as they may be
                    // when a request runs again.
                    self.hold(chain, begun, &msg, rest, hold, env.now());
                    self.collect(&mut out, env);
                    return out;
                }
                if let (Ok(_), Some((async_id, what))) = (&result, begun.reply.pend.take()) {
                    // It waits for what it awaits (a CHANGE_NOTIFY for a
                    // change): the interim reply goes out in its place.
                    let via = chain.via.as_ref().map(|v| v.to);
                    let interim = self.park(begun, async_id, what, chain.sealed, via);
                    chain.prev = Some((chain.out.len(), None));
                    chain.out.extend_from_slice(&interim);
                    if rest.is_empty() {
                        self.finish_chain(chain, env, &mut out);
                    } else {
                        self.drive(chain, &rest, None, env, &mut out);
                    }
                    self.collect(&mut out, env);
                    return out;
                }
                result
            }
            // A completion of another kind than its intent: an engine
            // bug; the reply cannot be made.
            _ => {
                out.disconnect = true;
                return out;
            }
        };
        let bytes = self.finish_one(&mut begun, result, w, &mut chain);
        if aside_len.is_some() && begun.reply.sign_sid.is_some() {
            // The data is not here to sign: an engine that moved aside a
            // read not sent bare.
            out.disconnect = true;
            return out;
        }
        out.requests
            .push(self.request_trace(&begun.hdr, Some((&bytes, &begun.reply))));
        let start = match in_place {
            Some(start) => {
                chain.out[start..start + READ_HEAD].copy_from_slice(&bytes);
                start
            }
            None => {
                let start = chain.out.len();
                chain.out.extend_from_slice(&bytes);
                start
            }
        };
        chain.prev = Some((start, begun.reply.signer()));
        if begun.reply.disconnect || rest.is_empty() {
            chain.disconnect |= begun.reply.disconnect;
            self.finish_chain(chain, env, &mut out);
            out.aside = aside_len;
        } else {
            self.drive(chain, &rest, None, env, &mut out);
        }
        self.collect(&mut out, env);
        out
    }

    /// Carries out the intents and calls of `out`, and those their
    /// completions lead to, one after another with [`Intent::perform`]
    /// and [`Call::perform`]; `frame` is the frame `out` came from.
    /// Returns everything left to send.
    pub fn perform_intents(&mut self, mut out: Output, frame: &[u8], env: &mut dyn Env) -> Output {
        loop {
            let (token, done) = if let Some(intent) = out.intents.pop() {
                intent.perform(frame)
            } else if let Some(call) = out.calls.pop() {
                call.perform()
            } else {
                return out;
            };
            let more = self.complete(token, done, env);
            out.append(more);
        }
    }

    /// Settles, as the connection ends, the requests whose calls were
    /// made but never completed here (an engine that stops delivering
    /// completions once it closes the connection): a close whose file was
    /// to be removed still wakes whoever waited for the open to go. The
    /// removal goes unreported, since whether it happened is not known.
    pub(crate) fn settle_waiting(&mut self) {
        for (_, w) in mem::take(&mut self.waiting) {
            if let Finish::Then(then, _) = w.finish {
                self.abandon(then);
            }
        }
    }

    /// FilePositionInformation follows the last read or write, when the
    /// open is still there.
    fn set_position(&mut self, session_id: u64, volatile: u64, position: u64) {
        let open = self
            .sessions
            .get_mut(&session_id)
            .and_then(|s| s.opens.get_mut(&volatile));
        if let Some(OpenKind::File(f)) = open.map(|o| &mut o.kind) {
            f.position = position;
        }
    }
}
