//! Oplock breaks between connections: the notification that reaches the
//! holder of an oplock (on its own connection, by a letter from another),
//! its acknowledgement (OPLOCK_BREAK, MS-SMB2 3.3.5.22.1), and the held
//! requests it wakes. The rules of granting and breaking are oplocks.rs'.

use copyless_proto::header::{Header, FLAG_SERVER_TO_REDIR};
use copyless_proto::lease::{self, LeaseBreakAck};
use copyless_proto::messages::{self, FileId, OplockBreakAck, OPLOCK_LEVEL_LEASE};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{command as cmd, Writer, HEADER_LEN};

use crate::conn::connection::{Compound, Connection, Output, Reply, Req};
use crate::conn::post::{ConnectionId, Kind};
use crate::conn::waiting::{Awaited, Hold};
use crate::env::Env;
use crate::file_table::FileKey;
use crate::intent::Token;
use crate::leases::{LeaseBreak, LeaseId};
use crate::open::FileOpen;
use crate::open::OpenKind;
use crate::oplocks::Break;
use crate::server::Server;

/// A break notification this connection is to send.
pub(crate) enum Notice {
    /// An oplock's: the open (its volatile file id) and the level
    /// offered.
    Oplock {
        open: u64,
        to: u8,
    },
    Lease(LeaseBreak),
}

/// Whether other clients' leases on `f`'s file cache handles, which a
/// rename or delete through open `by` must wait for them to give up: the
/// file and the breaks to send, with `hold` (a connection and a token)
/// made a waiter. None when nothing stands in the way.
pub(crate) fn handles_cached(
    server: &Server,
    f: &FileOpen,
    by: u64,
    hold: (ConnectionId, Token),
) -> Option<(FileKey, Vec<LeaseBreak>)> {
    if !server.has_oplocks() {
        return None;
    }
    let (breaks, wait) = server.files().break_handle_caching(&f.key, by, hold);
    wait.then_some((f.key, breaks))
}

impl Connection {
    /// Holds a request until the leases broken for it are acknowledged.
    pub(crate) fn hold_for_leases(
        &mut self,
        (key, breaks): (FileKey, Vec<LeaseBreak>),
        reply: &mut Reply,
        token: Token,
    ) -> Result<NtStatus, NtStatus> {
        self.send_lease_breaks(breaks);
        reply.hold = Some(Hold {
            token,
            key,
            awaited: Awaited::Breaks,
        });
        Ok(status::PENDING)
    }

    /// Tells each holder of a broken oplock: this connection's own at the
    /// next output, others' by a letter.
    pub(crate) fn send_breaks(&mut self, breaks: Vec<Break>) {
        for b in breaks {
            let (open, to) = (b.open, b.to);
            self.post(b.holder, Kind::OplockBreak { open, to });
        }
    }

    /// Tells each client whose lease is broken, on the connection of its
    /// lease's oldest open.
    /// An entry of a directory changed (made, removed, renamed, its size
    /// or attributes set, its data written): the directory's leases break
    /// to nothing, but the one the change was made under named as its
    /// parent (`except`). The change does not wait for the break.
    pub(crate) fn break_parent_leases(
        &mut self,
        share: usize,
        path: &str,
        except: Option<LeaseId>,
    ) {
        if !self.server.has_oplocks() || path.is_empty() {
            return;
        }
        let dir = crate::names::path::parent(path);
        let breaks = self.server.files().break_dir_leases(share, dir, except);
        self.send_lease_breaks(breaks);
    }

    /// The directory lease an open's lease names as its parent: changes
    /// made through the open do not break it.
    pub(crate) fn parent_lease_of(&self, key: &FileKey, open: u64) -> Option<LeaseId> {
        if !self.server.has_oplocks() {
            return None;
        }
        let (_, lease) = self.server.files().caching_of(key, open);
        let ((client, _), grant) = lease?;
        grant.v2.filter(|p| *p != [0; 16]).map(|p| (client, p))
    }

    pub(crate) fn send_lease_breaks(&mut self, breaks: Vec<LeaseBreak>) {
        for b in breaks {
            let m = self.server.lease_break_letter(b);
            self.post(m.to, m.letter.0);
        }
    }

    /// Wakes held requests: this connection's at the next output, others'
    /// by a letter.
    pub(crate) fn wake_held(&mut self, held: Vec<(ConnectionId, Token)>) {
        for (connection, token) in held {
            self.post(connection, Kind::BreakResolved { token });
        }
    }

    /// Builds the break notifications decided since the last output
    /// (MS-SMB2 3.3.4.6): MessageId all ones, the open's session, not
    /// signed, sealed when the session encrypts. One for an open already
    /// closed is dropped. None goes while an open is being made
    /// (`Connection::making_opens`).
    pub(crate) fn send_notices(&mut self, env: &mut dyn Env, out: &mut Output) {
        if self.notices.is_empty() || self.making_opens() {
            return;
        }
        for n in std::mem::take(&mut self.notices) {
            let mut w = Writer::new();
            // An oplock's break names the open's session; a lease's none
            // (it is the client's), and goes sealed when the client's
            // sessions are.
            let session = match &n {
                Notice::Oplock { open, to } => {
                    let Some(session) = self
                        .sessions
                        .values_mut()
                        .find(|s| s.opens.contains_key(open))
                    else {
                        continue;
                    };
                    messages::write_oplock_break(&mut w, *to, session.opens[open].file_id);
                    session
                }
                Notice::Lease(b) => {
                    let Some(session) = self
                        .sessions
                        .values_mut()
                        .filter(|s| s.is_valid())
                        .max_by_key(|s| s.encrypt_data)
                    else {
                        continue;
                    };
                    lease::write_lease_break(&mut w, b.epoch, b.flags, &b.key, b.current, b.new);
                    session
                }
            };
            let header = Header {
                command: cmd::OPLOCK_BREAK,
                flags: FLAG_SERVER_TO_REDIR,
                message_id: u64::MAX,
                session_id: match n {
                    Notice::Oplock { .. } => session.id,
                    Notice::Lease(_) => 0,
                },
                ..Header::default()
            };
            let mut msg = Vec::with_capacity(HEADER_LEN + 44);
            header.write(&mut msg);
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
        match lease::break_ack_size(req.msg) {
            Some(24) => {}
            Some(36) => return self.lease_break_ack(req, w),
            _ => return Err(status::INVALID_PARAMETER),
        }
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

    /// A Lease Break Acknowledgment (MS-SMB2 3.3.5.22.2): the client's
    /// lease, by this connection's ClientGuid, takes the state
    /// acknowledged; a further break may follow at once.
    fn lease_break_ack(&mut self, req: &Req<'_>, w: &mut Writer) -> Result<NtStatus, NtStatus> {
        let ack = LeaseBreakAck::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let id = (self.client_guid, ack.key);
        let (next, wake) = self.server.files().acknowledge_lease(&id, ack.state)?;
        self.send_lease_breaks(next.into_iter().collect());
        self.wake_held(wake);
        lease::write_lease_break_response(w, &ack.key, ack.state);
        Ok(status::SUCCESS)
    }
}
