//! Why each Samba option that copyless has no key for is left out, and
//! which of them need no key because copyless already does what they say.

use super::smbconf::normalize;

/// What becomes of an option the converter does not map to a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// copyless behaves so anyway: nothing to say.
    Same,
    /// Not carried over, for this reason.
    Lacking(String),
}

const NO_SETTING: &str = "copyless has no such setting";

/// The verdict on option `key` (normalized) with `value`.
pub fn verdict(key: &str, value: &str) -> Verdict {
    let v = normalize(value);
    let yes = matches!(v.as_str(), "yes" | "true" | "1" | "on");
    let no = matches!(v.as_str(), "no" | "false" | "0" | "off");
    let same = match key {
        "serverrole" => matches!(v.as_str(), "standalone" | "standaloneserver" | "auto"),
        "security" => matches!(v.as_str(), "user" | "auto"),
        "disablenetbios" | "storedosattributes" | "followsymlinks" | "encryptpasswords"
        | "ntaclsupport" | "mapaclinherit" => yes,
        "widelinks" | "lanmanauth" | "nullpasswords" => no,
        // What copyless does not do either, switched off.
        "winssupport"
        | "winsproxy"
        | "dnsproxy"
        | "timeserver"
        | "localmaster"
        | "preferredmaster"
        | "domainmaster"
        | "loadprinters"
        | "unixextensions"
        | "obeypamrestrictions" => no,
        "disablespoolss" => yes,
        // Names are UTF-8 on disk; the DOS code page serves only SMB1.
        "unixcharset" => matches!(v.as_str(), "utf-8" | "utf8"),
        // How printers would be served, had copyless any; how Samba tunes
        // its sockets and I/O, which copyless does its own way (zero-copy
        // and asynchronous I/O, TCP_NODELAY).
        "doscharset" | "printing" | "printcapname" | "printcapcachetime" | "socketoptions"
        | "usesendfile" | "aioreadsize" | "aiowritesize" | "aiomaxthreads"
        | "minreceivefilesize" | "getwdcache" | "maxxmit" | "readraw" | "writeraw" => true,
        "ntlmauth" => matches!(
            v.as_str(),
            "no" | "false" | "0" | "off" | "disabled" | "ntlmv2-only" | "mschapv2-and-ntlmv2-only"
        ),
        _ => false,
    };
    if same {
        Verdict::Same
    } else {
        Verdict::Lacking(reason(key).to_string())
    }
}

fn reason(key: &str) -> &'static str {
    if key.starts_with("client") {
        return "a setting of Samba's client tools, not of the server";
    }
    if key.starts_with("idmap") || key.starts_with("winbind") || key.starts_with("template") {
        return "copyless is a standalone server and joins no domain";
    }
    if key.starts_with("usershare") {
        return "copyless has no user-defined shares (usershares)";
    }
    if let Some((module, _)) = key.split_once(':') {
        return match module {
            "aclxattr" | "streamsxattr" => {
                "copyless keeps NT ACLs and streams natively, without this setting"
            }
            "fullaudit" => {
                "copyless's audit lines have fixed fields (user, client, share, path, result) and \
                 go to the journal, or to `[audit] file`"
            }
            _ => "an option of a Samba module (vfs object or other), which copyless lacks",
        };
    }
    match key {
        "serverrole" | "security" | "passwordserver" | "allowtrusteddomains" => {
            "copyless is a standalone server with its own users: it joins and serves no domain"
        }
        "disablenetbios" | "winssupport" | "winsserver" | "winsproxy" | "dnsproxy"
        | "localmaster" | "preferredmaster" | "domainmaster" | "oslevel" | "nameresolveorder"
        | "netbiosaliases" | "netbiosscope" | "browselist" | "enhancedbrowsing"
        | "lmannounce" | "lminterval" | "remoteannounce" | "remotebrowsesync" | "timeserver"
        | "nmbdbindexplicitbroadcast" => {
            "copyless does no NetBIOS name service or browsing (what nmbd does); clients find it by name or address"
        }
        "loadprinters" | "printing" | "printcapname" | "printcapcachetime" | "disablespoolss"
        | "printcommand" | "lpqcommand" | "lprmcommand" | "printername" | "printer"
        | "useclientdriver" | "showaddprinterwizard" | "cupsoptions" | "cupsserver"
        | "maxprintjobs" | "printable" | "printok" => "copyless serves no printers",
        "logfile" | "maxlogsize" | "logging" | "syslog" | "syslogonly" | "debugtimestamp"
        | "timestamplogs" | "debugprefixtimestamp" | "debughirestimestamp" | "debugpid"
        | "debuguid" | "debugclass" => {
            "copyless logs to standard error (the journal under systemd, which keeps and \
             rotates it); how much it says is `[log] level`"
        }
        "easupport" => "copyless keeps no extended attributes (EAs) for clients",
        "privatedir" | "lockdirectory" | "lockdir" | "statedirectory" | "cachedirectory"
        | "piddirectory" | "ncalrpcdir" | "binddnsdir" => {
            "a directory of Samba's own databases; copyless keeps its state in state_dir"
        }
        "passdbbackend" | "smbpasswdfile" => {
            "copyless keeps users in its own store: move them with `copyless user import --pdbedit`"
        }
        "unixpasswordsync" | "passwdprogram" | "passwdchat" | "passwdchatdebug"
        | "pampasswordchange" | "obeypamrestrictions" | "nullpasswords" | "encryptpasswords"
        | "minpasswordlength" | "checkpasswordscript" => {
            "copyless keeps its own user store and changes passwords with `copyless user passwd`"
        }
        "usernamemap" | "usernamemapscript" | "usernamemapcachetime" => {
            "copyless has no user name map: add users under the names clients log on with"
        }
        "ntlmauth" => "copyless accepts NTLMv2 only",
        "lanmanauth" => "copyless accepts NTLMv2 only, never LANMAN",
        "invalidusers" => {
            "copyless has no deny list: name who may connect in `valid users` instead"
        }
        "adminusers" => "copyless gives no user root's rights on a share",
        "guestonly" | "onlyguest" => {
            "copyless has no guest-only shares: users who log on keep their own identity"
        }
        "forcesecuritymode" | "forcedirectorysecuritymode" | "securitymask"
        | "directorysecuritymask" => {
            "copyless has no masks for modes set through security descriptors (Samba 4 \
             ignores them too)"
        }
        "inheritowner" => "new files belong to who creates them (or to force_user)",
        "hidespecialfiles" | "hideunwriteablefiles" | "hidenewfilestimeout" | "vetooplockfiles" => {
            "copyless hides and vetoes names by pattern only (hide_files, veto_files)"
        }
        "preexec" | "exec" | "rootpreexec" | "postexec" | "rootpostexec" | "preexecclose"
        | "rootpreexecclose" | "magicscript" | "magicoutput" | "dfreecommand"
        | "getquotacommand" | "setquotacommand" | "adduserscript"
        | "addsharecommand" | "changesharecommand" | "deletesharecommand" => {
            "copyless runs no scripts or commands"
        }
        "msdfsroot" | "msdfsproxy" | "hostmsdfs" | "msdfsshuffle" => "copyless serves no DFS",
        "maxconnections" => {
            "copyless has no per-share connection limit ([limits] max_connections counts the whole server)"
        }
        "smbencrypt" | "serversmbencrypt" => {
            "copyless sets encryption for the whole server ([security] encryption), not per share"
        }
        "oplocks" | "level2oplocks" | "kerneloplocks" | "smb2leases" | "fakeoplocks"
        | "kernelsharemodes" | "posixlocking" | "strictlocking" => {
            "copyless decides on oplocks, leases and locks itself"
        }
        "widelinks" | "allowinsecurewidelinks" | "followsymlinks" | "unixextensions" => {
            "copyless follows symbolic links only while they stay inside the share"
        }
        "storedosattributes" | "mapreadonly" | "maparchive" | "maphidden" | "mapsystem" => {
            "copyless always keeps DOS attributes in an xattr (user.copyless.dosattrib)"
        }
        "ntaclsupport" | "mapaclinherit" | "aclgroupcontrol"
        | "aclmapfullcontrol" | "aclallowexecutealways" => {
            "copyless always keeps the NT ACLs clients set and applies their inheritance"
        }
        "configfile" => "copyless reads no other config file: import that file instead",
        "configbackend" | "include" => {
            "copyless has one config for every client: per-client includes (`%` \
             substitutions) and Samba's registry config cannot be carried over"
        }
        "copy" => "no share of that name comes before it",
        "available" => "switching a share off is done by leaving it out",
        _ => NO_SETTING,
    }
}

/// What becomes of vfs object `module`: Ok when copyless does its job
/// natively (with what to know about that), else why it is left out.
pub fn vfs_object(module: &str) -> Result<&'static str, &'static str> {
    match module {
        "acl_xattr" => Ok(
            "copyless keeps the NT ACLs clients set natively, in the xattr user.copyless.ntacl \
             (ACLs Samba kept in security.NTACL are not read)",
        ),
        "streams_xattr" => Ok(
            "copyless keeps alternate data streams natively, in user.copyless.stream.* xattrs \
             (streams Samba kept in user.DosStream.* are not read)",
        ),
        "recycle" => Ok(
            "copyless keeps a recycle bin natively: `recycle = true` moves deleted files to \
             .recycle/USER/",
        ),
        "btrfs" => Ok(
            "copyless copies and clones inside the filesystem natively (server-side copy and \
             FSCTL_DUPLICATE_EXTENTS_TO_FILE share blocks on btrfs); clients cannot set btrfs \
             compression",
        ),
        "shadow_copy2" => {
            Ok("copyless shows snapshots as previous versions natively: the share's `snapshots`")
        }
        "snapper" => Ok(
            "copyless shows snapper's snapshots as previous versions natively: \
             `snapshots = \"btrfs\"`",
        ),
        "fruit" => Err(
            "copyless has no Apple (AAPL) extensions: macOS clients connect without them, \
             Time Machine backups do not",
        ),
        "shadow_copy" | "shell_snap" => Err(
            "copyless reads snapshots from btrfs, ZFS or a folder of @GMT folders (`snapshots`)",
        ),
        "catia" => Err("copyless maps no characters that Windows forbids in names"),
        "full_audit" => Ok(
            "copyless keeps an audit trail natively: the share's `audit`, from \
             full_audit:success and full_audit:failure; its lines go to the journal, or to \
             `[audit] file`",
        ),
        "audit" | "extd_audit" => Err(
            "copyless keeps its own audit trail: set the share's `audit` (its kinds of event are \
             in README.md, Configuration)",
        ),
        "time_audit" => Err("copyless times every request itself: `copyless top`"),
        "streams_depot" => Err(
            "copyless keeps streams in xattrs: streams Samba kept in its stream depot are not read",
        ),
        "io_uring" => Err("copyless has its own io_uring engine (engine = \"auto\" picks it)"),
        "aio_pthread" => Err("copyless does its own asynchronous I/O"),
        "virusfilter" => Err("copyless scans no files for viruses"),
        "worm" | "readonly" => Err("copyless has no write-once or time-limited read-only shares"),
        "dfs_samba4" | "expand_msdfs" => Err("copyless serves no DFS"),
        _ => Err("copyless has no such module"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_copyless_does_anyway_goes_unsaid() {
        for (key, value) in [
            ("serverrole", "standalone server"),
            ("security", "USER"),
            ("disablenetbios", "yes"),
            ("widelinks", "no"),
            ("ntlmauth", "ntlmv2-only"),
            ("loadprinters", "no"),
            ("winssupport", "no"),
            ("unixcharset", "UTF-8"),
            ("socketoptions", "TCP_NODELAY IPTOS_LOWDELAY"),
            ("usesendfile", "yes"),
        ] {
            assert_eq!(verdict(key, value), Verdict::Same, "{key} = {value}");
        }
        // Switched on, they would do what copyless does not.
        for (key, value) in [
            ("loadprinters", "yes"),
            ("winssupport", "yes"),
            ("unixcharset", "ISO-8859-1"),
        ] {
            assert_ne!(verdict(key, value), Verdict::Same, "{key} = {value}");
        }
    }

    #[test]
    fn the_rest_says_why() {
        let why = |key: &str, value: &str| match verdict(key, value) {
            Verdict::Lacking(why) => why,
            Verdict::Same => panic!("{key} = {value} taken as the same"),
        };
        assert!(why("serverrole", "member server").contains("standalone"));
        assert!(why("widelinks", "yes").contains("inside the share"));
        assert!(why("clientsigning", "required").contains("client tools"));
        assert!(why("idmapconfig*:backend", "tdb").contains("domain"));
        assert!(why("recycle:repository", ".trash").contains("module"));
        assert!(why("fruit:metadata", "stream").contains("module"));
        assert!(why("aclxattr:ignoresystemacls", "yes").contains("natively"));
        assert_eq!(why("someday", "maybe"), NO_SETTING);
    }

    #[test]
    fn vfs_objects() {
        assert!(vfs_object("acl_xattr").unwrap().contains("natively"));
        assert!(vfs_object("streams_xattr").unwrap().contains("natively"));
        assert!(vfs_object("recycle").unwrap().contains("recycle bin"));
        assert!(vfs_object("shadow_copy2")
            .unwrap()
            .contains("previous versions"));
        assert!(vfs_object("btrfs").unwrap().contains("clones"));
        assert!(vfs_object("shadow_copy").unwrap_err().contains("snapshots"));
        assert_eq!(vfs_object("frobnicate"), Err("copyless has no such module"));
    }
}
