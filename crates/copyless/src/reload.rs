//! SIGHUP: the configuration is read again, as at start (the file, then
//! the command line's overrides), and its shares are applied without
//! dropping a connection. An added share can be connected to at once; a
//! removed or changed one ends its tree connects at their next request
//! (clients connect again and get the new settings). Limits apply at once
//! (core/src/limits.rs says how). What cannot change while the server
//! runs is named, to apply at the next start. A file that does not load,
//! or does not pass the checks serve makes at start (validate.rs), changes
//! nothing.

use std::sync::Arc;

use copyless_auth::LiveUsers;
use copyless_core::Server;
use copyless_engine::LiveLimits;
use copyless_trace::Tracer;

use crate::config::{Config, Limits, ServeArgs};
use crate::share_keeper::ShareKeeper;
use crate::systemd::Notifier;

pub struct Reloader {
    pub args: ServeArgs,
    /// The users the shares are checked against, as at start.
    pub users: Arc<LiveUsers>,
    /// RLIMIT_NOFILE, which limits are fitted to as at start.
    pub descriptors: u64,
    pub engine_limits: Arc<LiveLimits>,
    /// The configuration in effect.
    pub current: Config,
    pub server: Arc<Server>,
    pub tracer: Arc<Tracer>,
    pub notifier: Option<Arc<Notifier>>,
    /// Keeps the shares in line with their folders; a reload serves again
    /// those it set aside.
    pub keeper: Arc<ShareKeeper>,
    /// Sweeps the recycle bins at once (recycle_sweeper.rs), as a reload
    /// may have shortened how long they keep files.
    pub recycle_sweeper: std::sync::mpsc::Sender<()>,
}

impl Reloader {
    /// Reloads, saying on stderr what changed; tells systemd it is
    /// reloading, and ready again when done.
    pub fn reload(&mut self) {
        if let Some(n) = &self.notifier {
            n.reloading();
        }
        let loaded = Config::from_serve_args(&self.args).and_then(|new| {
            let warnings = crate::validate::validate(&new, Ok(&self.users.users()))?;
            Ok((new, warnings))
        });
        let said = match loaded {
            Ok((new, warnings)) => {
                for warning in warnings {
                    eprintln!("copyless: {warning}");
                }
                let said = self
                    .keeper
                    .reloading(&self.server, &new.shares, || self.apply(&new));
                self.current = new;
                let _ = self.recycle_sweeper.send(());
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

    /// Applies `new`'s shares and limits; returns a line per change.
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
            let mut failed = None;
            let mut make = |index| {
                crate::serve::make_share(s, index, &self.tracer)
                    .map_err(|e| failed = Some(e))
                    .ok()
            };
            // A new share takes its index as it is added, so that a home
            // share made meanwhile cannot take it too.
            let (made, verb) = match shares.find(&s.name) {
                Some((index, _)) => {
                    let made = make(index).map(|share| {
                        shares.put(index, Some(share));
                        index
                    });
                    (made, "changed")
                }
                None => (shares.add(make).map(|(index, _)| index), "added"),
            };
            match (made, failed) {
                (Some(index), _) => {
                    let path = shares
                        .get(index)
                        .map(|sh| sh.path.clone())
                        .unwrap_or_default();
                    self.tracer.name_share(index, &s.name);
                    self.server.share_changed(index, Some(&path));
                    said.push(format!("share {} {verb} ({path})", s.name));
                }
                (None, e) => said.push(format!(
                    "{}; share {} not {verb}",
                    e.unwrap_or_default(),
                    s.name
                )),
            }
        }
        if new.limits != self.current.limits {
            said.extend(self.apply_limits(&new.limits));
        }
        if new.hosts != self.current.hosts {
            self.engine_limits.set_hosts(new.hosts.clone());
            said.push(
                "[security] hosts_allow and hosts_deny changed: for connections accepted \
                 from now on"
                    .to_string(),
            );
        }
        if new.log_level != self.current.log_level {
            copyless_engine::log_level::set_log_level(new.log_level);
            said.push(format!("[log] level is now {}", new.log_level.name()));
        }
        for key in restart_only_changes(&self.current, new) {
            said.push(format!(
                "{key} changed: takes effect when the server restarts"
            ));
        }
        said
    }

    fn apply_limits(&self, new: &Limits) -> Vec<String> {
        let budget = crate::descriptors::budget(self.descriptors, new);
        self.server
            .set_limits(crate::serve::core_limits(new, &budget));
        self.engine_limits
            .set(crate::serve::engine_limits(new, &budget));
        let mut said = limit_changes(&self.current.limits, new);
        if !budget.lowered.is_empty() {
            said.push(format!(
                "lowered to fit the descriptor limit {}: {}",
                self.descriptors,
                budget.lowered.join(", ")
            ));
        }
        said
    }
}

/// A line per changed limit, saying what it applies to.
fn limit_changes(old: &Limits, new: &Limits) -> Vec<String> {
    old.by_key()
        .into_iter()
        .zip(new.by_key())
        .filter(|((_, a), (_, b))| a != b)
        .map(|((key, a), (_, b))| {
            let when = match key {
                // Told to the client in NEGOTIATE, or framed by.
                "max_message_size"
                | "max_preauth_message_size"
                | "max_read_write"
                | "max_credits" => "for connections made from now on",
                "preauth_timeout_secs" => "for connections accepted from now on",
                // No watcher runs: it is started only when this is not 0.
                "max_local_watches" if old.max_local_watches == 0 => {
                    "takes effect when the server restarts"
                }
                _ => "in force now",
            };
            format!("limits.{key} {a} -> {b}: {when}")
        })
        .collect()
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
        ("change_notify", old.change_notify != new.change_notify),
        ("[security] signing", old.signing != new.signing),
        ("[security] encryption", old.encryption != new.encryption),
        ("[security] guest", old.guest != new.guest),
        (
            "[security] map_to_guest",
            old.map_to_guest != new.map_to_guest,
        ),
        (
            "[security] min_protocol and max_protocol",
            old.dialects != new.dialects,
        ),
        (
            "[security] guest_account",
            old.guest_account != new.guest_account,
        ),
        (
            "[security] quota_admins",
            old.quota_admins != new.quota_admins,
        ),
        ("control", old.control != new.control),
        ("[trace]", old.trace_enabled != new.trace_enabled),
        ("[metrics]", {
            old.metrics_listen != new.metrics_listen
                || old.metrics_user_labels != new.metrics_user_labels
        }),
        ("[kerberos]", kerberos(old) != kerberos(new)),
        ("[discovery]", old.discovery != new.discovery),
        ("[homes]", old.homes != new.homes),
        ("[audit]", old.audit_to != new.audit_to),
    ]
    .into_iter()
    .filter_map(|(key, changed)| changed.then_some(key))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_changed_limit_is_said_with_what_it_applies_to() {
        let old = Limits {
            max_local_watches: 0,
            ..Limits::default()
        };
        let new = Limits {
            max_open_files: 10,
            max_read_write: 1 << 20,
            preauth_timeout_secs: 5,
            max_open_files_total: Some(100),
            max_local_watches: 64,
            ..old.clone()
        };
        assert_eq!(
            limit_changes(&old, &new),
            [
                "limits.max_read_write 8388608 -> 1048576: for connections made from now on",
                "limits.max_open_files 16384 -> 10: in force now",
                "limits.max_open_files_total derived -> 100: in force now",
                "limits.preauth_timeout_secs 10 -> 5: for connections accepted from now on",
                "limits.max_local_watches 0 -> 64: takes effect when the server restarts",
            ]
        );
        let back = limit_changes(&new, &old);
        assert_eq!(
            back.last().map(String::as_str),
            Some("limits.max_local_watches 64 -> 0: in force now")
        );
        assert!(limit_changes(&old, &old).is_empty());
    }
}
