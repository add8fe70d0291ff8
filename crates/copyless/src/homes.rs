//! Each user's home share (`[homes]`): made from the config's template
//! the first time the user connects to a share of their own name, its
//! folder created where it is missing (the user's, mode 0700, as
//! pam_mkhomedir makes a home), and offered to that user alone.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use copyless_core::{HomeShares, Principal, Server, Share};
use copyless_trace::Tracer;
use copyless_vfs::Identity;

use crate::config::{ShareConfig, HOME_USER};

pub struct Homes {
    template: ShareConfig,
    tracer: Arc<Tracer>,
    /// Each user's share (by name, folded), once made.
    made: Mutex<HashMap<String, (usize, Arc<Share>)>>,
}

impl Homes {
    pub fn new(template: ShareConfig, tracer: Arc<Tracer>) -> Homes {
        Homes {
            template,
            tracer,
            made: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration of `user`'s home share.
    fn config_for(&self, user: &str) -> ShareConfig {
        let t = &self.template;
        let path = t.path.to_string_lossy().replace(HOME_USER, user);
        let mut access = t.access.clone();
        access.valid_users = Some(vec![Principal::User(user.to_string())]);
        access.browseable = true;
        ShareConfig {
            name: user.to_string(),
            path: PathBuf::from(path),
            access,
            ..t.clone()
        }
    }
}

impl HomeShares for Homes {
    fn comment(&self) -> String {
        self.template.comment.clone()
    }

    /// `[homes] valid_users` names who gets one (everyone when it is
    /// not set).
    fn offered_to(&self, user: &str, who: &Identity) -> bool {
        let groups = match who {
            Identity::Unix(ids) => ids.groups.as_slice(),
            Identity::Server => &[],
        };
        self.template
            .access
            .valid_users
            .as_ref()
            .is_none_or(|list| copyless_core::server::includes(list, user, groups))
    }

    fn home(&self, server: &Server, user: &str, who: &Identity) -> Option<(usize, Arc<Share>)> {
        if !fit_for_a_folder(user) || !self.offered_to(user, who) {
            return None;
        }
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        let key = user.to_lowercase();
        if let Some((index, share)) = made.get(&key) {
            if server.shares.holds(*index, share) {
                return Some((*index, share.clone()));
            }
        }
        let config = self.config_for(user);
        if let Err(e) = make_folder(&config.path, who) {
            eprintln!(
                "copyless: home share of {user}: cannot make {}: {e}",
                config.path.display()
            );
            return None;
        }
        let added = server.shares.add(|index| {
            match crate::serve::make_share(&config, index, &self.tracer) {
                Ok(share) => Some(Share {
                    owner: Some(user.to_string()),
                    ..share
                }),
                Err(e) => {
                    eprintln!("copyless: {e}; home share of {user} not served");
                    None
                }
            }
        })?;
        self.tracer.name_share(added.0, user);
        made.insert(key, added.clone());
        Some(added)
    }
}

/// Whether a user name may stand as a folder's name.
fn fit_for_a_folder(user: &str) -> bool {
    !user.is_empty() && user != "." && user != ".." && !user.contains(['/', '\0'])
}

/// Makes the home folder at `path` if it is missing: `who`'s, mode 0700.
/// Its parent must be there; a folder already there is used as it is.
fn make_folder(path: &Path, who: &Identity) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => return Err(io::Error::other("it is there and not a folder")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::DirBuilder::new().mode(0o700).create(path)?;
    if let Identity::Unix(ids) = who {
        if let Err(e) = std::os::unix::fs::chown(path, Some(ids.uid), Some(ids.gid)) {
            let _ = fs::remove_dir(path);
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_cannot_be_folders_get_no_home() {
        for bad in ["", ".", "..", "a/b", "a\0b"] {
            assert!(!fit_for_a_folder(bad), "{bad:?}");
        }
        assert!(fit_for_a_folder("alice") && fit_for_a_folder("a.b"));
    }

    #[test]
    fn a_home_folder_is_made_once_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("alice");
        make_folder(&home, &Identity::Server).unwrap();
        let mode = fs::metadata(&home).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::write(home.join("kept"), b"x").unwrap();
        make_folder(&home, &Identity::Server).unwrap();
        assert!(home.join("kept").exists());
        fs::write(dir.path().join("file"), b"x").unwrap();
        assert!(make_folder(&dir.path().join("file"), &Identity::Server).is_err());
        assert!(make_folder(&dir.path().join("no/parent"), &Identity::Server).is_err());
    }
}
