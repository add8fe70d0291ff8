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
//! The looks are file system calls: a letter that carries changes beneath
//! a watched folder says it may block (post.rs), so that an engine runs it
//! off the thread that serves sockets. The answers are kept for one batch
//! of changes, so that a watcher pays one look per folder however many
//! entries in it changed.

use std::collections::HashMap;
use std::sync::Arc;

use copyless_vfs::{FileHandle, Identity, Vfs};

use crate::access::{FILE_EXECUTE, FILE_LIST_DIRECTORY};
use crate::conn::connection::Connection;
use crate::file_table::Seen;
use crate::file_table::{DIRECTORY_DELETED, OVERFLOWED};
use crate::open::{current_path, OpenKind};
use crate::security::{folder_rights_for, Caller, Token};

/// FILE_TRAVERSE shares its bit with FILE_EXECUTE.
const FILE_TRAVERSE: u32 = FILE_EXECUTE;

/// Whether reporting `s` needs a look at the watcher's rights: a change
/// beneath the watched folder, not in it.
pub(crate) fn needs_look(s: &Seen) -> bool {
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
    vfs: Arc<dyn Vfs>,
    handle: Arc<FileHandle>,
    share: usize,
    /// The watched folder beneath the share root.
    path: String,
    token: Token,
}

/// Answers kept for one batch of changes.
#[derive(Default)]
struct Looks {
    watchers: HashMap<u64, Option<Watcher>>,
    /// By open and folder beneath its watched one.
    may_list: HashMap<(u64, String), bool>,
    /// What stored descriptors grant, by share and path; None where there
    /// is none.
    stored: HashMap<(usize, String), Option<u32>>,
}

impl Connection {
    /// Whether a change this connection makes may need a look on disk
    /// before its own watchers hear of it: one of its opens watches a
    /// tree. Other connections' watchers are told by letter, which says
    /// itself whether it may block (post.rs). An engine that serves
    /// sockets on one thread runs requests that change names, sizes,
    /// times or attributes elsewhere then.
    pub(crate) fn reports_need_looks(&self) -> bool {
        self.server.has_watchers()
            && self.sessions.values().any(|s| {
                s.opens.values().any(|o| match &o.kind {
                    OpenKind::File(f) => f.watch.as_ref().is_some_and(|w| w.watches_tree()),
                    OpenKind::Pipe(_) => false,
                })
            })
    }

    /// `seen` without the changes their watchers may not see.
    pub(crate) fn in_sight(&mut self, seen: Vec<Seen>) -> Vec<Seen> {
        if !seen.iter().any(needs_look) {
            return seen;
        }
        let mut looks = Looks::default();
        seen.into_iter()
            .filter(|s| match holder(&s.name) {
                Some(folder) if needs_look(s) => self.may_see(&mut looks, s.open, folder),
                _ => true,
            })
            .collect()
    }

    fn may_see(&self, looks: &mut Looks, open: u64, folder: String) -> bool {
        let key = (open, folder);
        if let Some(&answer) = looks.may_list.get(&key) {
            return answer;
        }
        let answer = match looks
            .watchers
            .entry(open)
            .or_insert_with(|| self.watcher(open))
        {
            Some(w) => {
                // The kernel's rules first: they are what most shares use.
                w.vfs.may_list_beneath(&w.handle, &key.1).unwrap_or(false)
                    && stored_rights_allow(w, &key.1, &mut looks.stored)
            }
            // The open is gone: nobody to tell.
            None => false,
        };
        looks.may_list.insert(key, answer);
        answer
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
    fn only_changes_beneath_the_watched_folder_need_a_look_off_the_ring() {
        let added = copyless_fscc::notify::action::ADDED;
        assert_eq!(holder("a\\b\\c.txt").as_deref(), Some("a/b"));
        assert_eq!(holder("c.txt"), None);
        let direct = Letter(Kind::Changed(vec![seen(added, "c.txt")]));
        assert!(
            !direct.may_block(),
            "entries of the watched folder need no look"
        );
        let deep = Letter(Kind::Changed(vec![
            seen(added, "c.txt"),
            seen(added, "private\\c.txt"),
        ]));
        assert!(deep.may_block());
        let lost = Letter(Kind::Changed(vec![seen(OVERFLOWED, "")]));
        assert!(!lost.may_block());
    }
}
