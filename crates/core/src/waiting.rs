//! Requests whose replies wait for data I/O. A READ, WRITE or FLUSH on a
//! file leaves as an [`Intent`]; its compound stops there, with the replies
//! made so far, until the engine hands the result to
//! [`Connection::complete`]. Then the reply is finished (length, status,
//! padding, signature) and the rest of the compound runs.

use std::mem;

use copyless_proto::messages;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{Writer, HEADER_LEN};

use crate::connection::{Begun, Chain, Connection, Output};
use crate::env::Env;
use crate::handlers::vfs_status;
use crate::intent::{Completion, DataFile, Intent, Op, Token, WriteData};
use crate::open::OpenKind;

/// Bytes of a READ reply before its data: the header and the response's
/// fixed part (MS-SMB2 2.2.20, DataOffset 0x50).
const READ_HEAD: usize = HEADER_LEN + 16;

/// The data I/O a handler's reply waits for.
pub(crate) struct Wait {
    pub file: DataFile,
    pub op: WaitOp,
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
}

/// What the completion must finish.
enum Finish {
    /// The reply starts at `start` in the intent's buffer; its data
    /// follows [`READ_HEAD`] bytes later.
    Read {
        start: usize,
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
}

impl Connection {
    /// Sends the wait's intent out and keeps the compound until its
    /// completion.
    pub(crate) fn suspend(
        &mut self,
        mut chain: Chain,
        begun: Begun,
        wait: Wait,
        rest: Vec<u8>,
        out: &mut Output,
    ) {
        let token = self.next_token;
        self.next_token += 1;
        let start = self.link(&mut chain);
        let (op, finish) = match wait.op {
            WaitOp::Read {
                offset,
                len,
                minimum,
                volatile,
            } => {
                // The read appends its data behind the room for the
                // reply's head: the compound's frame is the buffer.
                chain.out.resize(start + READ_HEAD, 0);
                let buf = mem::take(&mut chain.out);
                (
                    Op::Read {
                        offset,
                        len: len as usize,
                        buf,
                    },
                    Finish::Read {
                        start,
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
        out.intents.push(Intent {
            token,
            file: wait.file,
            op,
        });
        self.waiting.insert(
            token,
            Waiting {
                chain,
                begun,
                finish,
                rest,
            },
        );
    }

    /// The engine performed the intent `token`: its reply is finished, and
    /// the rest of its compound runs. An unknown token is ignored.
    pub fn complete(&mut self, token: Token, done: Completion, env: &mut dyn Env) -> Output {
        let mut out = Output::default();
        let Some(Waiting {
            mut chain,
            mut begun,
            finish,
            rest,
        }) = self.waiting.remove(&token)
        else {
            return out;
        };
        let sid = begun.reply.session_id;
        let mut w = Writer::with_capacity(READ_HEAD);
        w.zeros(HEADER_LEN);
        let mut in_place = None;
        let result: Result<NtStatus, NtStatus> = match (finish, done) {
            (
                Finish::Read {
                    start,
                    len,
                    minimum,
                    offset,
                    volatile,
                },
                Completion::Read(buf, r),
            ) => {
                chain.out = buf;
                let n = chain.out.len().saturating_sub(start + READ_HEAD);
                let result = match r {
                    Err(e) => Err(vfs_status(&e)),
                    Ok(()) if (n == 0 && len > 0) || n < minimum as usize => {
                        Err(status::END_OF_FILE)
                    }
                    Ok(()) => Ok(status::SUCCESS),
                };
                if result.is_ok() {
                    self.set_position(sid, volatile, offset + n as u64);
                    messages::write_read_response_head(&mut w, n as u32);
                    in_place = Some(start);
                } else {
                    chain.out.truncate(start);
                }
                result
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
            // A completion of another kind than its intent: an engine
            // bug; the reply cannot be made.
            _ => {
                out.disconnect = true;
                return out;
            }
        };
        let bytes = self.finish_one(&mut begun, result, w, &mut chain);
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
        chain.prev = Some((start, begun.reply.sign_sid));
        if begun.reply.disconnect || rest.is_empty() {
            chain.disconnect |= begun.reply.disconnect;
            self.finish_chain(chain, env, &mut out);
        } else {
            self.drive(chain, &rest, None, env, &mut out);
        }
        out
    }

    /// Carries out the intents of `out`, and those their completions lead
    /// to, one after another with [`Intent::perform`]; `frame` is the
    /// frame `out` came from. Returns everything left to send.
    pub fn perform_intents(&mut self, mut out: Output, frame: &[u8], env: &mut dyn Env) -> Output {
        while let Some(intent) = out.intents.pop() {
            let (token, done) = intent.perform(frame);
            let more = self.complete(token, done, env);
            out.append(more);
        }
        out
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
