//! `copyless user import --pdbedit FILE`: Samba's users with their NT
//! hashes, from `pdbedit -L -w` (the smbpasswd format), so that nobody
//! has to type a password again.
//!
//! Each line is `NAME:UID:LMHASH:NTHASH:[FLAGS]:LCT-SECONDS:`. The NT hash
//! is what an NTLM logon checks, so a user imported with it logs on with
//! the password it had under Samba.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

use copyless_auth::unix::{self, UnixAccount, UnixError};
use copyless_auth::userstore::{parse_hex_hash, UserStore};
use zeroize::Zeroizing;

use crate::user_cmd::{
    create_account, create_state_dir, describe, existing_account, has_user, not_root, say,
    CmdError, StoreArgs,
};

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The output of `pdbedit -L -w` (smbpasswd format); `-` for standard
    /// input.
    #[arg(long, value_name = "FILE")]
    pub pdbedit: PathBuf,
    /// Overwrite the password hash and link of users that exist already.
    #[arg(long)]
    pub replace: bool,
    /// Link every imported user to this existing Unix account (default:
    /// the account of the user's own name).
    #[arg(long, value_name = "ACCOUNT", conflicts_with = "create_unix_user")]
    pub unix_user: Option<String>,
    /// Create a missing Unix account of a user's name as a system account
    /// without login (needs root).
    #[arg(long)]
    pub create_unix_user: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// One account of Samba's password database.
#[derive(Debug, PartialEq, Eq)]
pub struct Account {
    /// The line it is on.
    pub line: usize,
    pub name: String,
    /// Its uid on the Samba server, when it had one.
    pub uid: Option<u32>,
    /// None when Samba holds no password for it.
    pub nt_hash: Option<[u8; 16]>,
    /// The account flags (`U` user, `D` disabled, `W` workstation, ...).
    pub flags: String,
}

impl Account {
    fn has_flag(&self, flags: &str) -> bool {
        self.flags.chars().any(|c| flags.contains(c))
    }
}

/// The accounts of `pdbedit -L -w` output; an error names the line.
pub fn parse(text: &str) -> Result<Vec<Account>, (usize, String)> {
    let mut accounts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |what: String| (number, what);
        let fields: Vec<&str> = line.split(':').collect();
        let [name, uid, _lm, nt, rest @ ..] = fields.as_slice() else {
            return Err(bad(
                "expected NAME:UID:LMHASH:NTHASH:[FLAGS]:LCT-...: (as `pdbedit -L -w` writes)"
                    .to_string(),
            ));
        };
        if name.is_empty() {
            return Err(bad("an account without a name".to_string()));
        }
        // Samba writes -1 for an account without a Unix uid.
        let uid = match uid.parse::<i64>() {
            Ok(uid) => u32::try_from(uid).ok(),
            Err(_) => return Err(bad(format!("the uid {uid:?} is not a number"))),
        };
        // Without a hash Samba writes 32 X's, or "NO PASSWORD" and X's.
        let nt_hash = if nt.starts_with("NO PASSWORD") || nt.chars().all(|c| c == 'X') {
            None
        } else {
            Some(
                parse_hex_hash(nt)
                    .ok_or_else(|| bad(format!("the NT hash of {name} is not 32 hex digits")))?,
            )
        };
        let flags = match rest.first() {
            None | Some(&"") => "",
            Some(flags) => flags
                .strip_prefix('[')
                .and_then(|f| f.strip_suffix(']'))
                .ok_or_else(|| bad(format!("the flags of {name} are not in [brackets]")))?,
        };
        accounts.push(Account {
            line: number,
            name: name.to_string(),
            uid,
            nt_hash,
            flags: flags.trim().to_string(),
        });
    }
    Ok(accounts)
}

/// Adds each usable account to the user store; what is left out is
/// reported on `report`, one line each, naming the line it is on.
pub(crate) fn import(
    args: ImportArgs,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    report: &mut dyn Write,
) -> Result<(), CmdError> {
    let from_stdin = args.pdbedit.as_os_str() == "-";
    let shown = if from_stdin {
        "standard input".to_string()
    } else {
        args.pdbedit.display().to_string()
    };
    // The hashes are as good as the passwords: zeroed when dropped.
    let mut text = Zeroizing::new(String::new());
    let read = if from_stdin {
        input.read_to_string(&mut text)
    } else {
        std::fs::File::open(&args.pdbedit).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| CmdError::usage(format!("{shown}: cannot read: {e}")))?;
    let accounts =
        parse(&text).map_err(|(line, what)| CmdError::usage(format!("{shown}:{line}: {what}")))?;

    // One account for all, checked before anything is done.
    let shared = match &args.unix_user {
        Some(account) => Some(existing_account(account)?),
        None => None,
    };
    let dir = args.store.dir()?;
    create_state_dir(&dir)?;
    let mut store = UserStore::load(&dir)?;

    let (mut imported, mut skipped) = (0, 0);
    for account in &accounts {
        let name = &account.name;
        let replaced = has_user(&store, name);
        let added = usable(account, replaced, args.replace).and_then(|hash| {
            let linked = match &shared {
                Some(shared) => shared.clone(),
                None => own_account(name, args.create_unix_user, out)?,
            };
            if replaced {
                store.remove(name).map_err(|e| e.to_string())?;
            }
            let link = (linked.name != *name).then_some(linked.name.as_str());
            // Fails only for a name copyless cannot take, which is then
            // not in the store (and so was not removed either).
            store
                .add_nt_hash(name, hash, link)
                .map_err(|e| e.to_string())?;
            Ok(linked)
        });
        let linked = match added {
            Ok(linked) => linked,
            Err(why) => {
                skipped += 1;
                writeln!(
                    report,
                    "{shown}:{}: user {name} not imported: {why}",
                    account.line
                )
                .map_err(|e| CmdError::runtime(format!("cannot write to standard error: {e}")))?;
                continue;
            }
        };
        imported += 1;
        let mut line = format!(
            "user {name} {}, linked to {}",
            if replaced { "replaced" } else { "imported" },
            describe(&linked)
        );
        if let Some(uid) = account.uid.filter(|&uid| uid != linked.uid) {
            line.push_str(&format!(
                " (uid {uid} under Samba: files it owned there need a chown)"
            ));
        }
        say(out, &line)?;
    }
    if imported > 0 {
        store.save()?;
    }
    say(out, &format!("{imported} imported, {skipped} not imported"))
}

/// The account's NT hash, when it is a user to import.
fn usable(account: &Account, exists: bool, replace: bool) -> Result<[u8; 16], String> {
    if account.has_flag("WSI") {
        return Err(format!(
            "a machine or trust account ([{}]), not a user",
            account.flags
        ));
    }
    if account.has_flag("D") {
        return Err("disabled in Samba (D flag)".to_string());
    }
    let Some(hash) = account.nt_hash else {
        return Err(format!(
            "Samba holds no password for it; add it with `copyless user add {}`",
            account.name
        ));
    };
    if exists && !replace {
        return Err("exists already, left alone (--replace overwrites it)".to_string());
    }
    Ok(hash)
}

/// The Unix account of the user's own name, as `user add` links it: it
/// must exist, unless `create` makes it.
fn own_account(name: &str, create: bool, out: &mut dyn Write) -> Result<UnixAccount, String> {
    if create {
        return create_account(name, out).map_err(|e| e.to_string());
    }
    let account = unix::lookup(name).map_err(|e| match e {
        UnixError::NotFound(_) => format!(
            "{e} to link it to: add --create-unix-user to make system accounts of the \
             missing names (as root), or --unix-user ACCOUNT to link every user to one account"
        ),
        e => e.to_string(),
    })?;
    not_root(account).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_auth::Credentials;
    use std::io::Cursor;

    const PASSWORD_HASH: &str = "A4F49C406510BDCAB6824EE7C30FD852"; // "Password"

    #[test]
    fn lines_as_pdbedit_writes_them() {
        let text = format!(
            "alice:1001:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[U          ]:LCT-6B05E464:\n\
             \n\
             bob:1002:NO PASSWORDXXXXXXXXXXXXXXXXXXXXX:NO PASSWORDXXXXXXXXXXXXXXXXXXXXX:[NDU        ]:LCT-00000000:\n\
             nas$:-1:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[W          ]:LCT-6B05E464:\n\
             old:7:{PASSWORD_HASH}:{PASSWORD_HASH}:\n"
        );
        let accounts = parse(&text).unwrap();
        let hash = parse_hex_hash(PASSWORD_HASH);
        assert_eq!(
            accounts,
            [
                Account {
                    line: 1,
                    name: "alice".into(),
                    uid: Some(1001),
                    nt_hash: hash,
                    flags: "U".into()
                },
                Account {
                    line: 3,
                    name: "bob".into(),
                    uid: Some(1002),
                    nt_hash: None,
                    flags: "NDU".into()
                },
                Account {
                    line: 4,
                    name: "nas$".into(),
                    uid: None,
                    nt_hash: hash,
                    flags: "W".into()
                },
                Account {
                    line: 5,
                    name: "old".into(),
                    uid: Some(7),
                    nt_hash: hash,
                    flags: String::new()
                },
            ]
        );
    }

    #[test]
    fn malformed_lines_name_their_line() {
        for (text, line, what) in [
            ("alice:1001:XX\n", 1, "expected NAME:UID"),
            ("\n:1:X:X:[U]:\n", 2, "without a name"),
            ("alice:one:X:X:[U]:\n", 1, "not a number"),
            ("alice:1:X:1234:[U]:\n", 1, "32 hex digits"),
            (
                "alice:1:X:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:U:\n",
                1,
                "[brackets]",
            ),
        ] {
            let (at, message) = parse(text).unwrap_err();
            assert_eq!(at, line, "{text:?}");
            assert!(message.contains(what), "{text:?}: {message}");
        }
    }

    struct TempDir(tempfile::TempDir);

    /// An account a user may be linked to: the tests' own, or nobody
    /// when they run as root.
    fn me() -> UnixAccount {
        let uid = rustix::process::geteuid().as_raw();
        let name = match uid {
            0 => "nobody".to_string(),
            uid => unix::account_name(uid).unwrap(),
        };
        unix::lookup(&name).unwrap()
    }

    /// Runs an import of `text` (given on standard input); returns what it
    /// printed and reported, or its error.
    fn run(
        dir: &TempDir,
        text: &str,
        unix_user: Option<&str>,
        replace: bool,
    ) -> Result<(String, String), CmdError> {
        let args = ImportArgs {
            pdbedit: PathBuf::from("-"),
            replace,
            unix_user: unix_user.map(str::to_string),
            create_unix_user: false,
            store: StoreArgs::at(dir.0.path()),
        };
        let (mut out, mut report) = (Vec::new(), Vec::new());
        import(
            args,
            &mut Cursor::new(text.as_bytes().to_vec()),
            &mut out,
            &mut report,
        )?;
        Ok((
            String::from_utf8(out).unwrap(),
            String::from_utf8(report).unwrap(),
        ))
    }

    #[test]
    fn users_come_with_their_hashes_and_the_rest_is_reported() {
        let dir = TempDir(tempfile::tempdir().unwrap());
        let me = me();
        let text = format!(
            "alice:{uid}:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[U          ]:LCT-1:\n\
             gone:1003:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[DU         ]:LCT-1:\n\
             nopw:1004:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:[U          ]:LCT-1:\n\
             pc$:1005:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[W          ]:LCT-1:\n\
             bad@name:1006:XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX:{PASSWORD_HASH}:[U          ]:LCT-1:\n",
            uid = me.uid + 1
        );
        let (out, report) = run(&dir, &text, Some(&me.name), false).unwrap();
        assert_eq!(
            out,
            format!(
                "user alice imported, linked to Unix account {0} (uid {1}) (uid {2} under \
                 Samba: files it owned there need a chown)\n1 imported, 4 not imported\n",
                me.name,
                me.uid,
                me.uid + 1
            )
        );
        let lines: Vec<&str> = report.lines().collect();
        assert_eq!(lines.len(), 4, "{report}");
        assert!(lines[0].starts_with("standard input:2: user gone not imported: disabled"));
        assert!(lines[1]
            .starts_with("standard input:3: user nopw not imported: Samba holds no password"));
        assert!(lines[2].starts_with("standard input:4: user pc$ not imported: a machine"));
        assert!(
            lines[3].starts_with("standard input:5: user bad@name not imported: invalid user name"),
            "{}",
            lines[3]
        );

        let store = UserStore::load(dir.0.path()).unwrap();
        assert_eq!(store.names(), ["alice"]);
        assert_eq!(
            store.nt_hash("alice"),
            Some(copyless_auth::nt_hash("Password"))
        );
        assert_eq!(store.unix_account("alice"), Some(me.name.as_str()));

        // Again: alice is left alone, unless replaced.
        let other = "0123456789abcdef0123456789abcdef";
        let again = format!("alice:1:X:{other}:[U]:LCT-1:\n");
        let (out, report) = run(&dir, &again, Some(&me.name), false).unwrap();
        assert!(out.ends_with("0 imported, 1 not imported\n"), "{out}");
        assert!(
            report.contains("user alice not imported: exists already"),
            "{report}"
        );
        let (out, report) = run(&dir, &again, Some(&me.name), true).unwrap();
        assert!(out.starts_with("user alice replaced, linked to"), "{out}");
        assert_eq!(report, "");
        let store = UserStore::load(dir.0.path()).unwrap();
        assert_eq!(store.nt_hash("alice"), parse_hex_hash(other));
    }

    #[test]
    fn without_a_flag_each_user_is_linked_to_its_own_account() {
        let dir = TempDir(tempfile::tempdir().unwrap());
        let me = me();
        let text = format!(
            "{0}:{1}:X:{PASSWORD_HASH}:[U]:LCT-1:\n\
             copyless-test-no-such-account:2:X:{PASSWORD_HASH}:[U]:LCT-1:\n",
            me.name, me.uid
        );
        let (out, report) = run(&dir, &text, None, false).unwrap();
        assert!(out.starts_with(&format!(
            "user {0} imported, linked to Unix account {0} (uid {1})\n",
            me.name, me.uid
        )));
        assert!(
            report.contains("no Unix account \"copyless-test-no-such-account\" to link it to"),
            "{report}"
        );
        assert!(report.contains("--create-unix-user"), "{report}");
        // Linked by name: the line has no account field.
        let store = UserStore::load(dir.0.path()).unwrap();
        let contents = std::fs::read_to_string(store.path()).unwrap();
        assert_eq!(contents.lines().last().unwrap().split(':').count(), 2);
    }

    #[test]
    fn bad_input_changes_nothing() {
        let dir = TempDir(tempfile::tempdir().unwrap());
        let text = format!("alice:1:X:{PASSWORD_HASH}:[U]:LCT-1:\nbroken\n");
        let err = run(&dir, &text, Some(&me().name), false).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().starts_with("standard input:2: expected"),
            "{err}"
        );
        assert!(!dir.0.path().join("users").exists());
        let err = run(&dir, "", Some("copyless-test-no-such-account"), false).unwrap_err();
        assert_eq!(err.exit_code(), 1);
    }
}
