//! What a watcher of a tree may hear of (CHANGE_NOTIFY with WATCH_TREE):
//! a change beneath the watched folder is reported only when the watcher
//! could have listed the folder that holds it. That takes, for the
//! identity the watching open acts as, search permission on the watched
//! folder and on every folder on the way and read permission on the
//! holding folder, by the kernel's rules (the backend's
//! `may_list_beneath`), and where a folder on the way has a stored NT
//! descriptor, FILE_TRAVERSE on the folders passed through and
//! FILE_LIST_DIRECTORY on the holding one for the watcher's token.
//!
//! A change the watcher may not see is left out without a word: answering
//! STATUS_NOTIFY_ENUM_DIR instead would still tell it that something
//! happened in a folder it cannot enter. Windows file systems make a like
//! check (the traverse callback of FsRtlNotifyFullChangeDirectory, "Security
//! checks on IRP_MJ_DIRECTORY_CONTROL" in Microsoft's IFS guide). Entries
//! of the watched folder itself need no look: the open was granted
//! FILE_LIST_DIRECTORY when it began to watch.
//!
//! The looks are file system calls: a batch of changes with some beneath
//! a watched folder waits for one call ([`Sighting`]) that looks at each
//! watcher's folders, and the batches after it wait behind it, so that
//! each watcher hears of changes in the order they were made. A watcher
//! pays one look per folder however many entries in it changed.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use copyless_vfs::{FileHandle, Identity, Vfs};

use crate::access::{FILE_EXECUTE, FILE_LIST_DIRECTORY};
use crate::conn::connection::Connection;
use crate::file_table::Seen;
use crate::file_table::{DIRECTORY_DELETED, OVERFLOWED};
use crate::intent::{Call, CallOp, Token as CallToken};
use crate::open::{current_path, OpenKind};
use crate::security::{folder_rights_for, Caller, Token};

/// FILE_TRAVERSE shares its bit with FILE_EXECUTE.
const FILE_TRAVERSE: u32 = FILE_EXECUTE;

/// Whether reporting `s` needs a look at the watcher's rights: a change
/// beneath the watched folder, not in it.
fn needs_look(s: &Seen) -> bool {
    s.action != OVERFLOWED && s.action != DIRECTORY_DELETED && s.name.contains('\\')
}

/// The folder holding a reported entry, beneath the watched one
/// (`/`-separated); None for an entry of the watched folder itself.
fn holder(name: &str) -> Option<String> {
    name.rsplit_once('\\')
        .map(|(dir, _)| dir.replace('\\', "/"))
}

/// What is needed to judge one watching open.
struct Watcher {
    open: u64,
    vfs: Arc<dyn Vfs>,
    handle: Arc<FileHandle>,
    share: usize,
    /// The watched folder beneath the share root.
    path: String,
    token: Token,
}

/// The looks one batch of changes needs ([`CallOp::Sight`]): for each
/// watcher, the folders beneath its watched one where something changed.
pub struct Sighting {
    asks: Vec<(Watcher, Vec<String>)>,
}

impl std::fmt::Debug for Sighting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let asks: Vec<_> = self.asks.iter().map(|(w, f)| (w.open, f)).collect();
        f.debug_struct("Sighting").field("asks", &asks).finish()
    }
}

impl Sighting {
    /// Looks, through the VFS: the folders each watcher may list, by
    /// open and folder.
    pub(crate) fn perform(self) -> Vec<(u64, String)> {
        let mut stored = HashMap::new();
        let mut visible = Vec::new();
        for (w, folders) in self.asks {
            for folder in folders {
                // The kernel's rules first: they are what most shares use.
                if w.vfs.may_list_beneath(&w.handle, &folder).unwrap_or(false)
                    && stored_rights_allow(&w, &folder, &mut stored)
                {
                    visible.push((w.open, folder));
                }
            }
        }
        visible
    }
}

/// Batches of changes on their way to this connection's watchers, in the
/// order they were made: the first may wait for its [`Sighting`].
#[derive(Default)]
pub(crate) struct Sightings {
    queue: VecDeque<Vec<Seen>>,
    /// The call the first batch waits for.
    looking: Option<CallToken>,
    /// Calls made since the last output.
    pub(crate) calls: Vec<Call>,
}

/// `seen` without the changes beneath a watched folder its watcher may
/// not see: those whose open and folder are not in `visible`.
fn in_sight(seen: Vec<Seen>, visible: &[(u64, String)]) -> Vec<Seen> {
    seen.into_iter()
        .filter(|s| match holder(&s.name) {
            Some(folder) if needs_look(s) => visible
                .iter()
                .any(|(open, f)| *open == s.open && *f == folder),
            _ => true,
        })
        .collect()
}

impl Connection {
    /// Changes that one request made (here or on another connection,
    /// whose letter brought them) go to their watchers on this
    /// connection, after those before them, once it is known which each
    /// watcher may see.
    pub(crate) fn sight(&mut self, seen: Vec<Seen>) {
        if seen.is_empty() {
            return;
        }
        self.sightings.queue.push_back(seen);
        self.next_sightings();
    }

    /// Hands on the batches that wait for nothing, until one needs a
    /// look, whose call is made.
    fn next_sightings(&mut self) {
        while self.sightings.looking.is_none() {
            let Some(seen) = self.sightings.queue.pop_front() else {
                return;
            };
            match self.sighting_of(&seen) {
                Some((vfs, sighting)) => {
                    let token = self.next_token;
                    self.next_token += 1;
                    self.sightings.calls.push(Call {
                        token,
                        vfs,
                        op: CallOp::Sight(Box::new(sighting)),
                    });
                    self.sightings.looking = Some(token);
                    self.sightings.queue.push_front(seen);
                }
                // Nothing to look at, or no watcher left to look for.
                None => self.changed_here(in_sight(seen, &[])),
            }
        }
    }

    /// The answer of the [`Sighting`] call `token`: the batch that waited
    /// for it goes on, with only what its watchers may see, and those
    /// behind it follow. False when no batch waits for `token`.
    pub(crate) fn sighted(&mut self, token: CallToken, visible: &[(u64, String)]) -> bool {
        if self.sightings.looking != Some(token) {
            return false;
        }
        self.sightings.looking = None;
        let seen = self.sightings.queue.pop_front().unwrap_or_default();
        self.changed_here(in_sight(seen, visible));
        self.next_sightings();
        true
    }

    /// The looks `seen` needs, with a VFS to make them through; None when
    /// it needs none, or no watcher it would need them for is left.
    fn sighting_of(&self, seen: &[Seen]) -> Option<(Arc<dyn Vfs>, Sighting)> {
        let mut asks: Vec<(Watcher, Vec<String>)> = Vec::new();
        for s in seen.iter().filter(|s| needs_look(s)) {
            let Some(folder) = holder(&s.name) else {
                continue;
            };
            match asks.iter_mut().find(|(w, _)| w.open == s.open) {
                Some((_, folders)) if folders.contains(&folder) => {}
                Some((_, folders)) => folders.push(folder),
                None => {
                    if let Some(w) = self.watcher(s.open) {
                        asks.push((w, vec![folder]));
                    }
                }
            }
        }
        let vfs = asks.first()?.0.vfs.clone();
        Some((vfs, Sighting { asks }))
    }

    /// The watching open `open`, as the checks need it.
    fn watcher(&self, open: u64) -> Option<Watcher> {
        let (session, o) = self
            .sessions
            .values()
            .find_map(|s| s.opens.get(&open).map(|o| (s, o)))?;
        let OpenKind::File(f) = &o.kind else {
            return None;
        };
        let path = current_path(&self.server, &f.key)?;
        let caller = Caller {
            config: &self.server.config,
            anonymous: session.anonymous,
            who: f.handle.who(),
        };
        Some(Watcher {
            open,
            vfs: f.vfs.clone(),
            handle: f.handle.clone(),
            share: f.key.0,
            path,
            token: caller.token(),
        })
    }
}

/// Whether the stored descriptors on the way to `folder` (beneath the
/// watched one) let the watcher through: FILE_TRAVERSE on the watched
/// folder and each one passed, FILE_LIST_DIRECTORY on `folder`. A folder
/// without a stored descriptor leaves it to the mode bits; one that does
/// not parse grants nothing, as everywhere else.
fn stored_rights_allow(
    w: &Watcher,
    folder: &str,
    stored: &mut HashMap<(usize, String), Option<u32>>,
) -> bool {
    let mut path = w.path.clone();
    let mut steps = vec![(path.clone(), FILE_TRAVERSE)];
    let comps: Vec<&str> = folder.split('/').collect();
    for (i, comp) in comps.iter().enumerate() {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(comp);
        let need = if i + 1 == comps.len() {
            FILE_LIST_DIRECTORY
        } else {
            FILE_TRAVERSE
        };
        steps.push((path.clone(), need));
    }
    steps.into_iter().all(|(path, need)| {
        let key = (w.share, path);
        let rights = stored.entry(key).or_insert_with_key(|(_, path)| {
            // Reached as the server: the watcher may search a folder it
            // may not read, and its descriptor still applies. Unreadable:
            // as if it granted nothing.
            folder_rights_for(w.vfs.as_ref(), &Identity::Server, &w.token, path).unwrap_or(Some(0))
        });
        rights.is_none_or(|r| r & need != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::post::{Kind, Letter};

    fn seen(action: u32, name: &str) -> Seen {
        Seen {
            connection: 1,
            open: 2,
            action,
            name: name.into(),
        }
    }

    #[test]
    fn only_changes_beneath_the_watched_folder_need_a_look() {
        let added = copyless_fscc::notify::action::ADDED;
        assert_eq!(holder("a\\b\\c.txt").as_deref(), Some("a/b"));
        assert_eq!(holder("c.txt"), None);
        let batch = || {
            vec![
                seen(added, "c.txt"),
                seen(added, "private\\c.txt"),
                seen(OVERFLOWED, ""),
            ]
        };
        assert_eq!(batch().iter().filter(|s| needs_look(s)).count(), 1);
        let names = |kept: Vec<Seen>| kept.into_iter().map(|s| s.name).collect::<Vec<_>>();
        // Unseen unless looked at and found visible to that open.
        assert_eq!(names(in_sight(batch(), &[])), ["c.txt", ""]);
        let other_open = [(3, "private".to_owned())];
        assert_eq!(names(in_sight(batch(), &other_open)), ["c.txt", ""]);
        let visible = [(2, "private".to_owned())];
        assert_eq!(
            names(in_sight(batch(), &visible)),
            ["c.txt", "private\\c.txt", ""]
        );
        // The look is a call: a letter that brings changes never blocks.
        assert!(!Letter(Kind::Changed(batch())).may_block());
    }
}
