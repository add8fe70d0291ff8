//! SIGHUP: the configuration is read again, as at start (the file, then
//! the command line's overrides), and its shares are applied without
//! dropping a connection. An added share can be connected to at once; a
//! removed or changed one ends its tree connects at their next request
//! (clients connect again and get the new settings). What cannot change
//! while the server runs is named, to apply at the next start. A file
//! that does not load changes nothing.

use std::sync::Arc;

use copyless_core::Server;
use copyless_trace::Tracer;

use crate::config::{Config, ServeArgs};
use crate::systemd::Notifier;

pub struct Reloader {
    pub args: ServeArgs,
    /// The configuration in effect.
    pub current: Config,
    pub server: Arc<Server>,
    pub tracer: Arc<Tracer>,
    pub notifier: Option<Arc<Notifier>>,
}

impl Reloader {
    /// Reloads, saying on stderr what changed; tells systemd it is
    /// reloading, and ready again when done.
    pub fn reload(&mut self) {
        if let Some(n) = &self.notifier {
            n.reloading();
        }
        let said = match Config::from_serve_args(&self.args) {
            Ok(new) => {
                let said = self.apply(&new);
                self.current = new;
                said
            }
            Err(e) => vec![format!(
                "reload failed, the running configuration stays: {e}"
            )],
        };
        let summary = if said.is_empty() {
            "reloaded: nothing changed".to_string()
        } else {
            said.join("; ")
        };
        for line in &said {
            eprintln!("copyless: {line}");
        }
        if said.is_empty() {
            eprintln!("copyless: {summary}");
        }
        if let Some(n) = &self.notifier {
            n.ready(&summary);
        }
    }

    /// Applies `new`'s shares; returns a line per change.
    fn apply(&self, new: &Config) -> Vec<String> {
        let mut said = Vec::new();
        let shares = &self.server.shares;
        for old in &self.current.shares {
            let kept = new.shares.iter().any(|s| same_name(&s.name, &old.name));
            if let (false, Some((index, _))) = (kept, shares.find(&old.name)) {
                shares.put(index, None);
                self.server.share_changed(index, None);
                said.push(format!("share {} removed", old.name));
            }
        }
        for s in &new.shares {
            let old = self
                .current
                .shares
                .iter()
                .find(|o| same_name(&o.name, &s.name));
            if old == Some(s) {
                continue;
            }
            let (index, verb) = match shares.find(&s.name) {
                Some((index, _)) => (index, "changed"),
                None => (shares.next_index(), "added"),
            };
            match crate::serve::make_share(s, index, &self.tracer) {
                Ok(share) => {
                    let path = share.path.clone();
                    self.tracer.name_share(index, &s.name);
                    shares.put(index, Some(share));
                    self.server.share_changed(index, Some(&path));
                    said.push(format!("share {} {verb} ({path})", s.name));
                }
                Err(e) => said.push(format!("{e}; share {} not {verb}", s.name)),
            }
        }
        for key in restart_only_changes(&self.current, new) {
            said.push(format!(
                "{key} changed: takes effect when the server restarts"
            ));
        }
        said
    }
}

fn same_name(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The settings that differ and are read only at start.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let kerberos = |c: &Config| c.kerberos.as_ref().map(|k| format!("{k:?}"));
    [
        ("listen", old.listen != new.listen),
        ("state_dir", old.state_dir != new.state_dir),
        ("server_name", old.server_name != new.server_name),
        ("engine", old.engine != new.engine),
        ("multichannel", old.multichannel != new.multichannel),
        ("[security] signing", old.signing != new.signing),
        ("[security] encryption", old.encryption != new.encryption),
        ("[security] guest", old.guest != new.guest),
        (
            "[security] guest_account",
            old.guest_account != new.guest_account,
        ),
        ("[limits]", old.limits != new.limits),
        ("control", old.control != new.control),
        ("[trace]", old.trace_enabled != new.trace_enabled),
        ("[metrics]", {
            old.metrics_listen != new.metrics_listen
                || old.metrics_user_labels != new.metrics_user_labels
        }),
        ("[kerberos]", kerberos(old) != kerberos(new)),
        ("[discovery]", old.discovery != new.discovery),
    ]
    .into_iter()
    .filter_map(|(key, changed)| changed.then_some(key))
    .collect()
}
