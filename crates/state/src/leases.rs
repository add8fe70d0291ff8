//! Leases as Windows grants and breaks them (MS-SMB2 3.3.5.9.8, 3.3.4.7,
//! 3.3.5.22.2; MS-FSA 2.1.5.17): read, handle and write caching held by a
//! client (its ClientGuid and a lease key) for one file, shared by every
//! open that names the key. Pure rules over one lease; the file table
//! keeps the leases and decides which to break.
//!
//! - A request without read caching gets nothing.
//! - Write caching only for the file's one user: another lease, an
//!   oplock or another open (not a stat open) takes it away; an oplock
//!   of another open takes handle caching away too.
//! - An open by another client breaks write caching (handle caching too
//!   when it would fail its share-mode check, the holder's cached handles
//!   being the reason) and waits for the acknowledgement; an overwrite
//!   breaks to nothing. Writes, locks and new sizes break read caching of
//!   the others, without waiting.
//! - A break of a lease that caches no more than reads needs no answer.

use copyless_proto::lease::{
    LeaseContext, FLAG_BREAK_IN_PROGRESS, FLAG_PARENT_LEASE_KEY_SET, HANDLE_CACHING,
    NOTIFY_ACK_REQUIRED, READ_CACHING, WRITE_CACHING,
};
use copyless_proto::status::{self, NtStatus};

use crate::file_table::{FileKey, LeaseGrant};
use crate::ConnectionId;

/// A lease's name: the client's GUID and the key it chose.
pub type LeaseId = ([u8; 16], [u8; 16]);

/// A lease and the opens that share it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub file: FileKey,
    pub state: u32,
    /// A break was sent and awaits its acknowledgement...
    pub breaking: bool,
    /// ...offering this state...
    pub break_to_requested: u32,
    /// ...while triggers since then asked for no more than this.
    pub break_to_required: u32,
    pub epoch: u16,
    /// Version 2 (its epoch goes on the wire), with the parent's key.
    pub v2: Option<[u8; 16]>,
    /// Its opens (volatile file ids) and the connections they live on.
    pub opens: Vec<(u64, ConnectionId)>,
}

/// A lease break notification to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseBreak {
    /// The connection of the lease's oldest open, should the client have
    /// no other.
    pub connection: ConnectionId,
    pub client: [u8; 16],
    pub key: [u8; 16],
    pub epoch: u16,
    pub flags: u32,
    pub current: u32,
    pub new: u32,
}

impl Lease {
    /// The connection a break goes to: that of its oldest open.
    fn holder(&self) -> Option<ConnectionId> {
        self.opens.first().map(|(_, c)| *c)
    }

    fn wire_epoch(&self) -> u16 {
        if self.v2.is_some() {
            self.epoch
        } else {
            0
        }
    }

    fn notice(&self, id: &LeaseId, flags: u32, current: u32, new: u32) -> Option<LeaseBreak> {
        Some(LeaseBreak {
            connection: self.holder()?,
            client: id.0,
            key: id.1,
            epoch: self.wire_epoch(),
            flags,
            current,
            new,
        })
    }

    /// Starts a break to `target`, or lowers the target of the one under
    /// way: the notification to send, if one is due.
    pub fn break_to(&mut self, key: &LeaseId, target: u32) -> Option<LeaseBreak> {
        if self.breaking {
            self.break_to_required &= target;
            return None;
        }
        let current = self.state;
        if current & !target == 0 {
            return None;
        }
        self.epoch = self.epoch.wrapping_add(1);
        if current == READ_CACHING {
            // Nothing cached but reads: gone at once, nothing to answer.
            self.state = 0;
            return self.notice(key, 0, current, 0);
        }
        self.breaking = true;
        self.break_to_requested = target;
        self.break_to_required = target;
        self.notice(key, NOTIFY_ACK_REQUIRED, current, target)
    }

    /// The holder acknowledged a break with `state`: UNSUCCESSFUL when no
    /// break is under way, REQUEST_NOT_ACCEPTED for more than was offered
    /// (the break goes on). When triggers since asked for less, the next
    /// break follows at once, with the same epoch.
    pub fn acknowledge(
        &mut self,
        key: &LeaseId,
        state: u32,
    ) -> Result<Option<LeaseBreak>, NtStatus> {
        if !self.breaking {
            return Err(status::UNSUCCESSFUL);
        }
        if state & !self.break_to_requested != 0 {
            return Err(status::REQUEST_NOT_ACCEPTED);
        }
        self.state = state;
        if state & !self.break_to_required == 0 {
            self.breaking = false;
            return Ok(None);
        }
        if state & (WRITE_CACHING | HANDLE_CACHING) != 0 {
            let target = self.break_to_required | READ_CACHING;
            self.break_to_requested = target;
            return Ok(self.notice(key, NOTIFY_ACK_REQUIRED, state, target));
        }
        self.state = 0;
        self.breaking = false;
        Ok(self.notice(key, 0, state, 0))
    }

    /// The acknowledgement did not come in time: the lease caches
    /// nothing any more.
    pub fn time_out(&mut self) {
        if self.breaking {
            self.state = 0;
            self.breaking = false;
        }
    }
}

/// What an open's access breaks: an open that only reads or writes
/// attributes breaks no lease, nor does one that also reads the
/// security descriptor.
pub fn is_lease_stat_open(access: u32) -> bool {
    use crate::access::*;
    access & !(FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES | SYNCHRONIZE | READ_CONTROL) == 0
}

/// The state a new open's lease request may have, before upgrades:
/// `others` says whether other leases, oplocks or (non-stat) opens are
/// on the file, `oplocked` whether another open holds an oplock.
pub fn grantable(requested: u32, others: bool, oplocked: bool) -> u32 {
    if requested & READ_CACHING == 0 {
        return 0;
    }
    let mut granted = requested & (READ_CACHING | HANDLE_CACHING | WRITE_CACHING);
    if others {
        granted &= !WRITE_CACHING;
    }
    if oplocked {
        granted &= !HANDLE_CACHING;
    }
    granted
}

/// An open with the key of an existing lease: its state rises to
/// `granted` only when that is all the request asked for, more than the
/// lease has, and no break is under way (MS-SMB2 3.3.5.9.8); never down.
pub fn upgrade(lease: &mut Lease, requested: u32, granted: u32) {
    if requested & lease.state == lease.state
        && granted == requested
        && granted != lease.state
        && !lease.breaking
    {
        lease.state = granted;
        lease.epoch = lease.epoch.wrapping_add(1);
    }
}

/// The RqLs response context for a lease, in the lease's own version.
pub fn response_context(key: [u8; 16], g: LeaseGrant) -> Vec<u8> {
    let mut flags = 0;
    if g.breaking {
        flags |= FLAG_BREAK_IN_PROGRESS;
    }
    if g.v2.is_some_and(|parent| parent != [0; 16]) {
        flags |= FLAG_PARENT_LEASE_KEY_SET;
    }
    LeaseContext {
        key,
        state: g.state,
        flags,
        v2: g.v2.map(|parent| (parent, g.epoch)),
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: u32 = READ_CACHING;
    const H: u32 = HANDLE_CACHING;
    const W: u32 = WRITE_CACHING;

    fn lease(state: u32) -> Lease {
        Lease {
            file: (0, 1, 2, 0),
            state,
            breaking: false,
            break_to_requested: 0,
            break_to_required: 0,
            epoch: 1,
            v2: Some([0; 16]),
            opens: vec![(5, 9)],
        }
    }

    #[test]
    fn step_by_step_breaking() {
        // smbtorture smb2.lease.breaking3: RWH to RH, then to nothing.
        let key = ([0; 16], [1; 16]);
        let mut l = lease(R | H | W);
        let b = l.break_to(&key, R | H).unwrap();
        assert_eq!(
            (b.current, b.new, b.flags, b.epoch),
            (R | H | W, R | H, 1, 2)
        );
        assert_eq!(
            l.break_to(&key, 0),
            None,
            "a second trigger lowers the target"
        );
        assert_eq!(
            l.acknowledge(&key, R | H | W),
            Err(status::REQUEST_NOT_ACCEPTED)
        );
        let next = l.acknowledge(&key, R | H).unwrap().unwrap();
        assert_eq!((next.current, next.new, next.epoch), (R | H, R, 2));
        let last = l.acknowledge(&key, R).unwrap().unwrap();
        assert_eq!((last.current, last.new, last.flags), (R, 0, 0));
        assert_eq!((l.state, l.breaking), (0, false));
        assert_eq!(l.acknowledge(&key, 0), Err(status::UNSUCCESSFUL));
    }

    #[test]
    fn grants_and_upgrades() {
        assert_eq!(grantable(H | W, false, false), 0, "no read, nothing");
        assert_eq!(grantable(R | H | W, true, false), R | H);
        assert_eq!(grantable(R | H | W, true, true), R);
        let mut l = lease(R);
        upgrade(&mut l, R | H, R | H);
        assert_eq!((l.state, l.epoch), (R | H, 2));
        upgrade(&mut l, R, R);
        assert_eq!(l.state, R | H, "never down");
        upgrade(&mut l, R | H | W, R | H);
        assert_eq!(l.state, R | H, "not when the grant falls short");
    }
}
