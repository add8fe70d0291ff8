//! `copyless user ...`: manage the user store in the state directory.

use std::fmt;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use copyless_auth::unix::{self, UnixAccount, UnixError};
use copyless_auth::userstore::{UserError, UserStore};
use zeroize::Zeroizing;

use crate::config::{default_config_file, default_state_dir, Config};
use crate::machine_sid::user_sid;

/// Where the user store is, as the server finds it: `--state-dir`, else
/// the `state_dir` of `--config FILE`, else of the default configuration
/// file (the service's, /etc/copyless/copyless.toml, for root), else the
/// default state directory.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StoreArgs {
    /// Directory that holds the user store, whatever the configuration
    /// says (default: the configuration's `state_dir`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Use the state_dir of this configuration file (default: the one
    /// `copyless serve` reads; without one, the default state directory).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl StoreArgs {
    /// The state directory `dir`, as --state-dir gives it.
    #[cfg(test)]
    pub fn at(dir: &Path) -> StoreArgs {
        StoreArgs {
            state_dir: Some(dir.to_path_buf()),
            config: None,
        }
    }

    /// The state directory these arguments name.
    pub fn dir(&self) -> Result<PathBuf, CmdError> {
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        match self.config.clone().or_else(default_config_file) {
            Some(file) => Config::load(&file)
                .map(|config| config.state_dir)
                .map_err(|e| CmdError::usage(e.to_string())),
            None => Ok(default_state_dir()),
        }
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum UserCommand {
    /// Add a user, linked to the Unix account of its name unless told
    /// otherwise; asks for the password.
    Add {
        /// The name the user logs on with.
        name: String,
        /// Link the user to this existing Unix account (default: the
        /// account NAME).
        #[arg(long, value_name = "ACCOUNT", conflicts_with = "create_unix_user")]
        unix_user: Option<String>,
        /// Link the user to the Unix account NAME, first creating it as a
        /// system account without login when missing (needs root).
        #[arg(long)]
        create_unix_user: bool,
        /// Read the password as one line from standard input instead of the terminal.
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Delete a user (its Unix account and files stay).
    Del {
        /// The user to delete.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Change a user's password; asks for the new one.
    Passwd {
        /// The user whose password changes.
        name: String,
        /// Read the password as one line from standard input instead of the terminal.
        #[arg(long)]
        password_stdin: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Link a user to another Unix account, the one it acts as on disk.
    Link {
        /// The user to link.
        name: String,
        /// The existing Unix account the user acts as from now on.
        #[arg(long, value_name = "ACCOUNT")]
        unix_user: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List the users, each with its Unix account.
    List {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Show a user's Unix account and groups.
    Show {
        /// The user to show.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Import Samba's users with their password hashes (`pdbedit -L -w`),
    /// so that they log on with the passwords they had.
    Import(crate::samba_import::passdb::ImportArgs),
}

/// Runs a `user` subcommand; messages go to stdout, errors to stderr.
pub fn run(cmd: UserCommand) -> ExitCode {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match execute(cmd, &mut input, &mut out, &TerminalPrompt) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("copyless: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// Why a `user` command failed; the kind picks the exit status.
#[derive(Debug)]
pub(crate) struct CmdError {
    usage: bool,
    message: String,
}

impl CmdError {
    pub(crate) fn usage(message: impl Into<String>) -> CmdError {
        CmdError {
            usage: true,
            message: message.into(),
        }
    }

    pub(crate) fn runtime(message: impl Into<String>) -> CmdError {
        CmdError {
            usage: false,
            message: message.into(),
        }
    }

    /// INTERFACE.md: 1 for a runtime failure, 2 for a usage error.
    pub(crate) fn exit_code(&self) -> u8 {
        if self.usage {
            2
        } else {
            1
        }
    }
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<UnixError> for CmdError {
    fn from(e: UnixError) -> CmdError {
        let usage = matches!(e, UnixError::InvalidName(_));
        CmdError {
            usage,
            message: e.to_string(),
        }
    }
}

impl From<UserError> for CmdError {
    fn from(e: UserError) -> CmdError {
        let usage = matches!(e, UserError::InvalidName(_) | UserError::InvalidAccount(_));
        CmdError {
            usage,
            message: e.to_string(),
        }
    }
}

/// Asks for a password on the terminal; a trait so tests need no terminal.
trait Prompt {
    fn ask(&self, prompt: &str) -> io::Result<String>;
}

struct TerminalPrompt;

impl Prompt for TerminalPrompt {
    fn ask(&self, prompt: &str) -> io::Result<String> {
        rpassword::prompt_password(prompt)
    }
}

fn execute(
    cmd: UserCommand,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    prompt: &dyn Prompt,
) -> Result<(), CmdError> {
    match cmd {
        UserCommand::Add {
            name,
            unix_user,
            create_unix_user,
            password_stdin,
            store,
        } => {
            let dir = store.dir()?;
            create_state_dir(&dir)?;
            let mut store = UserStore::load(&dir)?;
            if has_user(&store, &name) {
                return Err(CmdError::runtime(format!("user {name} already exists")));
            }
            // Before the password is asked for: a missing account is the
            // likelier mistake.
            let account = match unix_user {
                Some(account) => existing_account(&account)?,
                None if create_unix_user => create_account(&name, out)?,
                None => not_root(unix::lookup(&name).map_err(|e| match e {
                    UnixError::NotFound(_) => CmdError::runtime(format!(
                        "{e} to link user {name} to: name another with --unix-user ACCOUNT, \
                         or create a system account {name} with --create-unix-user (as root)"
                    )),
                    e => e.into(),
                })?)?,
            };
            let password = read_new_password(&name, password_stdin, input, prompt)?;
            if account.name == name {
                store.add(&name, &password)?;
            } else {
                store.add_linked(&name, &password, &account.name)?;
            }
            store.save()?;
            say(
                out,
                &format!("user {name} added, linked to {}", describe(&account)),
            )
        }
        UserCommand::Del { name, store } => {
            let dir = store.dir()?;
            let mut store = UserStore::load(&dir)?;
            store.remove(&name)?;
            store.save()?;
            say(out, &format!("user {name} deleted"))
        }
        UserCommand::Passwd {
            name,
            password_stdin,
            store,
        } => {
            let mut store = load_with(&store, &name)?;
            let password = read_new_password(&name, password_stdin, input, prompt)?;
            store.set_password(&name, &password)?;
            store.save()?;
            say(out, &format!("password of user {name} changed"))
        }
        UserCommand::Link {
            name,
            unix_user,
            store,
        } => {
            let mut store = load_with(&store, &name)?;
            let account = existing_account(&unix_user)?;
            store.link(&name, &account.name)?;
            store.save()?;
            say(
                out,
                &format!("user {name} linked to {}", describe(&account)),
            )
        }
        UserCommand::List { store } => {
            let dir = store.dir()?;
            let store = UserStore::load(&dir)?;
            let mut names = store.names();
            names.sort_by_key(|n| n.to_lowercase());
            for name in names {
                let account = store.unix_account(&name).unwrap_or(&name);
                let found = match unix::lookup(account) {
                    Ok(found) => format!("uid {}", found.uid),
                    Err(UnixError::NotFound(_)) => "missing".to_string(),
                    Err(e) => e.to_string(),
                };
                // A tab after the name, which may hold spaces but no tab.
                say(out, &format!("{name}\tunix {account} ({found})"))?;
            }
            Ok(())
        }
        UserCommand::Import(args) => {
            crate::samba_import::passdb::import(args, input, out, &mut io::stderr().lock())
        }
        UserCommand::Show { name, store } => {
            let dir = store.dir()?;
            let store = UserStore::load(&dir)?;
            let Some(account) = store.unix_account(&name) else {
                return Err(CmdError::runtime(format!("no user {name}")));
            };
            say(out, &format!("user: {name}"))?;
            say(out, &format!("unix account: {account}"))?;
            let found = unix::lookup(account).map_err(|e| {
                CmdError::runtime(format!(
                    "{e}; link user {name} to one with \
                     `copyless user link {name} --unix-user ACCOUNT`"
                ))
            })?;
            let groups: Vec<String> = found.groups.iter().map(|&gid| group(gid)).collect();
            say(out, &format!("uid: {}", found.uid))?;
            say(out, &format!("gid: {}", group(found.gid)))?;
            say(out, &format!("groups: {}", groups.join(",")))?;
            // Once a server has started here, the SID a DACL names it by.
            if let Some(machine) = crate::machine_sid::load(&dir) {
                say(out, &format!("sid: {}", user_sid(machine, found.uid)))?;
            }
            Ok(())
        }
    }
}

/// An existing account to link a user to.
pub(crate) fn existing_account(account: &str) -> Result<UnixAccount, CmdError> {
    if !unix::valid_account_name(account) {
        return Err(UserError::InvalidAccount(account.to_string()).into());
    }
    not_root(unix::lookup(account)?)
}

/// An account a user may act as: never root, whose sessions would pass
/// every permission on every share.
pub(crate) fn not_root(account: UnixAccount) -> Result<UnixAccount, CmdError> {
    if account.uid == 0 {
        return Err(CmdError::runtime(format!(
            "{} is root: a user acting as it would pass every permission on every share; \
             link the user to an account of its own",
            describe(&account)
        )));
    }
    Ok(account)
}

/// The account `name`, created as a system account if missing.
pub(crate) fn create_account(name: &str, out: &mut dyn Write) -> Result<UnixAccount, CmdError> {
    match unix::lookup(name) {
        Ok(account) => {
            let account = not_root(account)?;
            say(
                out,
                &format!("{} exists already; linking to it", describe(&account)),
            )?;
            Ok(account)
        }
        Err(UnixError::NotFound(_)) => {
            unix::create_system_account(name)?;
            let account = unix::lookup(name)?;
            say(out, &format!("created system {}", describe(&account)))?;
            Ok(account)
        }
        Err(e) => Err(e.into()),
    }
}

pub(crate) fn describe(account: &UnixAccount) -> String {
    format!("Unix account {} (uid {})", account.name, account.uid)
}

/// `gid(name)`, as id(1) shows a group; the number alone when it has no name.
fn group(gid: u32) -> String {
    match unix::group_name(gid) {
        Some(name) => format!("{gid}({name})"),
        None => gid.to_string(),
    }
}

pub(crate) fn say(out: &mut dyn Write, line: &str) -> Result<(), CmdError> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(|e| CmdError::runtime(format!("cannot write to standard output: {e}")))
}

/// User names compare case-insensitively, as on Windows.
/// The store, which must hold user `name`.
fn load_with(args: &StoreArgs, name: &str) -> Result<UserStore, CmdError> {
    let store = UserStore::load(&args.dir()?)?;
    if !has_user(&store, name) {
        return Err(CmdError::runtime(format!("no user {name}")));
    }
    Ok(store)
}

pub(crate) fn has_user(store: &UserStore, name: &str) -> bool {
    store
        .names()
        .iter()
        .any(|n| n.to_lowercase() == name.to_lowercase())
}

/// The store holds password equivalents (NT hashes), so its directory is
/// private to the owner when we create it.
pub(crate) fn create_state_dir(dir: &Path) -> Result<(), CmdError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            CmdError::runtime(format!(
                "cannot create state directory {}: {e}",
                dir.display()
            ))
        })
}

fn read_new_password(
    name: &str,
    from_stdin: bool,
    input: &mut dyn BufRead,
    prompt: &dyn Prompt,
) -> Result<Zeroizing<String>, CmdError> {
    let password = if from_stdin {
        read_password_line(input)?
    } else {
        let first = ask(prompt, &format!("Password for {name}: "))?;
        let second = ask(prompt, "Retype the password: ")?;
        if *first != *second {
            return Err(CmdError::runtime("the passwords do not match"));
        }
        first
    };
    if password.is_empty() {
        return Err(CmdError::usage("the password must not be empty"));
    }
    Ok(password)
}

fn ask(prompt: &dyn Prompt, text: &str) -> Result<Zeroizing<String>, CmdError> {
    prompt.ask(text).map(Zeroizing::new).map_err(|e| {
        CmdError::runtime(format!(
            "cannot read the password from the terminal ({e}); \
             use --password-stdin to give it on standard input"
        ))
    })
}

/// One line of standard input, without its line ending.
fn read_password_line(input: &mut dyn BufRead) -> Result<Zeroizing<String>, CmdError> {
    // Room up front so that a password of usual length is read without a
    // reallocation leaving an unzeroed copy behind.
    let mut line = Zeroizing::new(String::with_capacity(256));
    let n = input.read_line(&mut line).map_err(|e| {
        CmdError::runtime(format!("cannot read the password from standard input: {e}"))
    })?;
    if n == 0 {
        return Err(CmdError::usage("no password on standard input"));
    }
    if line.ends_with('\n') {
        line.pop();
        if line.ends_with('\r') {
            line.pop();
        }
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::io::Cursor;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "copyless-user-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Answers prompts from a script and records what was asked.
    struct Scripted {
        answers: RefCell<Vec<&'static str>>,
        asked: RefCell<Vec<String>>,
    }

    impl Scripted {
        fn new(answers: &[&'static str]) -> Scripted {
            Scripted {
                answers: RefCell::new(answers.iter().rev().copied().collect()),
                asked: RefCell::new(Vec::new()),
            }
        }
    }

    impl Prompt for Scripted {
        fn ask(&self, prompt: &str) -> io::Result<String> {
            self.asked.borrow_mut().push(prompt.to_string());
            self.answers
                .borrow_mut()
                .pop()
                .map(str::to_string)
                .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no terminal"))
        }
    }

    /// Runs one command with `stdin` as standard input; returns stdout or the error.
    fn exec(cmd: UserCommand, stdin: &str, prompt: &Scripted) -> Result<String, CmdError> {
        let mut input = Cursor::new(stdin.as_bytes().to_vec());
        let mut out = Vec::new();
        execute(cmd, &mut input, &mut out, prompt)?;
        Ok(String::from_utf8(out).unwrap())
    }

    /// An account that exists wherever the tests run and that a user may
    /// act as: the one they run as, or nobody when that is root.
    fn me() -> UnixAccount {
        let uid = rustix::process::geteuid().as_raw();
        let name = if uid == 0 {
            "nobody".to_string()
        } else {
            unix::account_name(uid).unwrap()
        };
        unix::lookup(&name).unwrap()
    }

    /// `user add NAME --unix-user ACCOUNT`, the password asked on the
    /// terminal unless `password_stdin`.
    fn add_linked(dir: &TempDir, name: &str, account: &str, password_stdin: bool) -> UserCommand {
        UserCommand::Add {
            name: name.to_string(),
            unix_user: Some(account.to_string()),
            create_unix_user: false,
            password_stdin,
            store: StoreArgs::at(&dir.0),
        }
    }

    /// `user add NAME --unix-user` the tests' own account.
    fn add(dir: &TempDir, name: &str) -> UserCommand {
        add_linked(dir, name, &me().name, true)
    }

    fn added(name: &str) -> String {
        let me = me();
        format!(
            "user {name} added, linked to Unix account {} (uid {})\n",
            me.name, me.uid
        )
    }

    fn list(dir: &TempDir) -> UserCommand {
        UserCommand::List {
            store: StoreArgs::at(&dir.0),
        }
    }

    /// The names `user list` shows.
    fn listed(dir: &TempDir) -> Vec<String> {
        let out = exec(list(dir), "", &Scripted::new(&[])).unwrap();
        out.lines()
            .map(|line| line.split('\t').next().unwrap().to_string())
            .collect()
    }

    fn link(dir: &TempDir, name: &str, account: &str) -> UserCommand {
        UserCommand::Link {
            name: name.to_string(),
            unix_user: account.to_string(),
            store: StoreArgs::at(&dir.0),
        }
    }

    fn show(dir: &TempDir, name: &str) -> UserCommand {
        UserCommand::Show {
            name: name.to_string(),
            store: StoreArgs::at(&dir.0),
        }
    }

    const MISSING: &str = "copyless-test-no-such-account";

    #[test]
    fn add_list_passwd_del() {
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        assert_eq!(
            exec(add(&dir, "bob"), "s3cret\n", &none).unwrap(),
            added("bob")
        );
        assert_eq!(
            exec(add(&dir, "Alice"), "pw\r\n", &none).unwrap(),
            added("Alice")
        );
        let me = me();
        let line = |name: &str| format!("{name}\tunix {} (uid {})\n", me.name, me.uid);
        assert_eq!(
            exec(list(&dir), "", &none).unwrap(),
            line("Alice") + &line("bob")
        );

        let passwd = UserCommand::Passwd {
            name: "bob".to_string(),
            password_stdin: true,
            store: StoreArgs::at(&dir.0),
        };
        assert_eq!(
            exec(passwd, "new\n", &none).unwrap(),
            "password of user bob changed\n"
        );

        let del = UserCommand::Del {
            name: "bob".to_string(),
            store: StoreArgs::at(&dir.0),
        };
        assert_eq!(exec(del, "", &none).unwrap(), "user bob deleted\n");
        assert_eq!(exec(list(&dir), "", &none).unwrap(), line("Alice"));
    }

    #[test]
    fn without_a_flag_the_account_of_the_same_name_is_linked() {
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        let me = me();
        let cmd = UserCommand::Add {
            name: me.name.clone(),
            unix_user: None,
            create_unix_user: false,
            password_stdin: true,
            store: StoreArgs::at(&dir.0),
        };
        assert_eq!(exec(cmd, "pw\n", &none).unwrap(), added(&me.name));
        let store = UserStore::load(&dir.0).unwrap();
        assert_eq!(store.unix_account(&me.name), Some(me.name.as_str()));
        // Linked by name, as in a store from before links: no third field.
        let contents = std::fs::read_to_string(store.path()).unwrap();
        assert_eq!(contents.lines().last().unwrap().split(':').count(), 2);

        let prompt = Scripted::new(&["pw", "pw"]);
        let cmd = UserCommand::Add {
            name: MISSING.to_string(),
            unix_user: None,
            create_unix_user: false,
            password_stdin: false,
            store: StoreArgs::at(&dir.0),
        };
        let err = exec(cmd, "", &prompt).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("no Unix account \"{MISSING}\"")),
            "{text}"
        );
        assert!(text.contains("--unix-user ACCOUNT"), "{text}");
        assert!(text.contains("--create-unix-user"), "{text}");
        assert!(prompt.asked.borrow().is_empty(), "refused before asking");
        assert_eq!(listed(&dir), [me.name]);
    }

    #[test]
    fn no_user_acts_as_root() {
        let dir = TempDir::new();
        let quiet = Scripted::new(&[]);
        for cmd in [
            add_linked(&dir, "boss", "root", true),
            UserCommand::Add {
                name: "root".into(),
                password_stdin: true,
                unix_user: None,
                create_unix_user: true,
                store: StoreArgs::at(&dir.0),
            },
        ] {
            let err = exec(cmd, "pw\n", &quiet).unwrap_err();
            assert!(err.to_string().contains("is root"), "{err}");
        }
        exec(add(&dir, "boss"), "pw\n", &quiet).unwrap();
        let err = exec(link(&dir, "boss", "root"), "", &quiet).unwrap_err();
        assert!(err.to_string().contains("is root"), "{err}");
    }

    #[test]
    fn unix_user_must_exist_and_be_a_valid_name() {
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        let err = exec(add_linked(&dir, "bob", MISSING, true), "pw\n", &none).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert_eq!(err.to_string(), format!("no Unix account \"{MISSING}\""));
        let err = exec(add_linked(&dir, "bob", "a:b", true), "pw\n", &none).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string().contains("invalid Unix account name"),
            "{err}"
        );
        assert!(listed(&dir).is_empty());
    }

    #[test]
    fn create_unix_user_links_an_existing_account() {
        let dir = TempDir::new();
        let me = me();
        let cmd = UserCommand::Add {
            name: me.name.clone(),
            unix_user: None,
            create_unix_user: true,
            password_stdin: true,
            store: StoreArgs::at(&dir.0),
        };
        let out = exec(cmd, "pw\n", &Scripted::new(&[])).unwrap();
        assert_eq!(
            out,
            format!(
                "Unix account {0} (uid {1}) exists already; linking to it\n{2}",
                me.name,
                me.uid,
                added(&me.name)
            )
        );

        // A name no account could have is refused before anything is made.
        let cmd = UserCommand::Add {
            name: "Bob".to_string(),
            unix_user: None,
            create_unix_user: true,
            password_stdin: true,
            store: StoreArgs::at(&dir.0),
        };
        let err = exec(cmd, "pw\n", &Scripted::new(&[])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("\"Bob\""), "{err}");
        assert_eq!(listed(&dir), [me.name]);
    }

    #[test]
    fn unix_user_and_create_unix_user_conflict() {
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(subcommand)]
            user: UserCommand,
        }
        use clap::Parser;
        let err = Cli::try_parse_from([
            "user",
            "add",
            "bob",
            "--unix-user",
            "root",
            "--create-unix-user",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert_eq!(err.exit_code(), 2);
        let err = Cli::try_parse_from(["user", "link", "bob"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn link_list_and_show() {
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        let daemon = unix::lookup("daemon").unwrap();
        exec(add(&dir, "bob"), "pw\n", &none).unwrap();
        assert_eq!(
            exec(link(&dir, "BOB", "daemon"), "", &none).unwrap(),
            format!(
                "user BOB linked to Unix account daemon (uid {})\n",
                daemon.uid
            )
        );
        assert_eq!(
            exec(list(&dir), "", &none).unwrap(),
            format!("bob\tunix daemon (uid {})\n", daemon.uid)
        );

        let groups: Vec<String> = daemon
            .groups
            .iter()
            .map(|gid| format!("{gid}({})", unix::group_name(*gid).unwrap()))
            .collect();
        assert_eq!(
            exec(show(&dir, "bob"), "", &none).unwrap(),
            format!(
                "user: bob\nunix account: daemon\nuid: {}\ngid: {}({})\ngroups: {}\n",
                daemon.uid,
                daemon.gid,
                unix::group_name(daemon.gid).unwrap(),
                groups.join(",")
            )
        );

        for (name, account, code) in [
            ("carol", "daemon", 1),
            ("bob", MISSING, 1),
            ("bob", "a b", 2),
        ] {
            let err = exec(link(&dir, name, account), "", &none).unwrap_err();
            assert_eq!(err.exit_code(), code, "{name} {account}: {err}");
        }
        assert_eq!(
            exec(show(&dir, "carol"), "", &none)
                .unwrap_err()
                .exit_code(),
            1
        );
        assert!(exec(show(&dir, "bob"), "", &none)
            .unwrap()
            .contains("unix account: daemon\n"));
        let _ = me;
    }

    #[test]
    fn a_missing_account_is_listed_and_shown_as_such() {
        let dir = TempDir::new();
        let mut store = UserStore::load(&dir.0).unwrap();
        store.add_linked("bob", "pw", MISSING).unwrap();
        store.save().unwrap();
        let none = Scripted::new(&[]);
        assert_eq!(
            exec(list(&dir), "", &none).unwrap(),
            format!("bob\tunix {MISSING} (missing)\n")
        );
        let mut input = Cursor::new(Vec::new());
        let mut out = Vec::new();
        let err = execute(show(&dir, "bob"), &mut input, &mut out, &none).unwrap_err();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("user: bob\nunix account: {MISSING}\n")
        );
        assert_eq!(err.exit_code(), 1);
        assert!(
            err.to_string()
                .ends_with("`copyless user link bob --unix-user ACCOUNT`"),
            "{err}"
        );
    }

    #[test]
    fn the_state_dir_is_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        exec(add(&dir, "bob"), "pw\n", &Scripted::new(&[])).unwrap();
        let mode = std::fs::metadata(&dir.0).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn adding_twice_fails_before_asking() {
        let dir = TempDir::new();
        exec(add(&dir, "bob"), "pw\n", &Scripted::new(&[])).unwrap();
        let prompt = Scripted::new(&["x", "x"]);
        let cmd = add_linked(&dir, "BOB", &me().name, false);
        let err = exec(cmd, "", &prompt).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert!(err.to_string().contains("already exists"), "{err}");
        assert!(prompt.asked.borrow().is_empty());
    }

    #[test]
    fn unknown_users_are_runtime_errors() {
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        exec(add(&dir, "bob"), "pw\n", &none).unwrap();
        let del = UserCommand::Del {
            name: "carol".to_string(),
            store: StoreArgs::at(&dir.0),
        };
        assert_eq!(exec(del, "", &none).unwrap_err().exit_code(), 1);
        let passwd = UserCommand::Passwd {
            name: "carol".to_string(),
            password_stdin: true,
            store: StoreArgs::at(&dir.0),
        };
        assert_eq!(exec(passwd, "pw\n", &none).unwrap_err().exit_code(), 1);
        assert_eq!(listed(&dir), ["bob"]);
    }

    #[test]
    fn terminal_prompt_asks_twice() {
        let dir = TempDir::new();
        let prompt = Scripted::new(&["pw", "pw"]);
        let cmd = add_linked(&dir, "bob", &me().name, false);
        assert_eq!(exec(cmd, "", &prompt).unwrap(), added("bob"));
        assert_eq!(
            *prompt.asked.borrow(),
            vec![
                "Password for bob: ".to_string(),
                "Retype the password: ".to_string()
            ]
        );
    }

    #[test]
    fn mismatched_passwords_add_nobody() {
        let dir = TempDir::new();
        let prompt = Scripted::new(&["one", "two"]);
        let cmd = add_linked(&dir, "bob", &me().name, false);
        let err = exec(cmd, "", &prompt).unwrap_err();
        assert_eq!(err.to_string(), "the passwords do not match");
        assert_eq!(err.exit_code(), 1);
        assert_eq!(exec(list(&dir), "", &Scripted::new(&[])).unwrap(), "");
    }

    #[test]
    fn password_lines() {
        let read = |s: &str| read_password_line(&mut Cursor::new(s.as_bytes().to_vec()));
        assert_eq!(*read("abc\n").unwrap(), "abc");
        assert_eq!(*read("abc\r\n").unwrap(), "abc");
        assert_eq!(*read("abc").unwrap(), "abc");
        assert_eq!(*read(" a b \nsecond line\n").unwrap(), " a b ");
        assert_eq!(*read("\n").unwrap(), "");
        assert_eq!(read("").unwrap_err().exit_code(), 2);
    }

    #[test]
    fn empty_passwords_are_refused() {
        let dir = TempDir::new();
        let err = exec(add(&dir, "bob"), "\n", &Scripted::new(&[])).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("empty"), "{err}");
        let err = exec(add(&dir, "bob"), "", &Scripted::new(&[])).unwrap_err();
        assert_eq!(err.to_string(), "no password on standard input");
    }

    #[test]
    fn an_insecure_store_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TempDir::new();
        let none = Scripted::new(&[]);
        exec(add(&dir, "bob"), "pw\n", &none).unwrap();
        let users = dir.0.join("users");
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o644)).unwrap();
        let name = || "bob".to_string();
        let store = || StoreArgs::at(&dir.0);
        for cmd in [
            list(&dir),
            add(&dir, "carol"),
            UserCommand::Del {
                name: name(),
                store: store(),
            },
            UserCommand::Passwd {
                name: name(),
                password_stdin: true,
                store: store(),
            },
        ] {
            let err = exec(cmd, "pw\n", &none).unwrap_err();
            assert_eq!(err.exit_code(), 1);
            let fix = format!("chmod 600 {}", users.display());
            assert!(err.to_string().contains(&fix), "{err}");
        }
        // Nothing was written: the file keeps its mode and its user.
        let mode = std::fs::metadata(&users).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(listed(&dir), ["bob"]);
    }
}
