//! What the converter asks of the machine it runs on: accounts, groups,
//! share folders, network addresses and keytabs. `copyless check-config` looks the same
//! things up, so a config that names only what is here passes it. A trait,
//! so that the converter's tests do not depend on the machine.

use std::net::IpAddr;
use std::path::Path;

use copyless_auth::UnixAccount;

use crate::config::{default_state_dir, Config};

/// An address of one of the machine's network interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAddress {
    pub interface: String,
    pub ip: IpAddr,
    /// Length of the network prefix (from the netmask).
    pub prefix: u8,
}

pub trait Host {
    /// Unix account `name`, if there is one.
    fn account(&self, name: &str) -> Option<UnixAccount>;
    /// The gid of Unix group `name`, if there is one.
    fn group_id(&self, name: &str) -> Option<u32>;
    /// Why check-config would refuse `path` as the folder of share
    /// `name`, if it would.
    fn folder_problem(&self, path: &str, name: &str) -> Option<String>;
    /// Every address of every interface.
    fn addresses(&self) -> Vec<LocalAddress>;
    /// Why `[kerberos] keytab = path` would not pass check-config, if it
    /// would not.
    fn keytab_problem(&self, path: &str) -> Option<String>;
}

/// The machine the command runs on.
pub struct System;

impl Host for System {
    fn account(&self, name: &str) -> Option<UnixAccount> {
        copyless_auth::unix::lookup(name).ok()
    }

    fn group_id(&self, name: &str) -> Option<u32> {
        copyless_auth::unix::group_id(name)
    }

    fn folder_problem(&self, path: &str, name: &str) -> Option<String> {
        // The config written names no state_dir: the default one.
        crate::validate::folder_problem(Path::new(path), name, &default_state_dir())
    }

    fn addresses(&self) -> Vec<LocalAddress> {
        let Ok(list) = nix::ifaddrs::getifaddrs() else {
            return Vec::new();
        };
        list.filter_map(|entry| {
            let address = entry.address?;
            let mask = entry.netmask;
            let (ip, prefix) = if let Some(v4) = address.as_sockaddr_in() {
                let bits = mask
                    .and_then(|m| m.as_sockaddr_in().map(|m| u32::from(m.ip()).count_ones()))
                    .unwrap_or(32);
                (IpAddr::V4(v4.ip()), bits)
            } else if let Some(v6) = address.as_sockaddr_in6() {
                let bits = mask
                    .and_then(|m| m.as_sockaddr_in6().map(|m| u128::from(m.ip()).count_ones()))
                    .unwrap_or(128);
                (IpAddr::V6(v6.ip()), bits)
            } else {
                return None;
            };
            Some(LocalAddress {
                interface: entry.interface_name,
                ip,
                prefix: u8::try_from(prefix).unwrap_or(0),
            })
        })
        .collect()
    }

    fn keytab_problem(&self, path: &str) -> Option<String> {
        // What check-config says of a config holding just this keytab.
        let text = format!("[kerberos]\nkeytab = {}\n", toml::Value::from(path));
        Config::from_text(&text, Path::new("/copyless.toml"))
            .err()
            .map(|e| e.message().to_string())
    }
}
