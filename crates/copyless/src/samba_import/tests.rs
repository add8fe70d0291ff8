//! The converter against made-up machines: what an smb.conf becomes, and
//! what is said about what it does not become.

use std::net::IpAddr;
use std::path::Path;

use copyless_auth::UnixAccount;

use super::convert::{convert, Conversion};
use super::host::{Host, LocalAddress};
use super::smbconf::{self, ParseError};
use crate::config::Config;

/// A machine with the accounts, groups, addresses and keytabs it is given.
struct Machine {
    accounts: &'static [(&'static str, u32)],
    groups: &'static [&'static str],
    addresses: Vec<LocalAddress>,
    keytabs: &'static [&'static str],
}

impl Host for Machine {
    fn account(&self, name: &str) -> Option<UnixAccount> {
        let &(name, uid) = self.accounts.iter().find(|a| a.0 == name)?;
        Some(UnixAccount {
            name: name.to_string(),
            uid,
            gid: uid,
            groups: vec![uid],
        })
    }

    /// root's group is 0, as everywhere; the others are numbered.
    fn group_id(&self, name: &str) -> Option<u32> {
        let index = self.groups.iter().position(|g| *g == name)?;
        Some(if name == "root" {
            0
        } else {
            1000 + index as u32
        })
    }

    /// Every folder exists here but `/missing...`.
    fn folder_problem(&self, path: &str, _name: &str) -> Option<String> {
        path.starts_with("/missing")
            .then(|| "does not exist".to_string())
    }

    fn addresses(&self) -> Vec<LocalAddress> {
        self.addresses.clone()
    }

    fn keytab_problem(&self, path: &str) -> Option<String> {
        (!self.keytabs.contains(&path)).then(|| format!("keytab {path}: cannot read"))
    }
}

fn address(interface: &str, ip: &str, prefix: u8) -> LocalAddress {
    LocalAddress {
        interface: interface.to_string(),
        ip: ip.parse::<IpAddr>().unwrap(),
        prefix,
    }
}

fn machine() -> Machine {
    Machine {
        accounts: &[
            ("root", 0),
            ("nobody", 65534),
            ("media", 1500),
            ("smbguest", 1600),
        ],
        groups: &["root", "staff", "family"],
        addresses: vec![
            address("lo", "127.0.0.1", 8),
            address("lo", "::1", 128),
            address("eth0", "192.168.1.10", 24),
            address("eth0", "fe80::1", 64),
            address("eth1", "10.0.0.5", 8),
        ],
        keytabs: &["/etc/samba/nas.keytab", "/etc/krb5.keytab"],
    }
}

fn try_convert(text: &str) -> Result<Conversion, ParseError> {
    let conf = smbconf::load(Path::new("smb.conf"), &mut |_| Ok(text.as_bytes().to_vec()))?;
    convert(&conf, "smb.conf", &machine())
}

fn convert_text(text: &str) -> Conversion {
    try_convert(text).unwrap_or_else(|e| panic!("{e}"))
}

fn notes(c: &Conversion) -> Vec<String> {
    c.notes.iter().map(ToString::to_string).collect()
}

/// The converted config as a TOML table.
fn table(c: &Conversion) -> toml::Table {
    c.toml.parse().unwrap_or_else(|e| panic!("{e}\n{}", c.toml))
}

fn shares(c: &Conversion) -> Vec<toml::Table> {
    match table(c).get("share") {
        Some(toml::Value::Array(shares)) => shares
            .iter()
            .map(|s| s.as_table().unwrap().clone())
            .collect(),
        _ => Vec::new(),
    }
}

fn strings(list: &[&str]) -> toml::Value {
    toml::Value::Array(list.iter().map(|&s| toml::Value::from(s)).collect())
}

const NAS: &str = r#"
# A family NAS, as a Samba admin might have it.
[global]
   workgroup = HOME
   netbios name = nas
   server string = %h server
   server role = standalone server
   security = user
   map to guest = Bad User
   guest account = smbguest
   passdb backend = tdbsam
   log file = /var/log/samba/log.%m
   server signing = mandatory
   server smb encrypt = desired
   server multi channel support = no
   load printers = no
   vfs objects = acl_xattr
   read only = no

[homes]
   comment = Home Directories
   browseable = no

[printers]
   path = /var/spool/samba
   printable = yes

[print$]
   path = /var/lib/samba/printers

[family]
   path = /srv/nas/family
   valid users = alice, @family +staff &nosuch
   force group = family
   create mask = 0660
   vfs objects = acl_xattr streams_xattr recycle
   recycle:repository = .recycle

[public]
   comment = Public files on %h
   path = /srv/public
   public = yes
   writeable = no
   write list = alice
   browsable = yes
   hide unreadable = yes
   access based share enum = yes

[media]
   comment = Films for 100% of us
   path = /srv/media
   read only = yes
   read list = bob
   force user = media
   hosts allow = 192.168.1.
"#;

#[test]
fn a_family_nas() {
    let c = convert_text(NAS);
    let t = table(&c);
    assert_eq!(t["server_name"].as_str(), Some("NAS"));
    // %h is the host name for copyless too.
    assert_eq!(t["server_string"].as_str(), Some("%h server"));
    assert_eq!(t["multichannel"].as_bool(), Some(false));
    assert!(t.get("listen").is_none(), "copyless's default");
    let security = t["security"].as_table().unwrap();
    assert_eq!(security["signing"].as_str(), Some("required"));
    assert_eq!(security["encryption"].as_str(), Some("desired"));
    assert_eq!(security["guest"].as_bool(), Some(true));
    assert_eq!(security["guest_account"].as_str(), Some("smbguest"));
    assert_eq!(security["map_to_guest"].as_str(), Some("bad user"));
    assert!(t.get("kerberos").is_none());
    let discovery = t["discovery"].as_table().unwrap();
    assert_eq!(discovery["workgroup"].as_str(), Some("HOME"));

    let shares = shares(&c);
    assert_eq!(shares.len(), 3);
    let family = &shares[0];
    assert_eq!(family["name"].as_str(), Some("family"));
    assert_eq!(family["path"].as_str(), Some("/srv/nas/family"));
    // `read only = no` in [global] is every share's default.
    assert_eq!(family["read_only"].as_bool(), Some(false));
    assert_eq!(
        family["valid_users"],
        strings(&["alice", "@family", "@staff"])
    );
    assert_eq!(family["force_group"].as_str(), Some("family"));
    assert_eq!(family["create_mask"].as_str(), Some("0660"));
    let public = &shares[1];
    assert_eq!(public["read_only"].as_bool(), Some(true));
    assert_eq!(public["comment"].as_str(), Some("Public files on %h"));
    assert_eq!(public["write_users"], strings(&["alice"]));
    assert_eq!(public["guest_ok"].as_bool(), Some(true));
    assert_eq!(public["browseable"].as_bool(), Some(true));
    assert_eq!(public["access_based_enumeration"].as_bool(), Some(true));
    assert_eq!(public["access_based_share_enum"].as_bool(), Some(true));
    let media = &shares[2];
    assert_eq!(media["read_only"].as_bool(), Some(true));
    assert_eq!(media["read_only_users"], strings(&["bob"]));
    assert_eq!(media["force_user"].as_str(), Some("media"));
    assert_eq!(media["comment"].as_str(), Some("Films for 100% of us"));
    assert_eq!(
        media["hosts_allow"],
        strings(&["192.168.1.0/24", "127.0.0.1", "::1"])
    );
    assert!(media.get("hosts_deny").is_none() && family.get("hosts_allow").is_none());

    assert_eq!(
        notes(&c),
        [
            "smb.conf:11: option `passdb backend` not carried over: copyless keeps users in \
             its own store: move them with `copyless user import --pdbedit`",
            "smb.conf:12: option `log file` not carried over: copyless logs to standard error \
             (the journal under systemd, which keeps and rotates it); how much it says is \
             `[log] level`",
            "smb.conf:17: option `vfs objects` (`acl_xattr`) needs nothing: copyless keeps the \
             NT ACLs clients set natively, in the xattr user.copyless.ntacl (ACLs Samba kept \
             in security.NTACL are not read)",
            "smb.conf:20: share [homes] not carried over: it has no path: copyless makes \
             home folders in one folder (`path = \"/srv/homes/%U\"`), not in each user's \
             home directory",
            "smb.conf:24: share [printers] not carried over: copyless serves no printers",
            "smb.conf:28: share [print$] not carried over: printer drivers: copyless serves \
             no printers",
            "smb.conf:33: option `valid users` carried over in part: `&nosuch` left out: no \
             Unix group \"nosuch\" on this machine",
            "smb.conf:36: option `vfs objects` (`acl_xattr`) needs nothing: copyless keeps the \
             NT ACLs clients set natively, in the xattr user.copyless.ntacl (ACLs Samba kept \
             in security.NTACL are not read)",
            "smb.conf:36: option `vfs objects` (`streams_xattr`) needs nothing: copyless keeps \
             alternate data streams natively, in user.copyless.stream.* xattrs (streams Samba \
             kept in user.DosStream.* are not read)",
            "smb.conf:36: option `vfs objects` (`recycle`) needs nothing: copyless keeps a \
             recycle bin natively: `recycle = true` moves deleted files to .recycle/USER/",
            "smb.conf:37: option `recycle:repository` carried over in part: copyless keeps \
             each user's part in .recycle/USER",
            "smb.conf:40: option `comment` carried over in part: Samba's %-substitutions are \
             shown as written",
            "smb.conf:55: option `hosts allow` carried over in part: 127.0.0.1 and ::1 added: \
             Samba lets local clients in whatever `hosts allow` says",
        ]
    );
}

#[test]
fn the_config_written_passes_check_config() {
    // Only names every machine has, since check-config looks them up,
    // and a folder that exists.
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[global]\nnetbios name = files\nguest account = nobody\nmap to guest = bad user\n\
         [s]\npath = {}\nvalid users = @users alice\nforce user = nobody\n\
         force group = users\nguest ok = yes\ncreate mask = 775\n\
         force directory mode = 02770\ninherit permissions = yes\ninherit acls = yes\n\
         veto files = /Thumbs.db/._*/\nhide files = /desktop.ini/\ndelete veto files = yes\n",
        dir.path().display()
    );
    let conf = smbconf::load(Path::new("smb.conf"), &mut |_| Ok(text.as_bytes().to_vec())).unwrap();
    let c = convert(&conf, "smb.conf", &super::host::System).unwrap();
    let config = Config::from_text(&c.toml, Path::new("/etc/copyless.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", c.toml));
    assert_eq!(config.server_name, "FILES");
    assert!(config.guest && config.map_to_guest);
    assert_eq!(config.shares.len(), 1);
    let share = &config.shares[0];
    assert!(share.read_only, "Samba's default");
    assert!(share.access.guest_ok);
    assert!(share.access.force_user.is_some());
    assert_eq!(
        share.access.force_group,
        copyless_auth::unix::group_id("users")
    );
    let m = share.modes;
    assert_eq!(
        (m.create_mask, m.force_directory_mode, m.directory_mask),
        (0o775, 0o2770, 0o755)
    );
    assert!(m.inherit_permissions && m.inherit_acls);
    let names = &share.names;
    assert!(names.hide_dot_files, "Samba's default");
    assert!(names.delete_veto_files);
    assert_eq!(names.veto_files, ["Thumbs.db", "._*"]);
    assert_eq!(names.hide_files, ["desktop.ini"]);
    crate::validate::validate(&config, Err(String::new())).unwrap();
    // Each key says where it came from.
    assert!(
        c.toml
            .contains("force_user = \"nobody\"  # from force user (smb.conf:8)\n"),
        "{}",
        c.toml
    );
    assert!(c
        .toml
        .contains("read_only = true  # from Samba's default\n"));
}

#[test]
fn root_and_folders_check_config_refuses_are_left_out() {
    let c = convert_text(
        "[s]\npath = /s\nvalid users = root @root alice\nforce user = root\n\
         force group = root\n[gone]\npath = /missing/x\n",
    );
    let s = shares(&c);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["valid_users"], strings(&["alice"]));
    assert!(s[0].get("force_user").is_none() && s[0].get("force_group").is_none());
    let n = notes(&c);
    for said in [
        "smb.conf:3: option `valid users` carried over in part: `root` left out: root",
        "smb.conf:3: option `valid users` carried over in part: `@root` left out: the root \
         group",
        "smb.conf:4: option `force user` not carried over: force_user \"root\" is root",
        "smb.conf:5: option `force group` not carried over: force_group: \"root\" is the root \
         group",
        "smb.conf:6: share [gone] not carried over: its path /missing/x does not exist",
    ] {
        assert!(
            n.iter().any(|note| note.starts_with(said)),
            "{said}\n{n:#?}"
        );
    }
}

#[test]
fn what_check_config_would_refuse_is_left_out() {
    let c = convert_text(
        "[global]\nnetbios name = a.very.long.name.indeed\nguest account = root\n\
         [s]\npath = /s\nforce user = nobody-here\nforce group = +nogroup\n\
         valid users = @nogroup DOMAIN\\bob %U\n\
         [bad/name]\npath = /b\n[rel]\npath = srv/rel\n[per-user]\npath = /home/%U\n\
         [nopath]\ncomment = x\n[off]\npath = /off\navailable = no\n[IPC$]\npath = /tmp\n",
    );
    let s = shares(&c);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["valid_users"], strings(&[]));
    assert!(s[0].get("force_user").is_none() && s[0].get("force_group").is_none());
    let t = table(&c);
    assert!(t.get("server_name").is_none() && t.get("security").is_none());
    let n = notes(&c);
    let expected = [
        "smb.conf:2: option `netbios name` not carried over: copyless takes 1 to 15 ASCII",
        "smb.conf:3: option `guest account` not carried over: guests may not act as root",
        "smb.conf:6: option `force user` not carried over: no Unix account \"nobody-here\"",
        "smb.conf:7: option `force group` carried over in part: copyless forces the group on \
         every user",
        "smb.conf:7: option `force group` not carried over: no Unix group \"nogroup\"",
        "smb.conf:8: option `valid users` carried over in part: `@nogroup` left out: no Unix \
         group \"nogroup\" on this machine",
        "smb.conf:8: option `valid users` carried over in part: `DOMAIN\\bob` left out: a \
         domain account",
        "smb.conf:8: option `valid users` carried over in part: `%U` left out: a `%` \
         substitution",
        "smb.conf:8: option `valid users` carried over in part: none of its names is left: \
         nobody may use the share",
        "smb.conf:9: share [bad/name] not carried over: share name \"bad/name\" contains the \
         invalid character '/'",
        "smb.conf:11: share [rel] not carried over: its path is not absolute",
        "smb.conf:13: share [per-user] not carried over: its path depends on the client",
        "smb.conf:15: share [nopath] not carried over: it has no path",
        "smb.conf:17: share [off] not carried over: switched off in smb.conf",
        "smb.conf:20: share [IPC$] not carried over: copyless provides IPC$ itself",
    ];
    assert_eq!(n.len(), expected.len(), "{n:#?}");
    for (note, start) in n.iter().zip(expected) {
        assert!(
            note.starts_with(start),
            "{note:?} does not start with {start:?}"
        );
    }
}

#[test]
fn read_only_and_its_synonyms() {
    let c = convert_text(
        "[a]\npath=/a\n[b]\npath=/b\nwriteable = yes\n[c]\npath=/c\nwrite ok = 1\n\
         read_only = true\n[d]\npath=/d\nReadOnly = No\n[e]\npath=/e\nwritable = off\n",
    );
    let read_only: Vec<bool> = shares(&c)
        .iter()
        .map(|s| s["read_only"].as_bool().unwrap())
        .collect();
    assert_eq!(read_only, [true, false, true, false, true]);
    assert!(c.notes.is_empty(), "{:?}", notes(&c));
}

#[test]
fn samba_refuses_what_is_not_a_boolean_and_so_do_we() {
    let Err(e) = try_convert("[s]\npath = /s\n\nread only = maybe\n") else {
        panic!("converted");
    };
    assert_eq!(
        e.to_string(),
        "smb.conf:4: `read only = maybe`: expected yes or no"
    );
    let Err(e) = try_convert("[global]\nserver signing = sometimes\n") else {
        panic!("converted");
    };
    assert!(e
        .to_string()
        .starts_with("smb.conf:2: `server signing = sometimes`"));
    let Err(e) = try_convert("map to guest = maybe\n") else {
        panic!("converted");
    };
    assert!(e.to_string().starts_with("smb.conf:1: "));
}

#[test]
fn signing_and_encryption() {
    let security = |text: &str| {
        let c = convert_text(text);
        let t = table(&c);
        let s = t.get("security").and_then(|s| s.as_table()).cloned();
        let get = |key: &str| {
            s.as_ref()
                .and_then(|s| s.get(key))
                .and_then(|v| v.as_str().map(str::to_string))
        };
        (get("signing"), get("encryption"), notes(&c))
    };
    let (signing, encryption, notes) = security("server signing = auto\nsmb encrypt = auto\n");
    assert_eq!(signing.as_deref(), Some("enabled"));
    assert_eq!(encryption.as_deref(), Some("off"));
    assert!(notes.is_empty(), "{notes:?}");
    let (signing, encryption, _) =
        security("server signing = Required\nserver smb encrypt = mandatory\n");
    assert_eq!(signing.as_deref(), Some("required"));
    assert_eq!(encryption.as_deref(), Some("required"));
    let (signing, encryption, notes) =
        security("server signing = disabled\nserver smb encrypt = off\n");
    assert_eq!(signing.as_deref(), Some("enabled"));
    assert_eq!(encryption.as_deref(), Some("off"));
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("smb.conf:1: option `server signing` carried over in part"));
    // Unset, copyless's own defaults stand (signing required).
    let (signing, encryption, _) = security("workgroup = X\n");
    assert_eq!((signing, encryption), (None, None));
    // In a share, encryption cannot be carried over: copyless's is global.
    let c = convert_text("[s]\npath = /s\nsmb encrypt = required\n");
    assert!(table(&c).get("security").is_none());
    assert!(c.notes[0].text.contains("for the whole server"));
}

#[test]
fn guests() {
    let guest = |text: &str| {
        let c = convert_text(text);
        let t = table(&c);
        t.get("security")
            .and_then(|s| s.get("guest"))
            .and_then(toml::Value::as_bool)
    };
    // A guest share needs guests, whatever `map to guest` says.
    assert_eq!(
        guest("map to guest = never\n[p]\npath=/p\nguest ok = yes\n"),
        Some(true)
    );
    assert_eq!(guest("map to guest = bad password\n"), Some(true));
    assert_eq!(guest("map to guest = never\n[p]\npath=/p\n"), None);
    let c = convert_text("map to guest = bad password\n");
    assert!(notes(&c)[0].contains("never makes a guest of a logon with a wrong password"));
}

#[test]
fn listen_addresses() {
    let listen = |text: &str| {
        let c = convert_text(text);
        let list = table(&c).get("listen").cloned();
        (list, notes(&c))
    };
    let (list, notes) = listen(
        "interfaces = lo eth0 192.168.1.0/24 10.0.0.5/255.0.0.0 eth9 \"eth1;speed=1000\"\n\
         bind interfaces only = yes\nsmb ports = 445 139 4445\n",
    );
    assert_eq!(
        list,
        Some(strings(&[
            "127.0.0.1:445",
            "127.0.0.1:4445",
            "[::1]:445",
            "[::1]:4445",
            "192.168.1.10:445",
            "192.168.1.10:4445",
            "10.0.0.5:445",
            "10.0.0.5:4445",
        ]))
    );
    assert_eq!(
        notes,
        [
            "smb.conf:1: option `interfaces` carried over in part: fe80::1 of `eth0` left \
             out: a link-local address, which copyless is not given",
            "smb.conf:1: option `interfaces` carried over in part: `eth9` left out: no \
             interface or address of this machine matches it",
            "smb.conf:3: option `smb ports` carried over in part: port 139 left out: it is \
             NetBIOS's session service, and copyless speaks SMB over TCP only",
        ]
    );
    let (list, _) = listen("interfaces = eth*\nbind interfaces only = yes\n");
    assert_eq!(list, Some(strings(&["192.168.1.10:445", "10.0.0.5:445"])));
    // Without `bind interfaces only`, smbd listens everywhere.
    let (list, notes) = listen("interfaces = eth0\nsmb ports = 4445\n");
    assert_eq!(list, Some(strings(&["0.0.0.0:4445"])));
    assert!(notes[0].starts_with("smb.conf:1: option `interfaces` not carried over: without"));
    let (list, notes) = listen("interfaces = 172.16.0.1\nbind interfaces only = yes\n");
    assert_eq!(list, None);
    assert!(
        notes[1].contains("copyless listens on every address"),
        "{notes:?}"
    );
}

#[test]
fn kerberos() {
    let c = convert_text(
        "security = ads\nrealm = example.com\nkerberos method = dedicated keytab\n\
         dedicated keytab file = FILE:/etc/samba/nas.keytab\n",
    );
    let t = table(&c);
    let k = t["kerberos"].as_table().unwrap();
    assert_eq!(k["keytab"].as_str(), Some("/etc/samba/nas.keytab"));
    assert_eq!(k["realm"].as_str(), Some("EXAMPLE.COM"));
    assert_eq!(notes(&c).len(), 1, "security = ads: {:?}", notes(&c));

    let c = convert_text("realm = EXAMPLE.COM\nkerberos method = system keytab\n");
    assert_eq!(
        table(&c)["kerberos"]["keytab"].as_str(),
        Some("/etc/krb5.keytab")
    );

    // Keys in secrets.tdb, or a keytab not on this machine: no [kerberos].
    for text in [
        "realm = EXAMPLE.COM\n",
        "realm = EXAMPLE.COM\nkerberos method = secrets only\n",
        "realm = EXAMPLE.COM\nkerberos method = dedicated keytab\n\
         dedicated keytab file = /nowhere.keytab\n",
    ] {
        let c = convert_text(text);
        assert!(table(&c).get("kerberos").is_none(), "{text}");
        let n = notes(&c);
        assert!(
            n.iter()
                .any(|n| n.starts_with("smb.conf:1: option `realm` not carried over")),
            "{text}: {n:?}"
        );
    }
}

#[test]
fn copy_and_global_share_defaults() {
    let c = convert_text(
        "[global]\nbrowseable = no\nforce user = media\n\
         [base]\npath = /base\nwriteable = yes\nvalid users = alice\n\
         [derived]\ncopy = base\npath = /derived\nbrowseable = yes\n\
         [lost]\ncopy = nothere\npath = /lost\n",
    );
    let s = shares(&c);
    assert_eq!(s.len(), 3);
    assert_eq!(s[1]["path"].as_str(), Some("/derived"));
    assert_eq!(s[1]["read_only"].as_bool(), Some(false));
    assert_eq!(s[1]["valid_users"], strings(&["alice"]));
    assert_eq!(s[1]["browseable"].as_bool(), Some(true));
    assert_eq!(s[0]["browseable"].as_bool(), Some(false));
    assert_eq!(s[2]["force_user"].as_str(), Some("media"));
    assert_eq!(
        notes(&c),
        ["smb.conf:13: option `copy` not carried over: there is no share [nothere]"]
    );
}

#[test]
fn odd_lines_and_options_in_the_wrong_place() {
    let c = convert_text("[s]\npath = /s\nnetbios name = X\njust words\n");
    assert_eq!(
        notes(&c),
        [
            "smb.conf:3: option `netbios name` not carried over: a global option, which \
             Samba ignores in a share too",
            "smb.conf:4: line `just words` ignored: not `name = value` (Samba ignores it too)",
        ]
    );
}

#[test]
fn share_names_with_toml_specials_are_quoted() {
    let c = convert_text("[My \"Music\" \\ files]\npath = /srv/mu\"sic\n");
    // A backslash is not allowed in a share name: only the path is kept.
    assert!(shares(&c).is_empty());
    let c = convert_text("[Music & Film's]\npath = /srv/mu\"sic\\x\n");
    let s = shares(&c);
    assert_eq!(s[0]["name"].as_str(), Some("Music & Film's"));
    assert_eq!(s[0]["path"].as_str(), Some("/srv/mu\"sic\\x"));
}

#[test]
fn discovery_settings_carry_over() {
    let c = convert_text(
        "[global]\nworkgroup = family\nfruit:model = MacSamba\nmulticast dns register = no\n\
         [s]\npath = /s\nfruit:model = Xserve\n",
    );
    let discovery = table(&c)["discovery"].as_table().unwrap().clone();
    assert_eq!(discovery["workgroup"].as_str(), Some("FAMILY"));
    assert_eq!(discovery["model"].as_str(), Some("MacSamba"));
    assert_eq!(discovery["mdns"].as_bool(), Some(false));
    assert_eq!(
        notes(&c),
        [
            "smb.conf:7: option `fruit:model` not carried over: a global option, which Samba \
          ignores in a share too"
        ]
    );

    let c = convert_text("[global]\nworkgroup = not a name\nfruit:model = \u{7f}\n");
    assert!(table(&c).get("discovery").is_none());
    assert_eq!(
        notes(&c),
        [
            "smb.conf:2: option `workgroup` not carried over: copyless takes 1 to 15 ASCII \
             letters, digits, '-' and '_' as workgroup",
            "smb.conf:3: option `fruit:model` not carried over: copyless takes 1 to 64 \
             printable ASCII characters as model",
        ]
    );
}

#[test]
fn hosts_allow_and_deny_become_addresses_and_networks() {
    let c = convert_text(
        "[global]\n\
         hosts allow = 192.168.1. 10.1.0.0/255.255.0.0, fd00::/8 nas.example.org @trusted\n\
         hosts deny = ALL EXCEPT 192.168.1.66\n\
         [plain]\npath = /p\n\
         [lan]\npath = /l\ndeny hosts = 192.168.1.66\n\
         [names]\npath = /n\nallow hosts = *.example.org\nhosts deny = \n\
         [except]\npath = /e\nhosts allow = 10. EXCEPT 10.0.0.1\nhosts deny = 127.0.0.1 ::1\n",
    );
    let security = table(&c)["security"].as_table().unwrap().clone();
    // `hosts deny = ALL` refuses local clients too, in Samba as here.
    assert_eq!(
        security["hosts_allow"],
        strings(&["192.168.1.0/24", "10.1.0.0/16", "fd00::/8"])
    );
    assert_eq!(security["hosts_deny"], strings(&["0.0.0.0/0", "::/0"]));
    let s = shares(&c);
    // [global]'s lists are checked at connect: a share that sets none has none.
    assert!(s[0].get("hosts_allow").is_none() && s[0].get("hosts_deny").is_none());
    // A share that sets one gets [global]'s other, as in Samba (with the
    // local clients, which its own hosts deny does not name).
    assert_eq!(
        s[1]["hosts_allow"],
        strings(&[
            "192.168.1.0/24",
            "10.1.0.0/16",
            "fd00::/8",
            "127.0.0.1",
            "::1"
        ])
    );
    assert_eq!(s[1]["hosts_deny"], strings(&["192.168.1.66"]));
    // Names only: local clients alone are let in, as Samba would.
    assert_eq!(s[2]["hosts_allow"], strings(&["127.0.0.1", "::1"]));
    assert!(s[2].get("hosts_deny").is_none());
    // An allow list with EXCEPT is left out whole; the loopback, denied,
    // is not added back, and hosts_deny alone decides.
    assert!(s[3].get("hosts_allow").is_none());
    assert_eq!(s[3]["hosts_deny"], strings(&["127.0.0.1", "::1"]));

    let n = notes(&c);
    let expected = [
        "smb.conf:2: option `hosts allow` carried over in part: `nas.example.org` left out: a \
         host name: copyless matches client addresses only; copyless does not let it in",
        "smb.conf:2: option `hosts allow` carried over in part: `@trusted` left out: a NIS \
         netgroup: copyless matches client addresses only; copyless does not let it in",
        // For [lan], whose hosts deny does not name them.
        "smb.conf:2: option `hosts allow` carried over in part: 127.0.0.1 and ::1 added: \
         Samba lets local clients in whatever `hosts allow` says",
        "smb.conf:3: option `hosts deny` carried over in part: `EXCEPT 192.168.1.66` left out: \
         copyless has no exceptions, so the clients it names are refused too",
        "smb.conf:11: option `allow hosts` carried over in part: `*.example.org` left out: a \
         host name: copyless matches client addresses only; copyless does not let it in",
        "smb.conf:11: option `allow hosts` carried over in part: 127.0.0.1 and ::1 added: \
         Samba lets local clients in whatever `hosts allow` says",
        "smb.conf:15: option `hosts allow` carried over in part: `EXCEPT` cannot be carried \
         over: copyless has no exceptions, so the whole list is left out rather than let in a \
         client Samba kept out",
        "smb.conf:15: option `hosts allow` not carried over: none of its entries is left: \
         `hosts deny` alone decides who is refused",
    ];
    assert_eq!(n, expected, "{n:#?}");

    // What it wrote passes check-config.
    let config = Config::from_text(&c.toml, Path::new("/etc/copyless.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{}", c.toml));
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    assert!(config.hosts.admits(ip("192.168.1.7")) && config.hosts.admits(ip("fd00::7")));
    assert!(!config.hosts.admits(ip("192.168.2.7")) && !config.hosts.admits(ip("::1")));
    // On both of [lan]'s lists: hosts allow takes precedence, as in Samba.
    assert!(config.shares[1].access.hosts.admits(ip("192.168.1.66")));
}

#[test]
fn names_copyless_cannot_match_are_left_out_of_veto_lists() {
    let c =
        convert_text("[s]\npath = /s\nveto files = /%U.tmp/a\\b/Thumbs.db/\nhide dot files = no\n");
    let share = &shares(&c)[0];
    assert_eq!(share["veto_files"], strings(&["Thumbs.db"]));
    assert_eq!(share["hide_dot_files"].as_bool(), Some(false));
    assert_eq!(
        notes(&c),
        [
            "smb.conf:3: option `veto files` carried over in part: `%U.tmp` left out: \
             Samba's %-substitutions are not made",
            "smb.conf:3: option `veto files` carried over in part: `a\\b` left out: not a \
             pattern of one name",
        ]
    );
}

#[test]
fn homes_in_one_folder_become_copyless_homes() {
    let c = convert_text(
        "[homes]\ncomment = Home Directories\npath = /srv/homes/%S\nvalid users = %S\n\
         browseable = no\nread only = no\ncreate mask = 0600\n",
    );
    assert!(shares(&c).is_empty());
    let homes = table(&c)["homes"].as_table().unwrap().clone();
    assert_eq!(homes["path"].as_str(), Some("/srv/homes/%U"));
    assert_eq!(homes["comment"].as_str(), Some("Home Directories"));
    assert_eq!(homes["read_only"].as_bool(), Some(false));
    assert_eq!(homes["create_mask"].as_str(), Some("0600"));
    assert!(homes.get("name").is_none() && homes.get("valid_users").is_none());
    assert!(homes.get("browseable").is_none());
    assert!(c.notes.is_empty(), "{:?}", notes(&c));
    let c = convert_text("[homes]\npath = /srv/%m/%S\n");
    assert!(table(&c).get("homes").is_none());
    assert_eq!(
        notes(&c),
        [
            "smb.conf:1: share [homes] not carried over: its path must hold %U or %S alone, \
          where each user's name goes"
        ]
    );
}

#[test]
fn protocol_bounds_become_min_and_max_protocol() {
    let c = convert_text("[global]\nserver min protocol = SMB3\nserver max protocol = smb3_02\n");
    let security = table(&c)["security"].as_table().unwrap().clone();
    assert_eq!(security["min_protocol"].as_str(), Some("SMB3"));
    assert_eq!(security["max_protocol"].as_str(), Some("SMB3_02"));
    assert!(c.notes.is_empty(), "{:?}", notes(&c));
    // copyless's own bounds go unsaid; SMB1 as the least is what copyless
    // refuses anyway, as the most it cannot be.
    let c = convert_text("[global]\nmin protocol = NT1\nmax protocol = SMB3\n");
    assert!(table(&c).get("security").is_none());
    assert!(c.notes.is_empty(), "{:?}", notes(&c));
    let c = convert_text("[global]\nprotocol = NT1\n");
    assert_eq!(
        notes(&c),
        [
            "smb.conf:2: option `protocol` not carried over: copyless speaks no SMB1: it offers \
          SMB2_02 to SMB3_11"
        ]
    );
    assert!(try_convert("[global]\nmin protocol = SMB9\n").is_err());
}

#[test]
fn full_audit_becomes_the_share_audit_and_log_level_the_log_level() {
    let c = convert_text(
        "[global]\nlog level = 1 auth:3\n\
         full_audit:failure = connect\n\
         [docs]\npath = /srv/docs\nvfs objects = full_audit acl_xattr\n\
         full_audit:success = mkdirat unlinkat renameat pwrite fset_nt_acl pread\n\
         full_audit:prefix = %u|%I|%S\n\
         [plain]\npath = /srv/plain\n",
    );
    assert_eq!(table(&c)["log"]["level"].as_str(), Some("warning"));
    let shares = shares(&c);
    assert_eq!(
        shares[0]["audit"],
        strings(&[
            "create",
            "write",
            "rename",
            "delete",
            "set_security",
            "denied"
        ])
    );
    assert!(shares[1].get("audit").is_none());
    let said = notes(&c);
    assert!(
        said.iter()
            .any(|n| n.contains("full_audit:success") && n.contains("no event for pread")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|n| n.contains("full_audit:prefix") && n.contains("fixed fields")),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|n| n.contains("`full_audit`") && n.contains("needs nothing")),
        "{said:?}"
    );
    // What copyless reads back is what was meant.
    let config = Config::from_text(&c.toml, Path::new("/etc/copyless.toml")).unwrap();
    assert_eq!(
        config.log_level,
        copyless_engine::log_level::LogLevel::Warning
    );
    for (samba, level) in [("0", "warning"), ("3", "info"), ("10", "debug")] {
        let c = convert_text(&format!("[global]\nlog level = {samba}\n"));
        assert_eq!(table(&c)["log"]["level"].as_str(), Some(level), "{samba}");
    }
    assert!(try_convert("[global]\nlog level = loud\n").is_err());
}

#[test]
fn change_notify_switched_off_stays_off() {
    let c = convert_text("[global]\n   change notify = no\n[data]\n   path = /srv/data\n");
    assert_eq!(table(&c)["change_notify"].as_bool(), Some(false));
}

#[test]
fn recycle_and_snapshots_are_carried_over() {
    let c = convert_text(
        "[docs]\npath = /srv/docs\nvfs objects = recycle shadow_copy2 btrfs\n\
         recycle:repository = .recycle/%U\nrecycle:exclude = *.tmp|~$*\n\
         recycle:maxsize = 1048576\nrecycle:versions = no\n\
         shadow:snapdir = /srv/snaps\n\
         [media]\npath = /srv/media\nvfs objects = snapper\n\
         [odd]\npath = /srv/odd\nvfs objects = shadow_copy2\n\
         shadow:format = daily-%Y%m%d\nrecycle:maxsize = 5\n",
    );
    let shares = shares(&c);
    assert_eq!(shares[0]["recycle"].as_bool(), Some(true));
    assert_eq!(shares[0]["recycle_exclude"], strings(&["*.tmp", "~$*"]));
    assert_eq!(shares[0]["recycle_max_size"].as_integer(), Some(1 << 20));
    assert_eq!(shares[0]["snapshots"].as_str(), Some("dir:/srv/snaps"));
    assert_eq!(shares[1]["snapshots"].as_str(), Some("btrfs"));
    // A format copyless cannot read, and a module option without its
    // module, are said so.
    assert!(shares[2].get("snapshots").is_none());
    assert!(shares[2].get("recycle").is_none());
    let notes = notes(&c);
    for said in [
        "option `recycle:versions` carried over in part: copyless always keeps every file",
        "option `shadow:format` not carried over: copyless finds snapshots by the @GMT",
        "option `vfs objects` (`btrfs`) needs nothing",
    ] {
        assert!(notes.iter().any(|n| n.contains(said)), "{said}: {notes:#?}");
    }
    // The config it writes is one copyless reads.
    let config = Config::from_text(&c.toml, Path::new("/etc/copyless.toml")).unwrap();
    assert_eq!(
        config.shares[0].recycle.as_ref().map(|r| r.max_size),
        Some(1 << 20)
    );
    assert_eq!(
        config.shares[1].snapshots,
        Some(copyless_vfs::snapshots::Source::Btrfs)
    );
}
