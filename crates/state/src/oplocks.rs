//! Oplocks as Windows grants and breaks them (MS-FSA 2.1.5.17-18, MS-SMB2
//! 3.3.4.6, 3.3.5.22.1), for the opens of one file: pure rules over the
//! file's list, kept by the file table.
//!
//! - An exclusive or batch oplock goes to an open that is the file's only
//!   one; with other opens there, level II at most.
//! - Another open of the file breaks an exclusive or batch oplock, to
//!   level II (to none when it overwrites the file), and waits until the
//!   holder acknowledges or closes. When the open would fail its share-mode
//!   check, only a batch oplock breaks (its holder may be a handle kept
//!   open for a closed document, and closing it lets the open through);
//!   an exclusive one stays and the open fails at once.
//! - An open that only reads or writes attributes (a stat open) breaks
//!   nothing and gets no oplock, unless it overwrites the file.
//! - Level II oplocks break to none, with no acknowledgement, when the file
//!   is written, truncated, extended or locked.

use copyless_proto::messages::{
    OPLOCK_LEVEL_BATCH, OPLOCK_LEVEL_EXCLUSIVE, OPLOCK_LEVEL_II, OPLOCK_LEVEL_NONE,
};
use copyless_proto::status::{self, NtStatus};

use crate::access;
use crate::ConnectionId;

/// An oplock one open holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oplock {
    /// The open (its volatile file id) and the connection it lives on.
    pub open: u64,
    pub holder: ConnectionId,
    pub level: u8,
    /// A break to this level was sent and awaits the acknowledgement.
    pub breaking_to: Option<u8>,
}

/// A break notification to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Break {
    pub holder: ConnectionId,
    pub open: u64,
    pub to: u8,
}

/// What an open about to be made asks of the file's oplocks.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// Its granted access.
    pub access: u32,
    /// It overwrites or supersedes the file.
    pub truncating: bool,
    /// It would fail the share-mode check as things stand.
    pub sharing_conflict: bool,
}

/// What the file's oplocks mean for an open about to be made.
#[derive(Debug, PartialEq, Eq)]
pub enum OnOpen {
    /// It waits until these breaks (and any already under way) are
    /// acknowledged; then it is tried again.
    Wait(Vec<Break>),
    /// It goes ahead; these breaks (level II to none) need no answer.
    Go(Vec<Break>),
}

/// An open that only reads or writes attributes and leaves the data be:
/// it breaks no oplock and gets none (smbtorture smb2.oplock.statopen1
/// has READ_CONTROL break a batch oplock).
pub fn is_stat_open(access: u32, truncating: bool) -> bool {
    !truncating
        && access
            & !(access::FILE_READ_ATTRIBUTES | access::FILE_WRITE_ATTRIBUTES | access::SYNCHRONIZE)
            == 0
}

/// Which breaks an open of the file makes, and whether it must wait.
pub fn on_open(held: &mut Vec<Oplock>, ask: Ask) -> OnOpen {
    if is_stat_open(ask.access, ask.truncating) {
        return OnOpen::Go(Vec::new());
    }
    let mut breaks = Vec::new();
    let mut wait = false;
    for o in held.iter_mut() {
        let strong = matches!(o.level, OPLOCK_LEVEL_EXCLUSIVE | OPLOCK_LEVEL_BATCH);
        if !strong || (ask.sharing_conflict && o.level != OPLOCK_LEVEL_BATCH) {
            continue;
        }
        wait = true;
        if o.breaking_to.is_none() {
            let to = if ask.truncating {
                OPLOCK_LEVEL_NONE
            } else {
                OPLOCK_LEVEL_II
            };
            o.breaking_to = Some(to);
            breaks.push(Break {
                holder: o.holder,
                open: o.open,
                to,
            });
        }
    }
    if wait {
        return OnOpen::Wait(breaks);
    }
    if ask.truncating && !ask.sharing_conflict {
        return OnOpen::Go(break_level2(held));
    }
    OnOpen::Go(Vec::new())
}

/// The level an open gets that asked for `requested`, given the file's
/// other opens (`others`) and the oplocks they hold.
pub fn grant(held: &[Oplock], requested: u8, others: usize, is_dir: bool) -> u8 {
    if is_dir {
        return OPLOCK_LEVEL_NONE;
    }
    match requested {
        OPLOCK_LEVEL_EXCLUSIVE | OPLOCK_LEVEL_BATCH if others == 0 => requested,
        OPLOCK_LEVEL_EXCLUSIVE | OPLOCK_LEVEL_BATCH | OPLOCK_LEVEL_II
            if held.iter().all(|o| o.level == OPLOCK_LEVEL_II) =>
        {
            OPLOCK_LEVEL_II
        }
        _ => OPLOCK_LEVEL_NONE,
    }
}

/// The holder of `open` acknowledged a break at `level`: the level it
/// holds now, II only when the break and the acknowledgement both say so.
/// An open with no break under way (never broken, broken from level II,
/// or acknowledged already) gets INVALID_OPLOCK_PROTOCOL, a level that is
/// neither II nor none INVALID_PARAMETER, as Windows and Samba answer.
pub fn acknowledge(held: &mut Vec<Oplock>, open: u64, level: u8) -> Result<u8, NtStatus> {
    let at = held
        .iter()
        .position(|o| o.open == open && o.breaking_to.is_some())
        .ok_or(status::INVALID_OPLOCK_PROTOCOL)?;
    if !matches!(level, OPLOCK_LEVEL_NONE | OPLOCK_LEVEL_II) {
        return Err(status::INVALID_PARAMETER);
    }
    let to = held[at].breaking_to.take().unwrap_or(OPLOCK_LEVEL_NONE);
    let level = if level == OPLOCK_LEVEL_II && to == OPLOCK_LEVEL_II {
        OPLOCK_LEVEL_II
    } else {
        OPLOCK_LEVEL_NONE
    };
    if level == OPLOCK_LEVEL_NONE {
        held.remove(at);
    } else {
        held[at].level = level;
    }
    Ok(level)
}

/// Breaks that were never acknowledged are taken as done (the
/// acknowledgement timer ran out).
pub fn end_breaks(held: &mut Vec<Oplock>) {
    held.retain_mut(|o| match o.breaking_to.take() {
        Some(OPLOCK_LEVEL_NONE) => false,
        Some(to) => {
            o.level = to;
            true
        }
        None => true,
    });
}

/// Level II oplocks go to none: their holders are told, and answer
/// nothing.
pub fn break_level2(held: &mut Vec<Oplock>) -> Vec<Break> {
    let mut breaks = Vec::new();
    held.retain(|o| {
        if o.level == OPLOCK_LEVEL_II && o.breaking_to.is_none() {
            breaks.push(Break {
                holder: o.holder,
                open: o.open,
                to: OPLOCK_LEVEL_NONE,
            });
            false
        } else {
            true
        }
    });
    breaks
}
