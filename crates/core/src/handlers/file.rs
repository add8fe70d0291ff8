//! CLOSE, FLUSH, READ and WRITE.

use copyless_proto::messages::{self, CloseRequest, LockRequest, ReadRequest, WriteRequest};
use copyless_proto::negotiate::{CAP_MULTI_CHANNEL, DIALECT_210, DIALECT_300};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use crate::access;
use crate::breaks::handles_cached;
use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::pending::{Awaits, Closing};
use crate::conn::waiting::{Awaited, Hold, Wait, WaitOp};
use crate::file_table::{LockWaiter, Locked};
use crate::handlers::look::{self, Looked, Part};
use crate::handlers::{file_times, Then};
use crate::intent::WriteData;
use crate::locks::ByteLock;
use crate::open::{current_path, Open, OpenKind};

/// A CLOSE that waits for its file (or named stream) to be removed.
pub(crate) struct Removing {
    pub closing: Closing,
    /// The name it removes (path, and whether a folder); None for a
    /// named stream.
    name: Option<(String, bool)>,
    /// What the close reports of the file (POSTQUERY_ATTRIB).
    times: Option<messages::FileTimes>,
}

const PIPE_EMPTY: NtStatus = 0xC000_00D9;

/// The largest size a file may grow to (MAXFILESIZE, MS-FSA 2.1.5.4).
const MAX_FILE_SIZE: u64 = 0xFFF_FFFF_0000;

/// Whether a READ of `len` bytes at `offset` lies within what a file's
/// offsets can be: neither negative nor past the largest signed 64-bit
/// value, as offsets are signed (MS-FSA 2.1.5.3).
fn readable_range(offset: u64, len: u32) -> bool {
    offset
        .checked_add(u64::from(len))
        .is_some_and(|end| end <= i64::MAX as u64)
}

/// Whether a WRITE of `len` bytes at `offset` may be made: its offset as
/// a READ's, and, unless it writes nothing, no byte past MAXFILESIZE
/// (MS-FSA 2.1.5.4). A negative offset, which MS-FSA reads as "at the
/// end" or "at the file pointer", is refused, as Windows refuses it.
fn writable_range(offset: u64, len: usize) -> bool {
    let len = len as u64;
    offset
        .checked_add(len)
        .is_some_and(|end| end <= i64::MAX as u64 && (len == 0 || end <= MAX_FILE_SIZE))
}

impl Connection {
    /// CLOSE; `looked`, on the run after the call that looked up the
    /// attributes it asks back (POSTQUERY_ATTRIB) where they are not in
    /// memory.
    pub(crate) fn close(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        looked: Option<Result<Box<Looked>, NtStatus>>,
    ) -> Result<NtStatus, NtStatus> {
        let c = CloseRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let hold = (self.id(), self.next_hold_token());
        let server = self.server.clone();
        let open = self.open_mut(req, compound, c.file_id)?;
        let id = open.file_id;
        // A listing of the open still being made finishes first, as a
        // query of it would (smbtorture's compound_find_close sends the
        // close right behind a large query).
        if let Some(f) = open.file().filter(|f| f.dir_away) {
            reply.hold = Some(Hold {
                token: hold.1,
                key: f.key,
                awaited: Awaited::Listing,
            });
            return Ok(status::PENDING);
        }
        // Closing an open made to delete the file takes handle caching
        // from the other clients' leases first, and waits for them.
        if let Some(f) = open.file().filter(|f| f.delete_on_close) {
            if let Some(h) = handles_cached(&server, f, id.volatile, hold) {
                return self.hold_for_leases(h, reply, hold.1);
            }
        }
        // The attributes asked back are those of the file still open; a
        // lookup that fails leaves them out, as Windows does.
        let asks = c.flags & messages::CLOSE_FLAG_POSTQUERY_ATTRIB != 0;
        let times = match open.file().filter(|_| asks) {
            None => None,
            Some(f) => {
                let then = || Then::CloseLooked {
                    msg: req.msg.to_vec(),
                };
                let Some(looked) = look::here_or_by_call(f, Part::Stat, looked, reply, then) else {
                    return Ok(status::SUCCESS);
                };
                looked.ok().and_then(|l| l.stat).map(|st| {
                    let mut times = file_times(&st);
                    if f.names.hides_any() {
                        let path = current_path(&server, &f.key).unwrap_or_default();
                        let name = crate::names::path::file_name(&path);
                        times.attributes = f.names.shown(name, times.attributes);
                    }
                    times
                })
            }
        };
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        let open = session
            .opens
            .remove(&id.volatile)
            .ok_or(status::FILE_CLOSED)?;
        // The close goes on from the removal with nothing but memory;
        // the removal stays marked as the server's own change until it
        // is made.
        let mark = self.mark_removal(&open);
        let (closing, unlink) = self.let_go(req.session_id, open);
        if let Some(u) = unlink {
            let (vfs, op, name) = u.into_call();
            reply.wait = Some(Wait::Call {
                vfs,
                op,
                then: Then::Close(Box::new(Removing {
                    closing,
                    name,
                    times,
                })),
                mark: Some(mark),
            });
            return Ok(status::SUCCESS);
        }
        drop(mark);
        self.released(closing, None);
        messages::write_close_response(w, times.as_ref());
        Ok(status::SUCCESS)
    }

    /// A CLOSE whose file (or stream) was to be removed goes on: it was,
    /// or (when `result` failed: a directory that is no longer empty) it
    /// stays, as on Windows, and the close succeeds either way.
    pub(crate) fn removed(
        &mut self,
        r: Box<Removing>,
        result: copyless_vfs::VfsResult<()>,
        w: &mut Writer,
    ) -> NtStatus {
        let removed = r.name.filter(|_| result.is_ok());
        self.released(r.closing, removed);
        messages::write_close_response(w, r.times.as_ref());
        status::SUCCESS
    }

    pub(crate) fn flush(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let fid = messages::parse_flush(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let open = self.open_mut(req, compound, fid)?;
        if let OpenKind::File(f) = &open.kind {
            if open.access & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) == 0 {
                return Err(status::ACCESS_DENIED);
            }
            reply.wait = Some(Wait::Data {
                file: f.data_file(),
                op: WaitOp::Flush,
            });
            return Ok(status::SUCCESS);
        }
        w.u16(4).u16(0);
        Ok(status::SUCCESS)
    }

    pub(crate) fn read(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let r = ReadRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if r.length > self.max_io {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, r.length)?;
        let locked = self.server.has_byte_locks().then(|| self.server.clone());
        let open = self.open_mut(req, compound, r.file_id)?;
        let access = open.access;
        let volatile = open.file_id.volatile;
        match &mut open.kind {
            OpenKind::Pipe(p) => {
                if p.pending() == 0 {
                    return Err(PIPE_EMPTY);
                }
                let data = p.read(r.length as usize);
                let more = p.pending() > 0;
                messages::write_read_response_head(w, data.len() as u32);
                w.bytes(&data);
                Ok(if more {
                    status::BUFFER_OVERFLOW
                } else {
                    status::SUCCESS
                })
            }
            OpenKind::File(f) => {
                if f.is_dir {
                    return Err(status::INVALID_DEVICE_REQUEST);
                }
                if access & (access::FILE_READ_DATA | access::FILE_EXECUTE) == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                if !readable_range(r.offset, r.length) {
                    return Err(status::INVALID_PARAMETER);
                }
                if let Some(server) = locked {
                    let len = u64::from(r.length);
                    if !server
                        .files()
                        .may_access(&f.key, volatile, r.offset, len, false)
                    {
                        return Err(status::FILE_LOCK_CONFLICT);
                    }
                }
                reply.wait = Some(Wait::Data {
                    file: f.data_file(),
                    op: WaitOp::Read {
                        offset: r.offset,
                        len: r.length,
                        minimum: r.minimum_count,
                        volatile,
                    },
                });
                Ok(status::SUCCESS)
            }
        }
    }

    pub(crate) fn write(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let wr = WriteRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if wr.data.len() as u64 > u64::from(self.max_io) {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, wr.data.len() as u32)?;
        let locked = self.server.has_byte_locks().then(|| self.server.clone());
        if self.server.has_oplocks() {
            self.break_level2_for(req, compound, wr.file_id)?;
        }
        let open = self.open_mut(req, compound, wr.file_id)?;
        let access = open.access;
        let volatile = open.file_id.volatile;
        match &mut open.kind {
            OpenKind::Pipe(p) => {
                p.write(wr.data).map_err(|_| status::INVALID_PARAMETER)?;
            }
            OpenKind::File(f) => {
                if f.is_dir {
                    return Err(status::INVALID_DEVICE_REQUEST);
                }
                if access & (access::FILE_WRITE_DATA | access::FILE_APPEND_DATA) == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                if f.snapshot {
                    return Err(status::MEDIA_WRITE_PROTECTED);
                }
                if !writable_range(wr.offset, wr.data.len()) {
                    return Err(status::INVALID_PARAMETER);
                }
                f.written = true;
                if let Some(server) = locked {
                    let len = wr.data.len() as u64;
                    if !server
                        .files()
                        .may_access(&f.key, volatile, wr.offset, len, true)
                    {
                        return Err(status::FILE_LOCK_CONFLICT);
                    }
                }
                // The payload stays where it arrived when the engine
                // holds it.
                let data = match req.frame_at {
                    Some(at) if !wr.data.is_empty() => {
                        let start = at + wr.data_offset;
                        WriteData::Frame(start..start + wr.data.len())
                    }
                    _ => WriteData::Owned(wr.data.to_vec()),
                };
                reply.wait = Some(Wait::Data {
                    file: f.data_file(),
                    op: WaitOp::Write {
                        offset: wr.offset,
                        data,
                        sync: f.write_through || wr.flags & messages::WRITEFLAG_WRITE_THROUGH != 0,
                        volatile,
                    },
                });
                return Ok(status::SUCCESS);
            }
        }
        messages::write_write_response(w, wr.data.len() as u32);
        Ok(status::SUCCESS)
    }
}

impl Connection {
    /// Writing and locking a file break the level II oplocks on it, the
    /// writer's own too (MS-FSA 2.1.5.3, 2.1.5.7): their holders are told,
    /// and answer nothing.
    pub(crate) fn break_level2_for(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        id: messages::FileId,
    ) -> Result<(), NtStatus> {
        let open = self.open_mut(req, compound, id)?;
        let by = open.file_id.volatile;
        if let OpenKind::File(f) = &open.kind {
            let key = f.key;
            let (breaks, lease_breaks) = self.server.files().break_level2(&key, by);
            self.send_breaks(breaks);
            self.send_lease_breaks(lease_breaks);
        }
        Ok(())
    }

    /// LOCK (MS-SMB2 3.3.5.14): byte-range locks taken all or none, or
    /// given back. A single lock that may wait goes pending until the
    /// locks in its way go (pending.rs); unlocking wakes the waiters.
    pub(crate) fn lock(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let lr = LockRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if lr.locks.is_empty() {
            return Err(status::INVALID_PARAMETER);
        }
        if self.server.has_oplocks() && lr.locks[0].flags & messages::LOCKFLAG_UNLOCK == 0 {
            self.break_level2_for(req, compound, lr.file_id)?;
        }
        let server = self.server.clone();
        // Durable and resilient opens remember which LockSequence
        // succeeded (SMB 2.1 and later), and so does every open of an
        // SMB 3 connection that offers multichannel, where a client may
        // send a LOCK again on another channel (MS-SMB2 3.3.5.14).
        // Windows checks only resilient and persistent opens (<314>).
        let every_open =
            self.dialect >= DIALECT_300 && self.server_capabilities & CAP_MULTI_CHANNEL != 0;
        let sequenced = self.dialect >= DIALECT_210;
        let open = self.open_mut(req, compound, lr.file_id)?;
        let id = open.file_id.volatile;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_DEVICE_REQUEST);
        };
        let key = f.key;
        if sequenced && (every_open || f.durable.is_some()) {
            let sequences = f.lock_sequences.get_or_insert_with(Box::default);
            if sequences.replayed(lr.sequence) {
                messages::write_empty_response(w);
                return Ok(status::SUCCESS);
            }
        }
        if lr.locks[0].flags & messages::LOCKFLAG_UNLOCK != 0 {
            for el in &lr.locks {
                // What was unlocked before a bad element stays unlocked.
                // Windows takes no other flag with UNLOCK, FAIL_IMMEDIATELY
                // included (smbtorture smb2.lock.valid-request).
                if el.flags != messages::LOCKFLAG_UNLOCK {
                    return Err(status::INVALID_PARAMETER);
                }
                let wake = server.files().unlock(&key, id, el.offset, el.length)?;
                self.wake(wake);
            }
        } else {
            let several = lr.locks.len() > 1;
            let may_wait = lr.locks[0].flags & messages::LOCKFLAG_FAIL_IMMEDIATELY == 0;
            let mut new = Vec::with_capacity(lr.locks.len());
            for el in &lr.locks {
                let fail_at_once = el.flags & messages::LOCKFLAG_FAIL_IMMEDIATELY != 0;
                let exclusive = match el.flags & !messages::LOCKFLAG_FAIL_IMMEDIATELY {
                    messages::LOCKFLAG_SHARED => false,
                    messages::LOCKFLAG_EXCLUSIVE => true,
                    _ => return Err(status::INVALID_PARAMETER),
                };
                if several && !fail_at_once {
                    return Err(status::INVALID_PARAMETER);
                }
                if el.length > 0 && el.offset.checked_add(el.length - 1).is_none() {
                    return Err(status::INVALID_LOCK_RANGE);
                }
                new.push(ByteLock {
                    open: id,
                    offset: el.offset,
                    length: el.length,
                    exclusive,
                });
            }
            let async_id = self.next_async_id();
            let waiter = may_wait.then_some(LockWaiter {
                connection: self.id(),
                async_id,
                open: id,
            });
            if waiter.is_some() && !self.may_pend() {
                return Err(status::INSUFFICIENT_RESOURCES);
            }
            if server.files().lock(&key, &new, waiter)? == Locked::Waiting {
                reply.pend = Some((
                    async_id,
                    Awaits::Lock {
                        key,
                        open: id,
                        locks: new,
                    },
                ));
                return Ok(status::PENDING);
            }
        }
        if let Ok(Open {
            kind: OpenKind::File(f),
            ..
        }) = self.open_mut(req, compound, lr.file_id)
        {
            if let Some(sequences) = f.lock_sequences.as_mut() {
                sequences.succeeded(lr.sequence);
            }
        }
        messages::write_empty_response(w);
        Ok(status::SUCCESS)
    }
}
