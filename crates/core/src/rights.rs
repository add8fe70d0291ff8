//! The one access decision: what a session may do to an object of a share.
//!
//! Every path that opens, truncates, supersedes, replaces or deletes an
//! object, creates a stream, or changes its attributes, owner or
//! descriptor asks here, so that no path can skip a rule. The rules:
//!
//! - **The share's**: a read-only tree grants no modifying right
//!   ([`Ask::tree_maximal`]).
//! - **The object's descriptor** (MS-DTYP 2.5.3.2): its stored DACL, or
//!   when none was ever stored, the descriptor derived from its mode bits
//!   for this caller ([`derived`]): read, write and execute as the kernel
//!   would grant them, and READ_CONTROL, WRITE_DAC and WRITE_OWNER to its
//!   owner alone.
//! - **The parent's** (MS-FSA 2.1.5.1.2.1): DELETE also comes from the
//!   parent's FILE_DELETE_CHILD, FILE_READ_ATTRIBUTES from its
//!   FILE_LIST_DIRECTORY. A parent without a stored descriptor grants both:
//!   the kernel then decides deletion alone.
//! - **The kernel's**: DELETE only where the kernel would let the caller
//!   unlink, and a file's data written only where it may write it.
//! - **The operation's**: overwriting needs FILE_WRITE_DATA,
//!   FILE_WRITE_EA and FILE_WRITE_ATTRIBUTES, superseding DELETE too, and
//!   a new stream is a write to its file ([`implied`]); a file marked
//!   read-only is not written ([`Ask::read_only_file`]).
//!
//! The facts behind a decision cost system calls, so they are asked for
//! through [`Facts`] only as the rights in question need them.
//! `rights_reference` states the same rules plainly, for differential
//! tests.

use copyless_fscc::descriptor::{Descriptor, SE_DACL_PRESENT};
use copyless_proto::status::{self, NtStatus};
use copyless_vfs::UnixAccess;

use crate::access::*;

/// What a decision may ask about the object, each at most once.
pub trait Facts {
    /// What the object's own descriptor grants: its stored DACL's rights,
    /// or those [`derived`] from its mode for the caller. `wanted` are the
    /// rights in question; others may be left out.
    fn own(&mut self, wanted: u32) -> Result<u32, NtStatus>;
    /// What the parent folder's stored descriptor grants the caller; None
    /// when it has none. Never asked for the share's root.
    fn parent(&mut self) -> Result<Option<u32>, NtStatus>;
    /// Whether the kernel would let the caller unlink the object.
    fn may_unlink(&mut self) -> Result<bool, NtStatus>;
    /// Whether the kernel lets the caller write the object.
    fn may_write(&mut self) -> Result<bool, NtStatus>;
}

/// An open of an existing object, as the decision needs it.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// DesiredAccess as sent (generic rights and MAXIMUM_ALLOWED included).
    pub desired: u32,
    /// What the operation itself needs ([`implied`]).
    pub implied: u32,
    /// The most the tree allows (read-only shares allow no modifying
    /// right).
    pub tree_maximal: u32,
    /// The object is the share's root, which has no parent here.
    pub is_root: bool,
    pub is_dir: bool,
    /// A file with FILE_ATTRIBUTE_READONLY: its data is not written.
    pub read_only_file: bool,
    /// The client wants to hear the maximal access (MxAc).
    pub maximal_wanted: bool,
}

/// What an open is granted, and the most it could have been (MxAc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    pub granted: u32,
    pub maximal: u32,
}

/// Dispositions of CREATE (MS-SMB2 2.2.13).
pub const SUPERSEDE: u32 = 0;
pub const OVERWRITE: u32 = 4;
pub const OVERWRITE_IF: u32 = 5;

/// Rights an operation on an existing object needs besides those asked
/// for: overwriting rewrites the data, its EAs and attributes; superseding
/// replaces the object, which also takes DELETE (as Windows adds them for
/// a caller without the restore privilege); and a stream that does not
/// exist yet is written into its file (a folder's named streams: added to
/// it).
pub fn implied(disposition: u32, new_stream: bool, is_dir: bool) -> u32 {
    let overwrite = FILE_WRITE_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES;
    let mut need = match disposition {
        SUPERSEDE => overwrite | DELETE,
        OVERWRITE | OVERWRITE_IF => overwrite,
        _ => 0,
    };
    if new_stream {
        need |= if is_dir {
            FILE_APPEND_DATA
        } else {
            FILE_WRITE_DATA
        };
    }
    need
}

/// The rights a descriptor derived from an object's mode bits gives the
/// caller, from what the kernel grants it: read gives FILE_GENERIC_READ,
/// write FILE_GENERIC_WRITE and FILE_DELETE_CHILD (a folder's entries go
/// with it; a file has none), a folder's execute FILE_GENERIC_EXECUTE
/// (passing through it). A file's execute comes with reading it: the
/// server hands its data to the client to run, so its x bit keeps nothing
/// from anyone who may read it. The owner alone holds READ_CONTROL,
/// WRITE_DAC and WRITE_OWNER, as on Windows, where a group member who may
/// write a file may still not change who owns it or who else may use it.
pub fn derived(unix: UnixAccess, owner: bool, is_dir: bool) -> u32 {
    let mut rights = 0;
    if unix.read {
        rights |= FILE_GENERIC_READ;
    }
    if unix.write {
        rights |= FILE_GENERIC_WRITE | FILE_DELETE_CHILD;
    }
    if if is_dir { unix.execute } else { unix.read } {
        rights |= FILE_GENERIC_EXECUTE;
    }
    if owner {
        rights |= READ_CONTROL | WRITE_DAC | WRITE_OWNER;
    }
    rights
}

/// The rights the caller holds on the object, for the rights in
/// `wanted` (others may be missing).
pub fn allowed(facts: &mut dyn Facts, wanted: u32, ask: &Ask) -> Result<u32, NtStatus> {
    let mut rights = facts.own(wanted)?;
    let from_parent = wanted & !rights & (DELETE | FILE_READ_ATTRIBUTES);
    if from_parent != 0 && !ask.is_root {
        let parent = facts
            .parent()?
            .unwrap_or(FILE_LIST_DIRECTORY | FILE_DELETE_CHILD);
        if parent & FILE_DELETE_CHILD != 0 {
            rights |= DELETE;
        }
        if parent & FILE_LIST_DIRECTORY != 0 {
            rights |= FILE_READ_ATTRIBUTES;
        }
    }
    // The share's root is never deleted.
    if ask.is_root {
        rights &= !DELETE;
    }
    if wanted & rights & DELETE != 0 && !facts.may_unlink()? {
        rights &= !DELETE;
    }
    const DATA_WRITE: u32 = FILE_WRITE_DATA | FILE_APPEND_DATA;
    if !ask.is_dir
        && wanted & rights & DATA_WRITE != 0
        && (ask.read_only_file || !facts.may_write()?)
    {
        rights &= !DATA_WRITE;
    }
    Ok(rights & ask.tree_maximal)
}

/// The rights [`open`] looks for: every right when the caller asks for
/// the most it may have (MAXIMUM_ALLOWED, or MxAc's `maximal_wanted`),
/// else those asked for and `implied`.
fn wanted(desired: u32, implied: u32, maximal_wanted: bool) -> u32 {
    if desired & MAXIMUM_ALLOWED != 0 || maximal_wanted {
        FILE_ALL_ACCESS
    } else {
        map_generic(desired & !MAXIMUM_ALLOWED, 0) | implied
    }
}

/// Whether [`open`] may ask [`Facts::may_unlink`] of an open asked for
/// with `desired` and `disposition`: DELETE is among the rights it looks
/// for.
pub fn may_ask_unlink(desired: u32, disposition: u32, maximal_wanted: bool) -> bool {
    let implied = implied(disposition, false, false);
    wanted(desired, implied, maximal_wanted) & DELETE != 0
}

/// Decides an open of an existing object (MS-FSA 2.1.5.1.2.1): every
/// right asked for or implied must be held, or ACCESS_DENIED; with
/// MAXIMUM_ALLOWED the open also gets every right the caller holds.
pub fn open(facts: &mut dyn Facts, ask: &Ask) -> Result<Granted, NtStatus> {
    let explicit = map_generic(ask.desired & !MAXIMUM_ALLOWED, 0);
    let need = explicit | ask.implied;
    let wanted = wanted(ask.desired, ask.implied, ask.maximal_wanted);
    let rights = allowed(facts, wanted, ask)?;
    // System security is a privilege, refused before this.
    if need & !rights & !ACCESS_SYSTEM_SECURITY != 0 {
        return Err(status::ACCESS_DENIED);
    }
    let maximal = rights & wanted;
    let granted = if ask.desired & MAXIMUM_ALLOWED != 0 {
        explicit | maximal
    } else {
        explicit
    };
    Ok(Granted { granted, maximal })
}

/// Decides a rename of an object its open may delete (it holds DELETE)
/// into a folder whose stored descriptor grants `new_parent` (None: it has
/// none, and the kernel decides): the folder must let the caller add a
/// file or a subdirectory, and an object it replaces must be one the
/// caller may delete, by the folder's FILE_DELETE_CHILD or, failing
/// that, the DELETE its own descriptor grants (`replaced_own`, asked
/// only then).
pub fn rename(
    new_parent: Option<u32>,
    is_dir: bool,
    replaces: bool,
    replaced_own: impl FnOnce() -> Result<u32, NtStatus>,
) -> Result<(), NtStatus> {
    let Some(parent) = new_parent else {
        return Ok(());
    };
    let add = if is_dir {
        FILE_ADD_SUBDIRECTORY
    } else {
        FILE_ADD_FILE
    };
    if parent & add == 0 {
        return Err(status::ACCESS_DENIED);
    }
    if replaces && parent & FILE_DELETE_CHILD == 0 && replaced_own()? & DELETE == 0 {
        return Err(status::ACCESS_DENIED);
    }
    Ok(())
}

/// Whether the caller may make `owner` the owner of an object it holds
/// WRITE_OWNER on: a SID of its own token (itself, or a group it is in,
/// Everyone included, as Samba allows), never someone else; Windows
/// refuses other SIDs to a user without the restore privilege with
/// STATUS_INVALID_OWNER. Keeping the present owner is no change and
/// always allowed.
pub fn may_take_owner(owner: &[u8], present: &[u8], token: &[Vec<u8>]) -> Result<(), NtStatus> {
    if owner == present || token.iter().any(|s| s == owner) {
        Ok(())
    } else {
        Err(status::INVALID_OWNER)
    }
}

/// Whether a stored descriptor decides access itself: it holds a DACL (a
/// NULL one, granting everything, included). One that leaves its DACL
/// open, because only its owner or group was ever set, leaves access to
/// the mode bits, as the descriptor a client reads back shows.
pub fn decides(sd: &Descriptor) -> bool {
    sd.control & SE_DACL_PRESENT != 0 || sd.dacl.is_some()
}

/// What a stored owner adds to the rights derived from the mode when the
/// descriptor leaves its DACL open: the owner's implicit READ_CONTROL and
/// WRITE_DAC (MS-DTYP 2.5.3.2) to whoever holds the owner it names.
pub fn stored_owner_rights(sd: &Descriptor, token: &[Vec<u8>]) -> u32 {
    match &sd.owner {
        Some(owner) if token.iter().any(|s| s == owner) => READ_CONTROL | WRITE_DAC,
        _ => 0,
    }
}

/// What a stored descriptor grants `token`, with its owner taken to be
/// `owner` when it names none (the object's Unix owner).
pub fn stored_rights(sd: &Descriptor, owner: &[u8], token: &[Vec<u8>]) -> u32 {
    if sd.owner.is_some() {
        return sd.granted(token);
    }
    let mut sd = sd.clone();
    sd.owner = Some(owner.to_vec());
    sd.granted(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwriting_and_superseding_imply_writing_and_deleting() {
        assert_eq!(implied(1, false, false), 0);
        assert_eq!(implied(3, false, false), 0);
        assert_eq!(
            implied(OVERWRITE, false, false),
            FILE_WRITE_DATA | FILE_WRITE_EA | FILE_WRITE_ATTRIBUTES
        );
        assert_eq!(implied(SUPERSEDE, false, false) & DELETE, DELETE);
        assert_eq!(implied(1, true, false), FILE_WRITE_DATA);
        assert_eq!(implied(1, true, true), FILE_APPEND_DATA);
    }

    #[test]
    fn only_the_owner_holds_write_dac_and_write_owner() {
        let rw = UnixAccess {
            read: true,
            write: true,
            execute: false,
        };
        assert_eq!(derived(rw, false, false) & (WRITE_DAC | WRITE_OWNER), 0);
        assert_eq!(
            derived(rw, true, false) & (WRITE_DAC | WRITE_OWNER),
            WRITE_DAC | WRITE_OWNER
        );
        assert_eq!(derived(rw, true, false) & DELETE, 0);
    }
}
