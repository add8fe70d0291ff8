//! The identity a thread acts as on the filesystem.
//!
//! Linux keeps credentials per thread, so each thread that does file work
//! for a session takes on that session's user (effective uid, gid and
//! groups, set with the raw per-thread system calls, never glibc's
//! process-wide ones) before it touches a file. A thread keeps the
//! identity it last took until it needs another, so a run of requests of
//! one user costs no switch. Changing the effective uid from root drops
//! the thread's effective capabilities (no DAC override, no chown); the
//! real and saved uids stay root, so switching back restores them.

use std::cell::RefCell;
use std::sync::OnceLock;

use rustix::process::{getegid, geteuid, getgroups, Gid, Uid};
use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};

use crate::{Identity, VfsError, VfsResult};

thread_local! {
    /// Who this thread acts as; None until it first took an identity here,
    /// since a thread starts with whatever ids the thread that made it
    /// had at the time.
    static ACTING: RefCell<Option<Identity>> = const { RefCell::new(None) };
}

/// The server's own ids, as every thread starts with them.
struct Own {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
}

fn own() -> &'static Own {
    static OWN: OnceLock<Own> = OnceLock::new();
    OWN.get_or_init(|| Own {
        uid: geteuid(),
        gid: getegid(),
        groups: getgroups().unwrap_or_default(),
    })
}

/// The server's own ids as an identity, for rules that need numbers.
pub(super) fn own_identity() -> Identity {
    let own = own();
    Identity::unix(
        own.uid.as_raw(),
        own.gid.as_raw(),
        own.groups.iter().map(|g| g.as_raw()).collect(),
    )
}

/// Makes this thread act as `who` from now on. An error (the server may
/// not change identity) leaves the thread acting as no user at all
/// rather than as the wrong one: it is then back to the server's own ids
/// and says so, and the caller must not touch the file.
pub(super) fn act_as(who: &Identity) -> VfsResult<()> {
    ACTING.with_borrow_mut(|acting| {
        if acting.as_ref() == Some(who) {
            return Ok(());
        }
        let own = own();
        if !own.uid.is_root() {
            // Without root no thread can hold other ids than the server's,
            // nor take any.
            return match who {
                Identity::Server => Ok(()),
                Identity::Unix(_) => Err(VfsError::AccessDenied),
            };
        }
        if *acting != Some(Identity::Server) {
            // Back to the server's uid first: only it may set groups.
            set_thread_res_uid(None, own.uid, None).map_err(|_| VfsError::AccessDenied)?;
            *acting = None;
        }
        let taken = match who {
            Identity::Server => set_thread_res_gid(None, own.gid, None)
                .and_then(|()| set_thread_groups(&own.groups)),
            Identity::Unix(ids) => {
                let groups: Vec<Gid> = ids.groups.iter().map(|&g| Gid::from_raw(g)).collect();
                set_thread_res_gid(None, Gid::from_raw(ids.gid), None)
                    .and_then(|()| set_thread_groups(&groups))
                    .and_then(|()| set_thread_res_uid(None, Uid::from_raw(ids.uid), None))
            }
        };
        match taken {
            Ok(()) => {
                *acting = Some(who.clone());
                Ok(())
            }
            Err(_) => {
                // Whatever was half set, the uid is still the server's:
                // put the groups back too.
                let _ = set_thread_res_gid(None, own.gid, None);
                let _ = set_thread_groups(&own.groups);
                Err(VfsError::AccessDenied)
            }
        }
    })
}
