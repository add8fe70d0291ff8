//! Oplock breaks between connections: the notification that reaches the
//! holder of an oplock (on its own connection, by a letter from another),
//! its acknowledgement (OPLOCK_BREAK, MS-SMB2 3.3.5.22.1), and the held
//! requests it wakes. The rules of granting and breaking are oplocks.rs'.

use copyless_proto::header::{Header, FLAG_SERVER_TO_REDIR};
use copyless_proto::messages::{self, FileId, OplockBreakAck, OPLOCK_LEVEL_LEASE};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{command as cmd, Writer, HEADER_LEN};

use crate::connection::{Compound, Connection, Output, Req};
use crate::env::Env;
use crate::intent::Token;
use crate::open::OpenKind;
use crate::oplocks::Break;
use crate::post::{ConnectionId, Kind, Letter, Message};

/// A break notification this connection is to send: the open (its
/// volatile file id) and the level offered.
pub(crate) struct Notice {
    pub open: u64,
    pub to: u8,
}

impl Connection {
    /// Tells each holder of a broken oplock: this connection's own at the
    /// next output, others' by a letter.
    pub(crate) fn send_breaks(&mut self, breaks: Vec<Break>) {
        for b in breaks {
            if b.holder == self.id() {
                self.notices.push(Notice {
                    open: b.open,
                    to: b.to,
                });
            } else {
                self.outbox.push(Message {
                    to: b.holder,
                    letter: Letter(Kind::OplockBreak {
                        open: b.open,
                        to: b.to,
                    }),
                });
            }
        }
    }

    /// Wakes held requests: this connection's at the next output, others'
    /// by a letter.
    pub(crate) fn wake_held(&mut self, held: Vec<(ConnectionId, Token)>) {
        for (connection, token) in held {
            if connection == self.id() {
                self.retries.push(token);
            } else {
                self.outbox.push(Message {
                    to: connection,
                    letter: Letter(Kind::BreakResolved { token }),
                });
            }
        }
    }

    /// Builds the break notifications decided since the last output
    /// (MS-SMB2 3.3.4.6): MessageId all ones, the open's session, not
    /// signed, sealed when the session encrypts. One for an open already
    /// closed is dropped.
    pub(crate) fn send_notices(&mut self, env: &mut dyn Env, out: &mut Output) {
        for n in std::mem::take(&mut self.notices) {
            let Some(session) = self
                .sessions
                .values_mut()
                .find(|s| s.opens.contains_key(&n.open))
            else {
                continue;
            };
            let file_id = session.opens[&n.open].file_id;
            let header = Header {
                command: cmd::OPLOCK_BREAK,
                flags: FLAG_SERVER_TO_REDIR,
                message_id: u64::MAX,
                session_id: session.id,
                ..Header::default()
            };
            let mut msg = Vec::with_capacity(HEADER_LEN + 24);
            header.write(&mut msg);
            let mut w = Writer::new();
            messages::write_oplock_break(&mut w, n.to, file_id);
            msg.extend_from_slice(&w.buf);
            let frame = match session.ciphers.as_mut().filter(|_| session.encrypt_data) {
                Some(c) => {
                    let mut salt = [0u8; 8];
                    env.fill_random(&mut salt);
                    c.seal(session.id, &msg, salt)
                }
                None => msg,
            };
            out.frames.push(frame);
        }
    }

    /// OPLOCK_BREAK from the client: the acknowledgement of a break
    /// (MS-SMB2 3.3.5.22.1). The oplock takes the level acknowledged, and
    /// the opens that waited for it run again.
    pub(crate) fn oplock_break(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let ack = OplockBreakAck::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let server = self.server.clone();
        let open = self.open_mut(req, compound, ack.file_id)?;
        let file_id: FileId = open.file_id;
        let OpenKind::File(f) = &open.kind else {
            return Err(status::INVALID_OPLOCK_PROTOCOL);
        };
        let key = f.key;
        if ack.oplock_level == OPLOCK_LEVEL_LEASE {
            return Err(status::INVALID_PARAMETER);
        }
        let (level, wake) =
            server
                .files()
                .acknowledge_break(&key, file_id.volatile, ack.oplock_level)?;
        self.wake_held(wake);
        messages::write_oplock_break(w, level, file_id);
        Ok(status::SUCCESS)
    }
}
