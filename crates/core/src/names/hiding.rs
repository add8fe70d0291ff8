//! What a share hides and vetoes of the names in it (Samba's `hide dot
//! files`, `hide files`, `veto files` and `delete veto files`). A hidden
//! name is shown with FILE_ATTRIBUTE_HIDDEN, which Explorer and Finder
//! leave out unless asked to show hidden files; nothing is stored. A
//! vetoed name is neither listed nor opened, created or renamed to, as if
//! it could not be there: the clutter other systems leave (`.DS_Store`,
//! `Thumbs.db`, `._*`) stays out of sight and is never written.

use copyless_proto::status::{self, NtStatus};
use copyless_vfs::{attr, Identity, Kind, OpenRequest, Vfs, VfsError, VfsResult};

use crate::names::wildcard::Pattern;

/// A share's rules for names; the default hides and vetoes nothing.
#[derive(Default)]
pub struct NameRules {
    hide_dot_files: bool,
    hide: Vec<Pattern>,
    veto: Vec<Pattern>,
    delete_veto_files: bool,
}

impl std::fmt::Debug for NameRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameRules")
            .field("hide_dot_files", &self.hide_dot_files)
            .field("hidden_patterns", &self.hide.len())
            .field("vetoed_patterns", &self.veto.len())
            .field("delete_veto_files", &self.delete_veto_files)
            .finish()
    }
}

impl NameRules {
    /// Rules from patterns of one name each (`*` and `?` as wildcards,
    /// matched without regard to case); an error names a pattern that
    /// cannot be one.
    pub fn new(
        hide_dot_files: bool,
        hide: &[String],
        veto: &[String],
        delete_veto_files: bool,
    ) -> Result<NameRules, String> {
        let patterns = |list: &[String]| -> Result<Vec<Pattern>, String> {
            list.iter()
                .map(|p| {
                    if p.is_empty() || p.contains(['/', '\\']) || p.contains(char::is_control) {
                        return Err(format!("{p:?} is not a pattern of one name"));
                    }
                    Pattern::new(p).ok_or_else(|| format!("{p:?} is longer than a name may be"))
                })
                .collect()
        };
        Ok(NameRules {
            hide_dot_files,
            hide: patterns(hide)?,
            veto: patterns(veto)?,
            delete_veto_files,
        })
    }

    /// Whether `name` (one component) is vetoed.
    pub fn vetoes(&self, name: &str) -> bool {
        self.veto.iter().any(|p| p.matches(name))
    }

    /// Whether a folder that holds nothing but vetoed names may be
    /// removed, those names with it.
    pub fn deletes_vetoed(&self) -> bool {
        self.delete_veto_files
    }

    /// Whether `name` (one component) is shown hidden.
    pub fn hides(&self, name: &str) -> bool {
        (self.hide_dot_files && name.starts_with('.') && name != "." && name != "..")
            || self.hide.iter().any(|p| p.matches(name))
    }

    /// Whether any name is shown hidden (else the name need not be
    /// looked up to show an open's attributes).
    pub fn hides_any(&self) -> bool {
        self.hide_dot_files || !self.hide.is_empty()
    }

    /// The attributes `name` is shown with, given those it has.
    pub fn shown(&self, name: &str, attributes: u32) -> u32 {
        match self.hides(name) {
            true => (attributes & !attr::NORMAL) | attr::HIDDEN,
            false => attributes,
        }
    }

    /// Whether the folder open as `dir` may be removed: it is empty, or
    /// holds only vetoed names that go with it.
    pub fn may_remove_folder(
        &self,
        vfs: &dyn Vfs,
        dir: &copyless_vfs::FileHandle,
    ) -> VfsResult<bool> {
        if vfs.is_empty_dir(dir)? {
            return Ok(true);
        }
        if !self.delete_veto_files {
            return Ok(false);
        }
        let mut only_vetoed = true;
        vfs.each_name(dir, &mut |name| only_vetoed &= self.vetoes(name))?;
        Ok(only_vetoed)
    }

    /// Removes, as `who`, the vetoed names in the folder at `path` (a
    /// vetoed folder with all it holds) before the folder itself goes;
    /// what is not vetoed stays, and the folder's removal then fails as
    /// it would have.
    pub fn remove_vetoed(&self, vfs: &dyn Vfs, who: &Identity, path: &str) -> VfsResult<()> {
        let dir = vfs
            .open(&OpenRequest::look(who, path, Kind::Directory))?
            .handle;
        let mut vetoed = Vec::new();
        vfs.each_name(&dir, &mut |name| {
            if self.vetoes(name) {
                vetoed.push(name.to_owned());
            }
        })?;
        for name in vetoed {
            let child = format!("{path}/{name}");
            remove_tree(vfs, who, child.trim_start_matches('/'), 0)?;
        }
        Ok(())
    }

    /// Refuses a path beneath the share with a vetoed component, as
    /// Samba does: the name is not found, or the path to it.
    pub fn check_path(&self, path: &str) -> Result<(), NtStatus> {
        if self.veto.is_empty() {
            return Ok(());
        }
        let mut parts = path.split('/').filter(|c| !c.is_empty()).peekable();
        while let Some(part) = parts.next() {
            if self.vetoes(part) {
                return Err(match parts.peek() {
                    None => status::OBJECT_NAME_NOT_FOUND,
                    Some(_) => status::OBJECT_PATH_NOT_FOUND,
                });
            }
        }
        Ok(())
    }
}

/// How deep a vetoed folder is removed; deeper, its removal fails as a
/// folder not empty.
const MAX_DEPTH: usize = 64;

/// Removes `path` and, if a folder, everything in it.
fn remove_tree(vfs: &dyn Vfs, who: &Identity, path: &str, depth: usize) -> VfsResult<()> {
    match vfs.unlink(who, path, false) {
        Err(VfsError::IsADirectory) => {}
        other => return other,
    }
    if depth < MAX_DEPTH {
        let dir = vfs
            .open(&OpenRequest::look(who, path, Kind::Directory))?
            .handle;
        let names = vfs.list_names(&dir)?;
        drop(dir);
        for name in names {
            remove_tree(vfs, who, &format!("{path}/{name}"), depth + 1)?;
        }
    }
    vfs.unlink(who, path, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(hide: &[&str], veto: &[&str]) -> NameRules {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        NameRules::new(true, &list(hide), &list(veto), false).unwrap()
    }

    #[test]
    fn vetoed_names_are_not_found_and_neither_is_what_lies_beneath() {
        let r = rules(&[], &["Thumbs.db", "._*", ".DS_Store", "*.tmp"]);
        assert!(r.vetoes("thumbs.DB") && r.vetoes("._photo.jpg") && r.vetoes("x.TMP"));
        assert!(!r.vetoes("photo.jpg") && !r.vetoes("_photo"));
        assert_eq!(r.check_path("a/b/photo.jpg"), Ok(()));
        assert_eq!(
            r.check_path("a/Thumbs.db"),
            Err(status::OBJECT_NAME_NOT_FOUND)
        );
        assert_eq!(
            r.check_path(".DS_Store/x"),
            Err(status::OBJECT_PATH_NOT_FOUND)
        );
        assert_eq!(r.check_path(""), Ok(()));
    }

    #[test]
    fn hidden_names_are_shown_hidden_and_nothing_else_changes() {
        let r = rules(&["desktop.ini", "~$*"], &[]);
        assert_eq!(r.shown(".profile", attr::NORMAL), attr::HIDDEN);
        assert_eq!(
            r.shown("~$report.docx", attr::ARCHIVE),
            attr::ARCHIVE | attr::HIDDEN
        );
        assert_eq!(
            r.shown("Desktop.ini", attr::DIRECTORY),
            attr::DIRECTORY | attr::HIDDEN
        );
        assert_eq!(r.shown("report.docx", attr::ARCHIVE), attr::ARCHIVE);
        assert_eq!(r.shown("..", attr::DIRECTORY), attr::DIRECTORY);
        let plain = NameRules::default();
        assert_eq!(plain.shown(".profile", attr::NORMAL), attr::NORMAL);
        assert!(!plain.vetoes("Thumbs.db"));
    }

    #[test]
    fn patterns_of_more_than_one_name_are_refused() {
        for bad in ["", "a/b", "a\\b", "line\nbreak"] {
            assert!(NameRules::new(false, &[bad.to_string()], &[], false).is_err());
            assert!(NameRules::new(false, &[], &[bad.to_string()], false).is_err());
        }
        assert!(NameRules::new(false, &["x".repeat(256)], &[], false).is_err());
    }
}
