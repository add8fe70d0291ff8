//! From a parsed smb.conf to the copyless config that does the same, and
//! the list of what could not be carried over, and why.
//!
//! Only what `copyless check-config` accepts on this machine is written:
//! groups, accounts, share folders and keytabs are looked up as it looks
//! them up, and whatever is missing here (or would hand out root's
//! powers) is left out and said so. Where copyless's
//! defaults differ from Samba's (a share is writable unless it says
//! otherwise), the key is written out.

use std::collections::HashSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;

use toml::Value;

use copyless_core::audit::AuditKind;
use copyless_core::hosts::Network;

use super::address_lists;
use super::full_audit;
use super::host::{Host, LocalAddress};
use super::options::{self, Verdict};
use super::smbconf::{normalize, split_list, Origin, Param, ParseError, Section, SmbConf};
use crate::config::{
    check_share_name, dialect_named, is_model, is_server_name, ALL_DIALECTS, HOME_USER,
};

/// One line of the report: where, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Note {
    pub at: Origin,
    pub text: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.text)
    }
}

pub struct Conversion {
    /// The copyless config, as TOML.
    pub toml: String,
    /// What was not carried over (or only in part), in file order.
    pub notes: Vec<Note>,
    /// How many shares the config holds.
    pub shares: usize,
}

/// Options of `[global]` that become copyless keys.
const GLOBAL_KEYS: &[&str] = &[
    "netbiosname",
    "serverstring",
    "interfaces",
    "bindinterfacesonly",
    "smbports",
    "serversigning",
    "smbencrypt",
    "serversmbencrypt",
    "maptoguest",
    "guestaccount",
    "servermultichannelsupport",
    "changenotify",
    "serverminprotocol",
    "minprotocol",
    "servermaxprotocol",
    "maxprotocol",
    "protocol",
    "realm",
    "dedicatedkeytabfile",
    "kerberosmethod",
    "workgroup",
    "fruit:model",
    "multicastdnsregister",
    "loglevel",
    "debuglevel",
];

/// Options of a share that become copyless keys; in `[global]` they are
/// every share's default, as in Samba.
const SHARE_KEYS: &[&str] = &[
    "path",
    "directory",
    "readonly",
    "writeable",
    "writable",
    "writeok",
    "validusers",
    "readlist",
    "writelist",
    "guestok",
    "public",
    "browseable",
    "browsable",
    "hideunreadable",
    "forceuser",
    "forcegroup",
    "group",
    "vfsobjects",
    "vfsobject",
    "printable",
    "printok",
    "available",
    "hostsallow",
    "allowhosts",
    "hostsdeny",
    "denyhosts",
    "createmask",
    "createmode",
    "directorymask",
    "directorymode",
    "forcecreatemode",
    "forcedirectorymode",
    "inheritpermissions",
    "inheritacls",
    "comment",
    "accessbasedshareenum",
    "hidedotfiles",
    "hidefiles",
    "vetofiles",
    "deletevetofiles",
    "fullaudit:success",
    "fullaudit:failure",
    "recycle:repository",
    "recycle:exclude",
    "recycle:maxsize",
    "recycle:keeptree",
    "recycle:versions",
    "shadow:snapdir",
    "shadow:format",
];

const HOSTS_ALLOW: &[&str] = &["hostsallow", "allowhosts"];
const HOSTS_DENY: &[&str] = &["hostsdeny", "denyhosts"];

/// Reads the options of `conf` and writes the copyless config; `source`
/// names the smb.conf in the config's heading. Fails only where Samba
/// would refuse the file too (a value that is not a boolean, say).
pub fn convert(conf: &SmbConf, source: &str, host: &dyn Host) -> Result<Conversion, ParseError> {
    let mut c = Converter {
        host,
        notes: Vec::new(),
        seen: HashSet::new(),
    };
    for (at, text) in &conf.stray {
        c.note(
            at,
            format!("line `{text}` ignored: not `name = value` (Samba ignores it too)"),
        );
    }
    let global: Vec<&Param> = conf.global.params.iter().collect();
    for p in &global {
        if !GLOBAL_KEYS.contains(&p.key.as_str()) && !SHARE_KEYS.contains(&p.key.as_str()) {
            c.unmapped(p);
        }
    }
    let mut doc = Doc::default();
    c.globals(&global, &mut doc)?;
    let defaults: Vec<&Param> = global
        .iter()
        .copied()
        .filter(|p| SHARE_KEYS.contains(&p.key.as_str()))
        .collect();
    for share in &conf.shares {
        match c.share(conf, share, &defaults)? {
            Some(table) if table.homes => doc.homes = Some(table),
            Some(table) => doc.shares.push(table),
            None => {}
        }
    }
    c.guests(&global, &mut doc)?;
    Ok(Conversion {
        toml: doc.render(source),
        notes: in_file_order(c.notes),
        shares: doc.shares.len(),
    })
}

/// Notes sorted by line, each file's together (in the order the files
/// first come up); notes on one line keep their order.
fn in_file_order(mut notes: Vec<Note>) -> Vec<Note> {
    let mut files: Vec<Rc<str>> = Vec::new();
    for note in &notes {
        if !files.contains(&note.at.file) {
            files.push(note.at.file.clone());
        }
    }
    notes.sort_by_key(|n| (files.iter().position(|f| *f == n.at.file), n.at.line));
    notes
}

struct Converter<'h> {
    host: &'h dyn Host,
    notes: Vec<Note>,
    /// Notes already made: an option of `[global]` is read once per share.
    seen: HashSet<Note>,
}

impl Converter<'_> {
    fn note(&mut self, at: &Origin, text: String) {
        let note = Note {
            at: at.clone(),
            text,
        };
        if self.seen.insert(note.clone()) {
            self.notes.push(note);
        }
    }

    fn lacking(&mut self, p: &Param, why: impl fmt::Display) {
        self.note(
            &p.at,
            format!("option `{}` not carried over: {why}", p.name),
        );
    }

    fn in_part(&mut self, p: &Param, why: impl fmt::Display) {
        self.note(
            &p.at,
            format!("option `{}` carried over in part: {why}", p.name),
        );
    }

    /// An option no copyless key stands for.
    fn unmapped(&mut self, p: &Param) {
        match options::verdict(&p.key, &p.value) {
            Verdict::Same => {}
            Verdict::Lacking(why) => self.lacking(p, why),
        }
    }

    fn globals(&mut self, g: &[&Param], doc: &mut Doc) -> Result<(), ParseError> {
        if let Some(p) = last(g, &["netbiosname"]) {
            doc.top.extend(self.name_entry(p, "server_name"));
        }
        if let Some(p) = last(g, &["serverstring"]) {
            let text = self.one_line(p, "h");
            doc.top.push(Entry::new("server_string", text, &[p]));
        }
        if let Some(entry) = self.listen(g)? {
            doc.top.push(entry);
        }
        if let Some(p) = last(g, &["servermultichannelsupport"]) {
            doc.top.push(Entry::new("multichannel", boolean(p)?, &[p]));
        }
        if let Some(p) = last(g, &["changenotify"]) {
            doc.top.push(Entry::new("change_notify", boolean(p)?, &[p]));
        }
        if let Some(p) = last(g, &["serversigning"]) {
            let value = match normalize(&p.value).as_str() {
                "mandatory" | "required" | "force" | "forced" | "enforced" => "required",
                "default" | "auto" | "ifrequired" | "yes" | "true" | "1" | "on" | "enabled"
                | "desired" => "enabled",
                "no" | "false" | "0" | "off" | "disabled" => {
                    self.in_part(
                        p,
                        "copyless cannot switch signing off: it signs for the clients that ask",
                    );
                    "enabled"
                }
                _ => return Err(bad_value(p, "auto, mandatory, desired or disabled")),
            };
            doc.security.push(Entry::new("signing", value, &[p]));
        }
        for (keys, key, min) in [
            (
                &["serverminprotocol", "minprotocol"][..],
                "min_protocol",
                true,
            ),
            (
                &["servermaxprotocol", "maxprotocol", "protocol"],
                "max_protocol",
                false,
            ),
        ] {
            if let Some(p) = last(g, keys) {
                doc.security.extend(self.protocol(p, key, min)?);
            }
        }
        if let Some(p) = last(g, &["serversmbencrypt", "smbencrypt"]) {
            let value = match normalize(&p.value).as_str() {
                "required" | "mandatory" | "force" | "forced" | "enforced" => "required",
                "desired" => "desired",
                // copyless's "off" is Samba's if_required: offered to the
                // clients that ask, never demanded.
                "default" | "auto" | "ifrequired" | "yes" | "true" | "1" | "on" | "enabled" => {
                    "off"
                }
                "no" | "false" | "0" | "off" | "disabled" => {
                    self.in_part(p, "copyless still encrypts for the clients that ask");
                    "off"
                }
                _ => {
                    return Err(bad_value(
                        p,
                        "default, if_required, desired, required or off",
                    ))
                }
            };
            doc.security.push(Entry::new("encryption", value, &[p]));
        }
        if let Some(p) = last(g, &["guestaccount"]) {
            let account = self.host.account(&p.value);
            let refused = account
                .as_ref()
                .and_then(|a| crate::no_root::account_refusal("guest_account", &p.value, a));
            match (account, refused) {
                (Some(_), Some(why)) => {
                    self.lacking(p, format!("guests may not act as root in copyless: {why}"))
                }
                (Some(_), None) => {
                    doc.security
                        .push(Entry::new("guest_account", p.value.as_str(), &[p]))
                }
                (None, _) => self.lacking(
                    p,
                    format!(
                        "no Unix account {:?} on this machine; guests act as nobody until \
                         you make it and set guest_account",
                        p.value
                    ),
                ),
            }
        }
        doc.security.extend(self.hosts(g));
        if let Some(p) = last(g, &["loglevel", "debuglevel"]) {
            doc.log.push(Entry::new("level", log_level(p)?, &[p]));
        }
        self.kerberos(g, doc);
        self.discovery(g, doc)
    }

    /// `hosts_allow` and `hosts_deny` from the last `hosts allow` and
    /// `hosts deny` of `params`. What cannot be carried over is said, and
    /// left out so that no client Samba kept out is let in (a left-out
    /// `hosts deny` entry is the exception, and says so).
    fn hosts(&mut self, params: &[&Param]) -> Vec<Entry> {
        let set = |keys| last(params, keys).filter(|p| !split_list(&p.value).is_empty());
        let (allow_p, deny_p) = (set(HOSTS_ALLOW), set(HOSTS_DENY));
        let mut entries = Vec::new();
        let mut deny = Vec::new();
        if let Some(p) = deny_p {
            let c = address_lists::convert(&p.value);
            for (item, why) in &c.left_out {
                self.in_part(
                    p,
                    format!("`{item}` left out: {why}; copyless does not refuse it"),
                );
            }
            if !c.except.is_empty() {
                self.in_part(
                    p,
                    format!(
                        "`EXCEPT {}` left out: copyless has no exceptions, so the clients it \
                         names are refused too",
                        c.except.join(" ")
                    ),
                );
            }
            deny = c.networks;
        }
        if let Some(p) = allow_p {
            let c = address_lists::convert(&p.value);
            for (item, why) in &c.left_out {
                self.in_part(
                    p,
                    format!("`{item}` left out: {why}; copyless does not let it in"),
                );
            }
            let mut allow = c.networks;
            if !c.except.is_empty() {
                self.in_part(
                    p,
                    "`EXCEPT` cannot be carried over: copyless has no exceptions, so the whole \
                     list is left out rather than let in a client Samba kept out",
                );
                allow.clear();
            }
            // Samba lets local clients in whatever `hosts allow` says,
            // unless `hosts deny` names them.
            let mut added = Vec::new();
            for local in [Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()] {
                let on = |list: &[Network]| list.iter().any(|n| n.contains(local));
                if !on(&allow) && !on(&deny) {
                    allow.extend(Network::new(local, if local.is_ipv4() { 32 } else { 128 }));
                    added.push(local.to_string());
                }
            }
            if !added.is_empty() {
                self.in_part(
                    p,
                    format!(
                        "{} added: Samba lets local clients in whatever `hosts allow` says",
                        added.join(" and ")
                    ),
                );
            }
            if allow.is_empty() {
                self.lacking(
                    p,
                    "none of its entries is left: `hosts deny` alone decides who is refused",
                );
            } else {
                let shown: Vec<String> = allow.iter().map(ToString::to_string).collect();
                entries.push(Entry::new("hosts_allow", shown, &[p]));
            }
        }
        if let Some(p) = deny_p.filter(|_| !deny.is_empty()) {
            let shown: Vec<String> = deny.iter().map(ToString::to_string).collect();
            entries.push(Entry::new("hosts_deny", shown, &[p]));
        }
        entries
    }

    /// `key` from a NetBIOS-style name, in upper case as Samba takes it;
    /// None, and a note, for one copyless would refuse.
    fn name_entry(&mut self, p: &Param, key: &'static str) -> Option<Entry> {
        if is_server_name(&p.value) {
            return Some(Entry::new(key, p.value.to_uppercase(), &[p]));
        }
        self.lacking(
            p,
            format!("copyless takes 1 to 15 ASCII letters, digits, '-' and '_' as {key}"),
        );
        None
    }

    /// `[discovery]`: the workgroup Explorer files the server under, the
    /// model Finder's icon comes from (vfs_fruit's), and whether smbd
    /// registered with Avahi.
    fn discovery(&mut self, g: &[&Param], doc: &mut Doc) -> Result<(), ParseError> {
        if let Some(p) = last(g, &["workgroup"]) {
            doc.discovery.extend(self.name_entry(p, "workgroup"));
        }
        if let Some(p) = last(g, &["fruit:model"]) {
            if is_model(&p.value) {
                doc.discovery
                    .push(Entry::new("model", p.value.as_str(), &[p]));
            } else {
                self.lacking(
                    p,
                    "copyless takes 1 to 64 printable ASCII characters as model",
                );
            }
        }
        if let Some(p) = last(g, &["multicastdnsregister"]) {
            doc.discovery.push(Entry::new("mdns", boolean(p)?, &[p]));
        }
        Ok(())
    }

    /// `listen`, from the ports and, when smbd binds only to them, the
    /// interfaces; None for copyless's default, 0.0.0.0:445.
    fn listen(&mut self, g: &[&Param]) -> Result<Option<Entry>, ParseError> {
        let mut from = Vec::new();
        let mut ports = Vec::new();
        if let Some(p) = last(g, &["smbports"]) {
            from.push(p);
            for item in split_list(&p.value) {
                match item.parse::<u16>() {
                    Ok(139) => self.in_part(
                        p,
                        "port 139 left out: it is NetBIOS's session service, and copyless \
                         speaks SMB over TCP only",
                    ),
                    Ok(port) if port != 0 => {
                        if !ports.contains(&port) {
                            ports.push(port);
                        }
                    }
                    _ => self.in_part(p, format!("`{item}` left out: not a port")),
                }
            }
        }
        if ports.is_empty() {
            ports.push(445);
        }
        let bind_only = match last(g, &["bindinterfacesonly"]) {
            Some(p) => {
                from.push(p);
                boolean(p)?
            }
            None => false,
        };
        let mut addresses = Vec::new();
        match last(g, &["interfaces"]) {
            Some(p) if bind_only => {
                from.push(p);
                addresses = self.interface_addresses(p);
            }
            Some(p) => self.lacking(
                p,
                "without `bind interfaces only = yes` it steers only NetBIOS, which copyless \
                 does not do; copyless listens on every address, as smbd does",
            ),
            None => {}
        }
        if addresses.is_empty() {
            addresses.push(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        }
        let listen: Vec<String> = addresses
            .iter()
            .flat_map(|&ip| ports.iter().map(move |&port| SocketAddr::new(ip, port)))
            .map(|addr| addr.to_string())
            .collect();
        if listen == ["0.0.0.0:445"] {
            return Ok(None);
        }
        Ok(Some(Entry::new("listen", listen, &from)))
    }

    /// The addresses of the interfaces `interfaces` names, found as Samba
    /// finds them: by address, by network (ADDR/MASK) or by name (with
    /// `*` and `?` wildcards).
    fn interface_addresses(&mut self, p: &Param) -> Vec<IpAddr> {
        let local = self.host.addresses();
        let mut found = Vec::new();
        for item in split_list(&p.value) {
            // Samba's multichannel hints ("eth0;speed=...") are not needed.
            let name = item.split(';').next().unwrap_or_default();
            let matches = match_interface(name, &local);
            if matches.is_empty() {
                self.in_part(
                    p,
                    format!(
                        "`{name}` left out: no interface or address of this machine matches it"
                    ),
                );
            }
            for ip in matches {
                if is_link_local(ip) {
                    self.in_part(
                        p,
                        format!(
                            "{ip} of `{name}` left out: a link-local address, which copyless \
                             is not given"
                        ),
                    );
                } else if !found.contains(&ip) {
                    found.push(ip);
                }
            }
        }
        if found.is_empty() {
            self.lacking(
                p,
                "none of its interfaces is on this machine: copyless listens on every \
                 address (0.0.0.0) until you set `listen`",
            );
        }
        found
    }

    /// `[kerberos]`, when Samba had its service keys in a keytab that
    /// copyless can read here.
    fn kerberos(&mut self, g: &[&Param], doc: &mut Doc) {
        const SYSTEM_KEYTAB: &str = "/etc/krb5.keytab";
        let method = last(g, &["kerberosmethod"]);
        let dedicated = last(g, &["dedicatedkeytabfile"]);
        let realm = last(g, &["realm"]);
        let in_secrets = "Samba keeps its Kerberos keys in secrets.tdb, which copyless cannot \
                          read: write them to a keytab (`net ads keytab create`) and name it \
                          in [kerberos] keytab";
        let keytab = match method.map(|p| normalize(&p.value)).as_deref() {
            Some("dedicatedkeytab") => match dedicated {
                Some(file) => {
                    let path = file.value.trim_start_matches("FILE:");
                    let path = path.trim_start_matches("WRFILE:");
                    Some((path.to_string(), vec![method, Some(file)]))
                }
                None => {
                    if let Some(m) = method {
                        self.lacking(m, "no `dedicated keytab file` says which keytab");
                    }
                    None
                }
            },
            Some("systemkeytab" | "secretsandkeytab") => {
                Some((SYSTEM_KEYTAB.to_string(), vec![method]))
            }
            _ => {
                if let Some(m) = method {
                    self.lacking(m, in_secrets);
                }
                None
            }
        };
        let Some((path, from)) = keytab else {
            if let Some(file) = dedicated {
                self.lacking(
                    file,
                    "Samba reads it only with `kerberos method = dedicated keytab`",
                );
            }
            if let Some(r) = realm {
                self.lacking(
                    r,
                    format!("copyless takes Kerberos logons only with a keytab; {in_secrets}"),
                );
            }
            return;
        };
        let from: Vec<&Param> = from.into_iter().flatten().collect();
        if let Some(problem) = self.host.keytab_problem(&path) {
            for p in &from {
                self.lacking(p, &problem);
            }
            if let Some(r) = realm {
                self.lacking(r, format!("no usable keytab: {problem}"));
            }
            return;
        }
        doc.kerberos.push(Entry::new("keytab", path, &from));
        if let Some(r) = realm {
            // Samba takes the realm in upper case, whatever was written.
            doc.kerberos
                .push(Entry::new("realm", r.value.to_uppercase(), &[r]));
        }
    }

    /// `min_protocol` or `max_protocol` (`min`) from a Samba protocol
    /// name; nothing where it is copyless's own bound.
    fn protocol(
        &mut self,
        p: &Param,
        key: &'static str,
        min: bool,
    ) -> Result<Option<Entry>, ParseError> {
        let value = p.value.trim().to_ascii_uppercase();
        let bound = if min { ALL_DIALECTS.0 } else { ALL_DIALECTS.1 };
        if let Some(dialect) = dialect_named(&value, min) {
            return Ok((dialect != bound).then(|| Entry::new(key, value.as_str(), &[p])));
        }
        match value.as_str() {
            "DEFAULT" => {}
            "NT1" | "LANMAN1" | "LANMAN2" | "CORE" | "COREPLUS" if min => {}
            "NT1" | "LANMAN1" | "LANMAN2" | "CORE" | "COREPLUS" => {
                self.lacking(p, "copyless speaks no SMB1: it offers SMB2_02 to SMB3_11")
            }
            _ => return Err(bad_value(p, "a protocol such as SMB2, SMB3 or SMB3_11")),
        }
        Ok(None)
    }

    /// `[security] guest`: on when Samba made guests of failed logons, or
    /// when a share carried over lets guests in (Samba serves anonymous
    /// sessions on such shares whatever `map to guest` says).
    fn guests(&mut self, g: &[&Param], doc: &mut Doc) -> Result<(), ParseError> {
        let mut from: Vec<&Param> = Vec::new();
        if let Some(p) = last(g, &["maptoguest"]) {
            match normalize(&p.value).as_str() {
                "never" => {}
                "baduser" => {
                    from.push(p);
                    doc.security
                        .push(Entry::new("map_to_guest", "bad user", &[p]));
                }
                "badpassword" => {
                    from.push(p);
                    self.in_part(
                        p,
                        "copyless never makes a guest of a logon with a wrong password: guests \
                         log on anonymously (no user name)",
                    );
                }
                "baduid" => self.lacking(p, "it concerns domain members only"),
                _ => return Err(bad_value(p, "never, bad user, bad password or bad uid")),
            }
        }
        let guest_share = doc.shares.iter().any(|s| s.guest_ok);
        if !from.is_empty() || guest_share {
            let mut entry = Entry::new("guest", true, &from);
            if guest_share {
                entry.why.push("shares with guest ok".to_string());
            }
            doc.security.push(entry);
        }
        Ok(())
    }

    /// A `[[share]]` table, or None when the share is not carried over.
    fn share(
        &mut self,
        conf: &SmbConf,
        share: &Section,
        defaults: &[&Param],
    ) -> Result<Option<ShareTable>, ParseError> {
        let skip = |c: &mut Self, why: &str| {
            c.note(
                &share.at,
                format!("share [{}] not carried over: {why}", share.name),
            );
            Ok(None)
        };
        let homes = share.name.eq_ignore_ascii_case("homes");
        match share.name.to_lowercase().as_str() {
            "printers" => return skip(self, "copyless serves no printers"),
            "print$" => return skip(self, "printer drivers: copyless serves no printers"),
            "ipc$" => return skip(self, "copyless provides IPC$ itself"),
            _ => {}
        }
        let params = self.with_copies(conf, share, defaults);
        if let Some(p) = last(&params, &["available"]) {
            if !boolean(p)? {
                return skip(self, "switched off in smb.conf (`available = no`)");
            }
        }
        if let Some(p) = last(&params, &["printable", "printok"]) {
            if boolean(p)? {
                return skip(self, "a printer: copyless serves no printers");
            }
        }
        if let Err(why) = check_share_name(&share.name) {
            return skip(self, &why);
        }
        let Some(path) = last(&params, &["path", "directory"]) else {
            return skip(
                self,
                match homes {
                    true => {
                        "it has no path: copyless makes home folders in one folder \
                         (`path = \"/srv/homes/%U\"`), not in each user's home directory"
                    }
                    false => "it has no path",
                },
            );
        };
        // In [homes], the share's name (%S) is the user's (%U).
        let path_value = match homes {
            true => path.value.replace("%S", HOME_USER),
            false => path.value.clone(),
        };
        let left = match homes {
            true => path_value.replace(HOME_USER, ""),
            false => path_value.clone(),
        };
        if left.contains('%') || (homes && !path_value.contains(HOME_USER)) {
            return skip(
                self,
                match homes {
                    true => "its path must hold %U or %S alone, where each user's name goes",
                    false => {
                        "its path depends on the client (a `%` substitution); a copyless \
                         share has one path"
                    }
                },
            );
        }
        if !path_value.starts_with('/') {
            return skip(self, "its path is not absolute");
        }

        let own: Vec<&Param> = share.params.iter().filter(|p| p.key != "copy").collect();
        for p in own {
            if GLOBAL_KEYS.contains(&p.key.as_str()) && p.key != "smbencrypt" {
                self.lacking(p, "a global option, which Samba ignores in a share too");
            } else if !SHARE_KEYS.contains(&p.key.as_str()) {
                self.unmapped(p);
            }
        }

        let mut table = ShareTable {
            homes,
            ..ShareTable::default()
        };
        let e = &mut table.entries;
        if !homes {
            e.push(Entry::new("name", share.name.as_str(), &[]));
        }
        e.push(Entry::new("path", path_value.as_str(), &[path]));
        // Samba's shares are read only unless they say otherwise.
        let read_only = match last(&params, &["readonly", "writeable", "writable", "writeok"]) {
            Some(p) if p.key == "readonly" => Entry::new("read_only", boolean(p)?, &[p]),
            Some(p) => Entry::new("read_only", !boolean(p)?, &[p]),
            None => {
                let mut entry = Entry::new("read_only", true, &[]);
                entry.why.push("Samba's default".to_string());
                entry
            }
        };
        e.push(read_only);
        if let Some(p) = last(&params, &["validusers"]) {
            // A home share is its user's alone (Samba's `valid users = %S`);
            // [homes]' other names say who gets one.
            let users = match homes {
                true => self.principals_but_owner(p),
                false => self.principals(p),
            };
            match (users.is_empty(), homes) {
                (true, true) => {}
                (true, false) => {
                    self.in_part(p, "none of its names is left: nobody may use the share");
                    e.push(Entry::new("valid_users", users, &[p]));
                }
                (false, _) => e.push(Entry::new("valid_users", users, &[p])),
            }
        }
        for (keys, key) in [
            (["readlist"], "read_only_users"),
            (["writelist"], "write_users"),
        ] {
            if let Some(p) = last(&params, &keys) {
                let users = self.principals(p);
                if !users.is_empty() {
                    e.push(Entry::new(key, users, &[p]));
                }
            }
        }
        if let Some(p) = last(&params, &["guestok", "public"]) {
            table.guest_ok = boolean(p)?;
            e.push(Entry::new("guest_ok", table.guest_ok, &[p]));
        }
        // Each home share is listed to its user alone, whatever Samba
        // said of the entry named "homes", which copyless never lists.
        if let Some(p) = last(&params, &["browseable", "browsable"]).filter(|_| !homes) {
            e.push(Entry::new("browseable", boolean(p)?, &[p]));
        }
        if let Some(p) = last(&params, &["hideunreadable"]) {
            e.push(Entry::new("access_based_enumeration", boolean(p)?, &[p]));
        }
        if let Some(p) = last(&params, &["accessbasedshareenum"]) {
            e.push(Entry::new("access_based_share_enum", boolean(p)?, &[p]));
        }
        if let Some(p) = last(&params, &["forceuser"]) {
            if let Some(user) = self.force_user(p) {
                e.push(Entry::new("force_user", user, &[p]));
            }
        }
        if let Some(p) = last(&params, &["forcegroup", "group"]) {
            if let Some(group) = self.force_group(p) {
                e.push(Entry::new("force_group", group, &[p]));
            }
        }
        for (keys, key) in [
            (&["createmask", "createmode"][..], "create_mask"),
            (&["directorymask", "directorymode"], "directory_mask"),
            (&["forcecreatemode"], "force_create_mode"),
            (&["forcedirectorymode"], "force_directory_mode"),
        ] {
            if let Some(p) = last(&params, keys) {
                e.push(Entry::new(key, octal(p)?, &[p]));
            }
        }
        for (samba, key) in [
            ("inheritpermissions", "inherit_permissions"),
            ("inheritacls", "inherit_acls"),
        ] {
            if let Some(p) = last(&params, &[samba]) {
                e.push(Entry::new(key, boolean(p)?, &[p]));
            }
        }
        if let Some(p) = last(&params, &["comment"]) {
            e.push(Entry::new("comment", self.one_line(p, ""), &[p]));
        }
        // Samba hides dot files unless told not to; copyless, as Windows,
        // only when told to.
        e.push(match last(&params, &["hidedotfiles"]) {
            Some(p) => Entry::new("hide_dot_files", boolean(p)?, &[p]),
            None => {
                let mut entry = Entry::new("hide_dot_files", true, &[]);
                entry.why.push("Samba's default".to_string());
                entry
            }
        });
        for (samba, key) in [("hidefiles", "hide_files"), ("vetofiles", "veto_files")] {
            if let Some(p) = last(&params, &[samba]) {
                let names = self.name_list(p);
                if !names.is_empty() {
                    e.push(Entry::new(key, names, &[p]));
                }
            }
        }
        if let Some(p) = last(&params, &["deletevetofiles"]) {
            e.push(Entry::new("delete_veto_files", boolean(p)?, &[p]));
        }
        if let Some(p) = last(&params, &["vfsobjects", "vfsobject"]) {
            self.vfs_objects(p);
            let modules = split_list(&p.value);
            let has = |name: &str| modules.iter().any(|m| m.eq_ignore_ascii_case(name));
            if has("full_audit") {
                e.extend(self.full_audit(&params));
            }
            if has("recycle") {
                e.extend(self.recycle(p, &params));
            }
            if has("snapper") {
                e.push(Entry::new("snapshots", "btrfs", &[p]));
            } else if has("shadow_copy2") {
                e.extend(self.shadow_copy2(&params));
            }
        }
        // A share's own lists; those of [global] are checked when a client
        // connects. As in Samba, a list the share leaves out is [global]'s.
        let own = self.with_copies(conf, share, &[]);
        if last(&own, HOSTS_ALLOW).or(last(&own, HOSTS_DENY)).is_some() {
            table.entries.extend(self.hosts(&params));
        }
        // Last: what Samba itself would refuse in the share comes first;
        // for [homes], the folder the home folders are made in.
        let folder = match homes {
            true => homes_folder(&path_value),
            false => path_value.clone(),
        };
        if let Some(why) = self.host.folder_problem(&folder, &share.name) {
            return skip(self, &format!("its path {folder} {why}"));
        }
        Ok(Some(table))
    }

    /// The share's options, `[global]`'s first, with `copy = SHARE`
    /// replaced by the options of that share, as Samba does.
    fn with_copies<'a>(
        &mut self,
        conf: &'a SmbConf,
        share: &'a Section,
        defaults: &[&'a Param],
    ) -> Vec<&'a Param> {
        let mut params = defaults.to_vec();
        for p in &share.params {
            if p.key != "copy" {
                params.push(p);
                continue;
            }
            let source = conf.shares.iter().find(|s| {
                s.name.to_lowercase() == p.value.to_lowercase() && !std::ptr::eq(*s, share)
            });
            match source {
                Some(source) => params.extend(source.params.iter().filter(|q| q.key != "copy")),
                None => self.lacking(p, format!("there is no share [{}]", p.value)),
            }
        }
        params
    }

    /// The names of a Samba `hide files` or `veto files` list (`/`
    /// between them); what copyless cannot take is left out and said so.
    fn name_list(&mut self, p: &Param) -> Vec<String> {
        let mut names = Vec::new();
        for name in p.value.split('/').filter(|n| !n.is_empty()) {
            let substitutes = name.char_indices().any(|(i, c)| {
                c == '%' && name[i + 1..].starts_with(|n: char| n.is_ascii_alphabetic())
            });
            let why = if substitutes {
                Some("Samba's %-substitutions are not made")
            } else if copyless_core::NameRules::new(false, &[name.to_string()], &[], false).is_err()
            {
                Some("not a pattern of one name")
            } else {
                None
            };
            match why {
                Some(why) => self.in_part(p, format!("`{name}` left out: {why}")),
                None => names.push(name.to_string()),
            }
        }
        names
    }

    /// A share's comment as copyless takes it: one line of at most 256
    /// characters, Samba's `%` substitutions kept as written.
    /// A comment or server string: one line, at most 256 characters; the
    /// %-substitutions other than those copyless makes too (`expanded`:
    /// their letters) are said to be shown as written.
    fn one_line(&mut self, p: &Param, expanded: &str) -> String {
        let text: String = p
            .value
            .chars()
            .filter(|c| !c.is_control())
            .take(256)
            .collect();
        if text.chars().count() < p.value.chars().count() {
            self.in_part(p, "cut to one line of 256 characters");
        }
        let substitutes = |(i, c): (usize, char)| {
            c == '%'
                && text[i + 1..].starts_with(|n: char| {
                    (n.is_ascii_alphabetic() || n == '$') && !expanded.contains(n)
                })
        };
        if text.char_indices().any(substitutes) {
            self.in_part(p, "Samba's %-substitutions are shown as written");
        }
        text
    }

    /// Users and `@group`s of a Samba user list; what copyless cannot
    /// take is left out and said so.
    fn principals_but_owner(&mut self, p: &Param) -> Vec<String> {
        let others: Vec<String> = split_list(&p.value)
            .into_iter()
            .filter(|item| item != "%S" && item != "%U")
            .collect();
        let rest = Param {
            value: others.join(" "),
            ..p.clone()
        };
        self.principals(&rest)
    }

    fn principals(&mut self, p: &Param) -> Vec<String> {
        let mut names = Vec::new();
        for item in split_list(&p.value) {
            match self.principal(&item) {
                Ok(name) => {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                Err(why) => self.in_part(p, format!("`{item}` left out: {why}")),
            }
        }
        names
    }

    fn principal(&self, item: &str) -> Result<String, String> {
        if item.contains('%') {
            return Err("a `%` substitution, which copyless does not make".to_string());
        }
        if item.contains('\\') {
            return Err("a domain account; copyless has only its own users".to_string());
        }
        // `@group` (netgroup or Unix group), `+group` (Unix group) and
        // `&group` (netgroup): copyless knows Unix groups.
        let group = item.trim_start_matches(['@', '+', '&']);
        if group.len() == item.len() {
            return match crate::no_root::user_refusal("copyless", item) {
                Some(_) => Err("root: copyless lets no share hand out root's powers".to_string()),
                None => Ok(item.to_string()),
            };
        }
        if group.is_empty() {
            return Err("no group name".to_string());
        }
        match self.host.group_id(group) {
            None => Err(format!("no Unix group {group:?} on this machine")),
            Some(0) => Err(
                "the root group (gid 0): copyless lets no share hand out its rights".to_string(),
            ),
            Some(_) => Ok(format!("@{group}")),
        }
    }

    fn force_user(&mut self, p: &Param) -> Option<String> {
        let name = p.value.as_str();
        if name.is_empty() {
            return None;
        }
        if name.contains('%') {
            self.lacking(p, "a `%` substitution, which copyless does not make");
            return None;
        }
        let Some(account) = self.host.account(name) else {
            self.lacking(p, format!("no Unix account {name:?} on this machine"));
            return None;
        };
        if let Some(why) = crate::no_root::account_refusal("force_user", name, &account) {
            self.lacking(p, why);
            return None;
        }
        Some(name.to_string())
    }

    fn force_group(&mut self, p: &Param) -> Option<String> {
        // `+group`: Samba forces it only on the users who are members.
        let name = match p.value.strip_prefix('+') {
            Some(name) => {
                self.in_part(
                    p,
                    "copyless forces the group on every user, not only on its members",
                );
                name
            }
            None => p.value.as_str(),
        };
        if name.is_empty() {
            return None;
        }
        if name.contains('%') {
            self.lacking(p, "a `%` substitution, which copyless does not make");
            return None;
        }
        match self.host.group_id(name) {
            None => {
                self.lacking(p, format!("no Unix group {name:?} on this machine"));
                None
            }
            Some(gid) => match crate::no_root::group_refusal("force_group", name, gid) {
                Some(why) => {
                    self.lacking(p, why);
                    None
                }
                None => Some(name.to_string()),
            },
        }
    }

    /// The share's `audit`, from full_audit's lists of operations.
    fn full_audit(&mut self, params: &[&Param]) -> Option<Entry> {
        let success = last(params, &["fullaudit:success"]);
        let failure = last(params, &["fullaudit:failure"]);
        let kept = full_audit::kinds(
            success.map(|p| p.value.as_str()),
            failure.map(|p| p.value.as_str()),
        );
        if let (Some(p), false) = (success, kept.left_out.is_empty()) {
            self.in_part(
                p,
                format!(
                    "copyless keeps no event for {} (it keeps open, create, write, rename, \
                     delete, set_security and denied)",
                    kept.left_out.join(", ")
                ),
            );
        }
        if let Some(p) = failure.filter(|_| kept.kinds.contains(&AuditKind::Denied)) {
            self.in_part(
                p,
                "copyless keeps the operations refused (STATUS_ACCESS_DENIED) as `denied`, \
                 not every failure",
            );
        }
        let names: Vec<String> = kept.kinds.iter().map(|k| k.name().to_string()).collect();
        let from: Vec<&Param> = success.into_iter().chain(failure).collect();
        (!names.is_empty()).then(|| Entry::new("audit", names, &from))
    }

    /// vfs_recycle's options: the bin, its exclusions and size limit.
    fn recycle(&mut self, module: &Param, params: &[&Param]) -> Vec<Entry> {
        let mut e = vec![Entry::new("recycle", true, &[module])];
        if let Some(p) = last(params, &["recycle:repository"]) {
            match p.value.trim_end_matches('/') {
                ".recycle/%U" => {}
                ".recycle" => self.in_part(p, "copyless keeps each user's part in .recycle/USER"),
                _ => self.lacking(p, "copyless keeps its bin in .recycle/USER, in the share"),
            }
        }
        if let Some(p) = last(params, &["recycle:exclude"]) {
            let names: Vec<String> = split_list(&p.value.replace('|', " "));
            match copyless_core::recycle::RecycleBin::new(&names, 0, 0) {
                Ok(_) if !names.is_empty() => e.push(Entry::new("recycle_exclude", names, &[p])),
                Ok(_) => {}
                Err(why) => self.lacking(p, why),
            }
        }
        if let Some(p) = last(params, &["recycle:maxsize"]) {
            match p.value.trim().parse::<i64>() {
                Ok(bytes) if bytes >= 0 => e.push(Entry::new("recycle_max_size", bytes, &[p])),
                _ => self.lacking(p, "not a number of bytes"),
            }
        }
        for (key, what) in [
            (
                "recycle:keeptree",
                "copyless always keeps the folders a file was in",
            ),
            (
                "recycle:versions",
                "copyless always keeps every file of a name, numbered",
            ),
        ] {
            if let Some(p) = last(params, &[key]).filter(|p| !boolean(p).unwrap_or(true)) {
                self.in_part(p, what);
            }
        }
        e
    }

    /// shadow_copy2's snapshots: a folder of folders named by their
    /// @GMT token, as the default `shadow:format` names them.
    fn shadow_copy2(&mut self, params: &[&Param]) -> Option<Entry> {
        if let Some(p) = last(params, &["shadow:format"]) {
            if !p.value.trim().ends_with("GMT-%Y.%m.%d-%H.%M.%S") {
                self.lacking(
                    p,
                    "copyless finds snapshots by the @GMT-%Y.%m.%d-%H.%M.%S token in their names",
                );
                return None;
            }
        }
        let snapdir = last(params, &["shadow:snapdir"]);
        let folder = snapdir.map_or(".snapshots", |p| p.value.trim());
        if let Some(p) = snapdir.filter(|_| !folder.starts_with('/')) {
            self.in_part(p, "a folder not absolute is taken as in the share");
        }
        let from: Vec<&Param> = snapdir.into_iter().collect();
        Some(Entry::new("snapshots", format!("dir:{folder}"), &from))
    }

    fn vfs_objects(&mut self, p: &Param) {
        for module in split_list(&p.value) {
            match options::vfs_object(&module.to_lowercase()) {
                Ok(native) => self.note(
                    &p.at,
                    format!("option `{}` (`{module}`) needs nothing: {native}", p.name),
                ),
                Err(why) => self.note(
                    &p.at,
                    format!("option `{}` (`{module}`) not carried over: {why}", p.name),
                ),
            }
        }
    }
}

/// The last of `params` named one of `keys`: a later option overrides an
/// earlier one, as in Samba.
fn last<'a>(params: &[&'a Param], keys: &[&str]) -> Option<&'a Param> {
    params
        .iter()
        .rev()
        .find(|p| keys.contains(&p.key.as_str()))
        .copied()
}

/// `[log] level` for Samba's `log level` (its first number; the classes
/// that may follow are Samba's own): 0 and 1 as warning, since the failed
/// logons fail2ban reads are warnings, 2 to 4 as info, 5 and above as
/// debug.
fn log_level(p: &Param) -> Result<&'static str, ParseError> {
    let first = p.value.split_whitespace().next().unwrap_or_default();
    let n: u32 = first
        .parse()
        .map_err(|_| bad_value(p, "a number (and classes)"))?;
    Ok(match n {
        0 | 1 => "warning",
        2..=4 => "info",
        _ => "debug",
    })
}

/// A Samba boolean; anything else makes Samba refuse the file.
fn boolean(p: &Param) -> Result<bool, ParseError> {
    match normalize(&p.value).as_str() {
        "yes" | "true" | "1" | "on" => Ok(true),
        "no" | "false" | "0" | "off" => Ok(false),
        _ => Err(bad_value(p, "yes or no")),
    }
}

/// A mode as Samba reads it (octal, with or without a leading 0), written
/// as copyless's `"0664"`.
fn octal(p: &Param) -> Result<String, ParseError> {
    let v = p.value.trim();
    match u32::from_str_radix(v, 8) {
        Ok(mode) if mode <= 0o7777 => Ok(format!("{mode:04o}")),
        _ => Err(bad_value(p, "an octal mode such as 0664")),
    }
}

fn bad_value(p: &Param, expected: &str) -> ParseError {
    ParseError::at(
        &p.at,
        format!("`{} = {}`: expected {expected}", p.name, p.value),
    )
}

fn match_interface(entry: &str, local: &[LocalAddress]) -> Vec<IpAddr> {
    let pick = |keep: &dyn Fn(&LocalAddress) -> bool| -> Vec<IpAddr> {
        local.iter().filter(|l| keep(l)).map(|l| l.ip).collect()
    };
    if let Some((addr, mask)) = entry.split_once('/') {
        let Ok(ip) = addr.parse::<IpAddr>() else {
            return Vec::new();
        };
        // An address of this machine with its netmask, or a network.
        let exact = pick(&|l| l.ip == ip);
        if !exact.is_empty() {
            return exact;
        }
        let prefix = match mask.parse::<u8>() {
            Ok(bits) => bits,
            Err(_) => match mask.parse::<Ipv4Addr>() {
                Ok(m) => u32::from(m).count_ones() as u8,
                Err(_) => return Vec::new(),
            },
        };
        return pick(&|l| same_network(l.ip, ip, prefix));
    }
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return pick(&|l| l.ip == ip);
    }
    pick(&|l| wildcard_match(entry, &l.interface))
}

fn same_network(a: IpAddr, b: IpAddr, prefix: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(prefix.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(prefix.min(128)))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => false,
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// `*` (any run) and `?` (any one character), as in `interfaces = eth*`.
fn wildcard_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and where in the name it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// One `key = value` of the config, with the smb.conf options it comes from.
struct Entry {
    key: &'static str,
    value: Value,
    /// Where it comes from, for the comment beside it.
    why: Vec<String>,
}

impl Entry {
    fn new(key: &'static str, value: impl Into<Value>, from: &[&Param]) -> Entry {
        Entry {
            key,
            value: value.into(),
            why: from
                .iter()
                .map(|p| format!("{} ({})", p.name, p.at))
                .collect(),
        }
    }

    fn render(&self, out: &mut String) {
        out.push_str(&format!("{} = {}", self.key, self.value));
        if !self.why.is_empty() {
            let why = self.why.join(", ");
            // A comment ends at the line's end and may hold no control
            // characters; names and file names could.
            let why: String = why
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
            out.push_str(&format!("  # from {why}"));
        }
        out.push('\n');
    }
}

#[derive(Default)]
struct ShareTable {
    entries: Vec<Entry>,
    guest_ok: bool,
    /// `[homes]`.
    homes: bool,
}

/// The folder `[homes]` makes home folders in: its path up to the part
/// with %U.
fn homes_folder(path: &str) -> String {
    let mut folder = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part.contains(HOME_USER) {
            break;
        }
        folder.push('/');
        folder.push_str(part);
    }
    if folder.is_empty() {
        folder.push('/');
    }
    folder
}

#[derive(Default)]
struct Doc {
    top: Vec<Entry>,
    security: Vec<Entry>,
    log: Vec<Entry>,
    kerberos: Vec<Entry>,
    discovery: Vec<Entry>,
    shares: Vec<ShareTable>,
    homes: Option<ShareTable>,
}

impl Doc {
    fn render(&self, source: &str) -> String {
        let source: String = source
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let mut out = format!(
            "# copyless config converted from {source} by `copyless import smb.conf`,\n\
             # which listed what it could not carry over. Check it with\n\
             # `copyless check-config FILE`.\n"
        );
        for entry in &self.top {
            entry.render(&mut out);
        }
        for (header, entries) in [
            ("[security]", &self.security),
            ("[log]", &self.log),
            ("[kerberos]", &self.kerberos),
            ("[discovery]", &self.discovery),
        ] {
            if !entries.is_empty() {
                out.push_str(&format!("\n{header}\n"));
                for entry in entries {
                    entry.render(&mut out);
                }
            }
        }
        for share in &self.shares {
            out.push_str("\n[[share]]\n");
            for entry in &share.entries {
                entry.render(&mut out);
            }
        }
        if let Some(homes) = &self.homes {
            out.push_str("\n[homes]\n");
            for entry in &homes.entries {
                entry.render(&mut out);
            }
        }
        out
    }
}
