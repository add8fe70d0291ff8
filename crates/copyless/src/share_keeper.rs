//! Shares whose folder vanished. A share holds its folder open from the
//! moment it is made, so a folder removed (or made again), or one whose
//! filesystem was unmounted, would go on being served through what is
//! gone: every request failing, or writes landing in a detached
//! filesystem. The keeper looks at every share's folder each second, and
//! whenever a tree connect finds its share's folder changed:
//!
//! - Gone, or a folder of another filesystem at the path (its own was
//!   unmounted and the mount point shows): the share is set aside. Tree
//!   connects get BAD_NETWORK_NAME, those made before end at their next
//!   request (NETWORK_NAME_DELETED), and the server says so once.
//! - Another folder of the same filesystem at the path (removed and made
//!   again): the share is made again from it at once.
//! - A share set aside whose folder is back on its own filesystem: made
//!   again. A reload makes every share set aside again from whatever
//!   folder is at its path then: the administrator's word.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use copyless_core::Server;
use copyless_trace::Tracer;
use copyless_vfs::RootState;

use crate::config::ShareConfig;

pub struct ShareKeeper {
    tracer: Arc<Tracer>,
    state: Mutex<State>,
}

struct State {
    /// The shares as the start or the last reload configured them.
    configs: Vec<ShareConfig>,
    /// The filesystem (device) of each share's folder when it was made,
    /// by folded name: where a folder set aside must come back to.
    devices: HashMap<String, u64>,
    /// Shares set aside, by folded name: the index each is served at.
    aside: HashMap<String, usize>,
}

impl ShareKeeper {
    pub fn new(configs: &[ShareConfig], tracer: Arc<Tracer>) -> ShareKeeper {
        ShareKeeper {
            tracer,
            state: Mutex::new(State {
                devices: devices(configs),
                configs: configs.to_vec(),
                aside: HashMap::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a reload's `apply` (which puts the new configuration's shares
    /// in place) with the keeper held still, then takes `configs` as the
    /// shares to keep: a share set aside that the reload did not make
    /// again is made from what is at its path now. Returns what `apply`
    /// said, and what the keeper did.
    pub fn reloading(
        &self,
        server: &Server,
        configs: &[ShareConfig],
        apply: impl FnOnce() -> Vec<String>,
    ) -> Vec<String> {
        let mut state = self.state();
        let mut said = apply();
        state.configs = configs.to_vec();
        state.devices = devices(configs);
        let aside: Vec<(String, usize)> = state.aside.drain().collect();
        for (key, index) in aside {
            if server.shares.find(&key).is_some() {
                continue;
            }
            let Some(config) = state.configs.iter().find(|c| fold(&c.name) == key) else {
                continue;
            };
            if !is_dir(&config.path) {
                said.push(format!(
                    "share {}: {} is still gone: not served",
                    config.name,
                    config.path.display()
                ));
                state.aside.insert(key, index);
                continue;
            }
            match self.make(server, config, index) {
                Ok(()) => said.push(format!(
                    "share {}: served again from {}",
                    config.name,
                    config.path.display()
                )),
                Err(e) => {
                    said.push(format!("{e}; share {} not served", config.name));
                    state.aside.insert(key, index);
                }
            }
        }
        said
    }

    fn make(&self, server: &Server, config: &ShareConfig, index: usize) -> Result<(), String> {
        let share = crate::serve::make_share(config, index, &self.tracer)?;
        let path = share.path.clone();
        server.shares.put(index, Some(share));
        server.share_changed(index, Some(&path));
        Ok(())
    }
}

impl copyless_core::ShareKeeper for ShareKeeper {
    fn check(&self, server: &Server) {
        let mut state = self.state();
        for (index, share) in server.shares.all() {
            let key = fold(&share.name);
            let Some(config) = state.configs.iter().find(|c| fold(&c.name) == key) else {
                continue;
            };
            let path = config.path.display().to_string();
            match share.vfs.root_state() {
                RootState::Current => {}
                why @ (RootState::Gone | RootState::Elsewhere) => {
                    server.shares.put(index, None);
                    server.share_changed(index, None);
                    let how = if why == RootState::Gone {
                        "is gone"
                    } else {
                        "is on another filesystem now (its own unmounted?)"
                    };
                    eprintln!(
                        "copyless: share {}: its folder {path} {how}: not served (tree connects \
                         get BAD_NETWORK_NAME) until it is back or the configuration is reloaded",
                        share.name
                    );
                    state.aside.insert(key, index);
                }
                RootState::Replaced => {
                    let config = config.clone();
                    match self.make(server, &config, index) {
                        Ok(()) => eprintln!(
                            "copyless: share {}: {path} is a new folder (the one served was \
                             removed): served from it; clients connected to the old one \
                             connect again",
                            share.name
                        ),
                        Err(e) => {
                            server.shares.put(index, None);
                            server.share_changed(index, None);
                            eprintln!("copyless: {e}; share {} not served", share.name);
                            state.aside.insert(key, index);
                        }
                    }
                }
            }
        }
        let aside: Vec<(String, usize)> =
            state.aside.iter().map(|(k, i)| (k.clone(), *i)).collect();
        for (key, index) in aside {
            let Some(config) = state.configs.iter().find(|c| fold(&c.name) == key).cloned() else {
                state.aside.remove(&key);
                continue;
            };
            let back = std::fs::metadata(&config.path)
                .is_ok_and(|m| m.is_dir() && state.devices.get(&key) == Some(&m.dev()));
            if !back {
                continue;
            }
            // A failure was said when the share was set aside; it is
            // tried again each second.
            if self.make(server, &config, index).is_ok() {
                eprintln!(
                    "copyless: share {}: its folder {} is back: served again",
                    config.name,
                    config.path.display()
                );
                state.aside.remove(&key);
            }
        }
    }
}

/// The device of each configured share's folder, by folded name.
fn devices(configs: &[ShareConfig]) -> HashMap<String, u64> {
    configs
        .iter()
        .filter_map(|c| Some((fold(&c.name), std::fs::metadata(&c.path).ok()?.dev())))
        .collect()
}

fn is_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

fn fold(name: &str) -> String {
    name.to_lowercase()
}
