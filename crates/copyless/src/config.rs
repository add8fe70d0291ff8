//! Server configuration: built-in defaults, the TOML file and CLI overrides.
//!
//! The file format is fixed by INTERFACE.md. Parsing goes in two steps: serde
//! reads the file into `raw` structs that keep the byte span of every value,
//! then `validate` turns them into a `Config`, so that semantic errors can
//! name the line just like syntax errors do.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use copyless_auth::kerberos::KerberosService;
use copyless_core::audit::{AuditKind, AuditKinds};
use copyless_core::hosts::{HostFilter, Network};
use copyless_core::{Principal, ShareAccess};
use copyless_engine::log_level::LogLevel;
use copyless_engine::{AuditTo, EngineKind};
use copyless_proto::negotiate as neg;
use copyless_vfs::Identity;
use copyless_vfs::NewModes;
use serde::Deserialize;
use toml::Spanned;

pub use crate::validate::ShareSource;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Configuration file, TOML (default: /etc/copyless/copyless.toml
    /// when run as root without --share and it exists, else none: the
    /// built-in defaults).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on; repeat for several. Replaces the configured
    /// list (default: the configuration's `listen`, else 0.0.0.0:445).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Vec<String>,
    /// Folder to serve read-write as share NAME; repeat for several.
    /// Replaces the configured shares (default: the configuration's, else
    /// ./share as "share").
    #[arg(long, value_name = "NAME=PATH")]
    pub share: Vec<String>,
    /// Directory for the user store and other state (default: the
    /// configuration's `state_dir`, else /var/lib/copyless for root, else
    /// $XDG_STATE_HOME/copyless or ~/.local/state/copyless).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The engine that serves connections: auto (io_uring where the kernel
    /// allows it, else threads), io_uring or threads. Replaces the
    /// configured one (default: the configuration's `engine`, else auto).
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    Required,
    Enabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encryption {
    Off,
    Desired,
    Required,
}

// Read by the engine, which is still being written.
#[allow(dead_code)]
#[derive(Debug, Clone, PartialEq)]
pub struct ShareConfig {
    pub name: String,
    pub path: PathBuf,
    pub read_only: bool,
    /// Who may use the share, and as whom (Unix groups and accounts
    /// looked up when the config is read).
    pub access: ShareAccess,
    /// Where it was configured, for what later checks say of it.
    pub source: ShareSource,
    /// The modes of what clients create in it.
    pub modes: NewModes,
    /// Shown beside its name when clients list the shares.
    pub comment: String,
    /// The names it hides and vetoes.
    pub names: ShareNames,
    /// What its audit trail keeps.
    pub audit: AuditKinds,
    /// Where its earlier states are (`snapshots`), shown as Previous
    /// Versions.
    pub snapshots: Option<copyless_vfs::snapshots::Source>,
    /// Its recycle bin (`recycle = true`).
    pub recycle: Option<RecycleConfig>,
}

/// A share's recycle bin: `recycle_exclude`, `recycle_max_size` (bytes,
/// 0 for any size) and `recycle_keep_days` (0 for ever).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecycleConfig {
    pub exclude: Vec<String>,
    pub max_size: u64,
    pub keep_days: u32,
}

/// `hide_dot_files`, `hide_files`, `veto_files` and `delete_veto_files`
/// of a share, as written (checked by [`copyless_core::NameRules::new`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShareNames {
    pub hide_dot_files: bool,
    pub hide_files: Vec<String>,
    pub veto_files: Vec<String>,
    pub delete_veto_files: bool,
}

impl ShareNames {
    pub fn rules(&self) -> Result<copyless_core::NameRules, String> {
        copyless_core::NameRules::new(
            self.hide_dot_files,
            &self.hide_files,
            &self.veto_files,
            self.delete_veto_files,
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// The largest SMB2 message, header included, accepted from a client.
    pub max_message_size: u32,
    /// The largest message accepted before a session is authenticated.
    pub max_preauth_message_size: u32,
    /// MaxReadSize and MaxWriteSize announced in NEGOTIATE.
    pub max_read_write: u32,
    pub max_connections: u32,
    /// Connections that have not authenticated yet, in all and from one
    /// client address; the oldest make room for new ones.
    pub max_unauthenticated_connections: u32,
    pub max_unauthenticated_per_address: u32,
    pub max_sessions_per_connection: u32,
    pub max_tree_connects_per_session: u32,
    /// Per session.
    pub max_open_files: u32,
    pub max_open_files_per_connection: u32,
    /// None: derived from the descriptor limit at start.
    pub max_open_files_per_user: Option<u32>,
    pub max_open_files_total: Option<u32>,
    /// Bytes of directory listings one connection keeps for its
    /// enumerations before it drops all but the newest...
    pub max_listing_bytes_per_connection: u32,
    /// ...one user over all its connections, and the whole server;
    /// past them listings are windows of their directories.
    pub max_listing_bytes_per_user: u32,
    pub max_listing_bytes_total: u32,
    pub max_credits: u16,
    /// NEGOTIATE and SESSION_SETUP must be done this long after accept.
    pub preauth_timeout_secs: u32,
    /// Directories watched (inotify) for changes local processes make,
    /// for CHANGE_NOTIFY; 0 reports only changes made through the server.
    pub max_local_watches: u32,
}

impl Limits {
    /// Each setting by its key in `[limits]`, for saying what a reload
    /// changed.
    pub fn by_key(&self) -> [(&'static str, String); 18] {
        // Destructured, so that a new setting cannot be left out.
        let Limits {
            max_message_size,
            max_preauth_message_size,
            max_read_write,
            max_connections,
            max_unauthenticated_connections,
            max_unauthenticated_per_address,
            max_sessions_per_connection,
            max_tree_connects_per_session,
            max_open_files,
            max_open_files_per_connection,
            max_open_files_per_user,
            max_open_files_total,
            max_listing_bytes_per_connection,
            max_listing_bytes_per_user,
            max_listing_bytes_total,
            max_credits,
            preauth_timeout_secs,
            max_local_watches,
        } = self;
        let derived = |v: &Option<u32>| v.map_or_else(|| "derived".to_owned(), |v| v.to_string());
        [
            ("max_message_size", max_message_size.to_string()),
            (
                "max_preauth_message_size",
                max_preauth_message_size.to_string(),
            ),
            ("max_read_write", max_read_write.to_string()),
            ("max_connections", max_connections.to_string()),
            (
                "max_unauthenticated_connections",
                max_unauthenticated_connections.to_string(),
            ),
            (
                "max_unauthenticated_per_address",
                max_unauthenticated_per_address.to_string(),
            ),
            (
                "max_sessions_per_connection",
                max_sessions_per_connection.to_string(),
            ),
            (
                "max_tree_connects_per_session",
                max_tree_connects_per_session.to_string(),
            ),
            ("max_open_files", max_open_files.to_string()),
            (
                "max_open_files_per_connection",
                max_open_files_per_connection.to_string(),
            ),
            ("max_open_files_per_user", derived(max_open_files_per_user)),
            ("max_open_files_total", derived(max_open_files_total)),
            (
                "max_listing_bytes_per_connection",
                max_listing_bytes_per_connection.to_string(),
            ),
            (
                "max_listing_bytes_per_user",
                max_listing_bytes_per_user.to_string(),
            ),
            (
                "max_listing_bytes_total",
                max_listing_bytes_total.to_string(),
            ),
            ("max_credits", max_credits.to_string()),
            ("preauth_timeout_secs", preauth_timeout_secs.to_string()),
            ("max_local_watches", max_local_watches.to_string()),
        ]
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_message_size: 8 * MIB + 64 * KIB,
            max_preauth_message_size: 64 * KIB,
            max_read_write: 8 * MIB,
            max_connections: 1024,
            max_unauthenticated_connections: 256,
            max_unauthenticated_per_address: 32,
            max_sessions_per_connection: 64,
            max_tree_connects_per_session: 128,
            max_open_files: 16384,
            max_open_files_per_connection: 16384,
            max_open_files_per_user: None,
            max_open_files_total: None,
            max_listing_bytes_per_connection: 64 * MIB,
            max_listing_bytes_per_user: 64 * MIB,
            max_listing_bytes_total: 256 * MIB,
            max_credits: 8192,
            preauth_timeout_secs: 10,
            max_local_watches: 8192,
        }
    }
}

// Read by the engine, which is still being written.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: Vec<SocketAddr>,
    pub state_dir: PathBuf,
    pub signing: Signing,
    pub encryption: Encryption,
    pub guest: bool,
    /// `map_to_guest = "bad user"`: a logon with an unknown user name is
    /// a guest's.
    pub map_to_guest: bool,
    /// The Unix account guests act as on disk.
    pub guest_account: String,
    /// The lowest and highest SMB dialect offered (`min_protocol`,
    /// `max_protocol`).
    pub dialects: (u16, u16),
    pub shares: Vec<ShareConfig>,
    /// `[homes]`: each user's own share, named after them, made from this
    /// (its path holds [`HOME_USER`]).
    pub homes: Option<ShareConfig>,
    pub limits: Limits,
    /// NetBIOS name of the server: at most 15 characters, upper case.
    pub server_name: String,
    /// `server_string`: what clients show beside the server's name, with
    /// `%h` replaced by the host name.
    pub server_string: String,
    /// The control socket `copyless top` reads; None for the default
    /// ([`Config::control_path`]).
    pub control: Option<PathBuf>,
    /// `[trace] enabled`: per-request tracing, on unless switched off.
    pub trace_enabled: bool,
    /// `multichannel`: SMB 3 clients may bind more connections to a
    /// session; on unless switched off.
    pub multichannel: bool,
    /// `change_notify`: CHANGE_NOTIFY is served; on unless switched off
    /// (then STATUS_NOT_IMPLEMENTED, as Samba's `change notify = no`).
    pub change_notify: bool,
    /// `[metrics] listen`: where to serve Prometheus metrics; off if None.
    pub metrics_listen: Option<SocketAddr>,
    /// `[metrics] user_labels`: label per-client series with user names
    /// too, not only addresses; off unless set.
    pub metrics_user_labels: bool,
    /// `engine`: which engine serves connections.
    pub engine: EngineKind,
    /// `[kerberos]`: the service's keys and realm, read when the config
    /// is; Kerberos logons are refused when None.
    pub kerberos: Option<Arc<KerberosService>>,
    /// `[discovery]`: how clients on the local network find the server.
    pub discovery: Discovery,
    /// `[security] quota_admins`: the users (and members of the groups)
    /// who may list every user's disk quota and set limits over SMB.
    pub quota_admins: Vec<Principal>,
    /// `[security] hosts_allow` and `hosts_deny`: the client addresses
    /// let in at all (the engine drops the others at accept).
    pub hosts: HostFilter,
    /// `[audit]`: where shares' audit events go.
    pub audit_to: AuditTo,
    /// `[log] level`: how much the server says.
    pub log_level: LogLevel,
}

/// `[discovery]`: the announcements that make the server show up in
/// Finder (mDNS/DNS-SD) and in Explorer's Network (WS-Discovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// `mdns`: announce `_smb._tcp` and `_device-info._tcp`.
    pub mdns: bool,
    /// `wsd`: answer WS-Discovery and its metadata exchange.
    pub wsd: bool,
    /// `model`: the `_device-info._tcp` model, which picks Finder's icon.
    pub model: String,
    /// `workgroup`: the workgroup Explorer files the computer under.
    pub workgroup: String,
}

impl Default for Discovery {
    fn default() -> Discovery {
        Discovery {
            mdns: true,
            wsd: true,
            model: DEFAULT_MODEL.to_string(),
            workgroup: DEFAULT_WORKGROUP.to_string(),
        }
    }
}

/// Finder draws a rack server for it, as for an Xserve.
const DEFAULT_MODEL: &str = "RackMac";
const DEFAULT_WORKGROUP: &str = "WORKGROUP";
/// A TXT string holds 255 bytes, `model=` included; names are short.
const MAX_MODEL: usize = 64;

/// What is wrong with the configuration, and where.
#[derive(Debug)]
pub struct ConfigError {
    file: Option<PathBuf>,
    line: Option<usize>,
    message: String,
}

impl ConfigError {
    /// An error without a place in a file (a command line argument, the
    /// built-in default).
    pub(crate) fn plain(message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: None,
            line: None,
            message: message.into(),
        }
    }

    /// What is wrong, without the file and line.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// An error found after parsing, at `line` of `file`.
    pub(crate) fn in_file(file: &Path, line: usize, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: Some(file.to_path_buf()),
            line: Some(line),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: {}", file.display(), self.message),
            (Some(file), None) => write!(f, "{}: {}", file.display(), self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

const KIB: u32 = 1024;
const MIB: u32 = 1024 * 1024;
/// The largest message the Direct TCP transport's 24-bit length can carry.
const MAX_TRANSPORT: u32 = 0x00FF_FFFF;
/// Room for the SMB2 header and a command's fixed part around a payload.
const HEADER_ROOM: u32 = 64 * KIB;
/// One credit pays for 64 KiB of payload (MS-SMB2 3.1.5.2).
const CREDIT_UNIT: u32 = 64 * KIB;
const MAX_SHARE_NAME: usize = 80;
const MAX_SERVER_NAME: usize = 15;
const DEFAULT_SERVER_NAME: &str = "COPYLESS";
/// The account guests act as on disk unless the config names another.
pub const DEFAULT_GUEST_ACCOUNT: &str = "nobody";
/// The file the service reads (dist/copyless.service), and so the one
/// every command reads when run as root without --config.
pub const DEFAULT_CONFIG_FILE: &str = "/etc/copyless/copyless.toml";

/// The configuration file a command reads when not given one: the
/// service's, for root, when it exists; None for the built-in defaults.
pub fn default_config_file() -> Option<PathBuf> {
    let path = Path::new(DEFAULT_CONFIG_FILE);
    (rustix::process::geteuid().is_root() && path.exists()).then(|| path.to_path_buf())
}

impl ServeArgs {
    /// The file this serve reads: --config, else the default one unless
    /// --share gives the shares (scripts that serve a folder of theirs
    /// get the built-in defaults, whatever is installed).
    pub fn config_file(&self) -> Option<PathBuf> {
        match &self.config {
            Some(file) => Some(file.clone()),
            None if self.share.is_empty() => default_config_file(),
            None => None,
        }
    }

    /// Whether the built-in default share is served (no file, no
    /// --share): the only one made when missing, since a configured path
    /// that is missing is more likely a typo.
    pub fn serves_builtin_share(&self) -> bool {
        self.config_file().is_none() && self.share.is_empty()
    }
}

/// Where the user store and other state live unless told otherwise.
pub fn default_state_dir() -> PathBuf {
    state_dir_for(
        rustix::process::geteuid().is_root(),
        std::env::var_os("XDG_STATE_HOME"),
        std::env::var_os("HOME"),
    )
}

fn state_dir_for(root: bool, xdg_state_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    if root {
        return PathBuf::from("/var/lib/copyless");
    }
    // The XDG spec says relative values are to be ignored.
    if let Some(xdg) = xdg_state_home.map(PathBuf::from) {
        if xdg.is_absolute() {
            return xdg.join("copyless");
        }
    }
    match home.map(PathBuf::from) {
        Some(home) if home.is_absolute() => home.join(".local/state/copyless"),
        // No usable home: keep the state beside where we were started.
        _ => absolute(Path::new("copyless-state")),
    }
}

pub fn default_control_path(root: bool, state_dir: &Path) -> PathBuf {
    if root {
        PathBuf::from("/run/copyless/control.sock")
    } else {
        state_dir.join("control.sock")
    }
}

fn default_server_name() -> String {
    let uname = rustix::system::uname();
    netbios_name(&uname.nodename().to_string_lossy())
}

/// The NetBIOS form of a host name: first label, upper case, at most 15
/// characters; names we cannot use fall back to "COPYLESS".
fn netbios_name(hostname: &str) -> String {
    let label = hostname.split('.').next().unwrap_or("");
    let name: String = label
        .chars()
        .take(MAX_SERVER_NAME)
        .collect::<String>()
        .to_ascii_uppercase();
    if name.is_empty() || !name.chars().all(is_server_name_char) {
        DEFAULT_SERVER_NAME.to_string()
    } else {
        name
    }
}

/// Whether `name` may be the `server_name`.
pub(crate) fn is_server_name(name: &str) -> bool {
    (1..=MAX_SERVER_NAME).contains(&name.chars().count()) && name.chars().all(is_server_name_char)
}

/// A `_device-info` model. A TXT value may hold any bytes, but Finder
/// matches known model names: printable ASCII keeps typos visible.
pub(crate) fn is_model(text: &str) -> bool {
    (1..=MAX_MODEL).contains(&text.len()) && text.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

fn is_server_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// Makes a path absolute against the current directory without touching the
/// filesystem; on failure (no current directory) the path is kept as given.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Config {
    /// The built-in default: listen 0.0.0.0:445, share "share" at ./share
    /// (created if missing by serve, not here), the default state dir,
    /// signing required, encryption off, no guest.
    pub fn builtin() -> Config {
        Config {
            listen: vec![SocketAddr::from(([0, 0, 0, 0], 445))],
            state_dir: default_state_dir(),
            signing: Signing::Required,
            encryption: Encryption::Off,
            guest: false,
            guest_account: DEFAULT_GUEST_ACCOUNT.to_string(),
            map_to_guest: false,
            dialects: ALL_DIALECTS,
            shares: vec![ShareConfig {
                name: "share".to_string(),
                path: absolute(Path::new("share")),
                read_only: false,
                access: ShareAccess::default(),
                source: ShareSource::Builtin,
                modes: NewModes::default(),
                comment: String::new(),
                names: ShareNames::default(),
                audit: AuditKinds::NONE,
                snapshots: None,
                recycle: None,
            }],
            homes: None,
            limits: Limits::default(),
            server_name: default_server_name(),
            server_string: String::new(),
            control: None,
            trace_enabled: true,
            multichannel: true,
            change_notify: true,
            metrics_listen: None,
            metrics_user_labels: false,
            audit_to: AuditTo::Journal,
            quota_admins: Vec::new(),
            log_level: LogLevel::Info,
            engine: EngineKind::default(),
            kerberos: None,
            discovery: Discovery::default(),
            hosts: HostFilter::default(),
        }
    }

    /// The control socket: as configured, else
    /// `/run/copyless/control.sock` for root and `<state_dir>/control.sock`
    /// for anyone else.
    pub fn control_path(&self) -> PathBuf {
        match &self.control {
            Some(path) => path.clone(),
            None => default_control_path(rustix::process::geteuid().is_root(), &self.state_dir),
        }
    }

    /// Parses a TOML config file. Every error names the file and, where it
    /// can, the 1-based line. Relative paths in the file are resolved against
    /// the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            line: None,
            message: format!("cannot read: {e}"),
        })?;
        Config::from_text(&text, path)
    }

    /// Parses `text` as [`Config::load`] parses the file `path` holding
    /// it: a config made in memory can be checked before it is written.
    pub fn from_text(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let base = absolute(path)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/"));
        parse(text, &base, path).map_err(|e| ConfigError {
            file: Some(path.to_path_buf()),
            line: e.span.map(|span| line_of(text, span.start)),
            message: e.message,
        })
    }

    /// The built-in default or the configuration file
    /// ([`ServeArgs::config_file`]), then the CLI overrides.
    pub fn from_serve_args(args: &ServeArgs) -> Result<Config, ConfigError> {
        let file = args.config_file();
        let mut config = match &file {
            Some(path) => Config::load(path)?,
            None => Config::builtin(),
        };
        if !args.listen.is_empty() {
            config.listen = parse_listen_args(&args.listen)?;
        }
        if !args.share.is_empty() {
            config.shares = parse_share_args(&args.share)?;
        }
        if let Some(engine) = &args.engine {
            config.engine =
                parse_engine(engine).map_err(|m| ConfigError::plain(format!("--engine: {m}")))?;
        }
        if let Some(dir) = &args.state_dir {
            if dir.as_os_str().is_empty() {
                return Err(ConfigError::plain("--state-dir: must not be empty"));
            }
            config.state_dir = absolute(dir);
        }
        if config.shares.is_empty() {
            let source = match &file {
                Some(path) => format!("{}: ", path.display()),
                None => String::new(),
            };
            return Err(ConfigError::plain(format!(
                "{source}no share configured: add a [[share]] table or --share NAME=PATH"
            )));
        }
        Ok(config)
    }
}

fn parse_engine(name: &str) -> Result<EngineKind, String> {
    match name {
        "auto" => Ok(EngineKind::Auto),
        "io_uring" => Ok(EngineKind::IoUring),
        "threads" => Ok(EngineKind::Threads),
        other => Err(format!(
            "engine {other:?} must be \"auto\", \"io_uring\" or \"threads\""
        )),
    }
}

fn parse_listen_args(args: &[String]) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut listen = Vec::with_capacity(args.len());
    for arg in args {
        let addr = parse_listen(arg)
            .map_err(|message| ConfigError::plain(format!("--listen {arg:?}: {message}")))?;
        if listen.contains(&addr) {
            return Err(ConfigError::plain(format!(
                "--listen {arg:?}: address given twice"
            )));
        }
        listen.push(addr);
    }
    Ok(listen)
}

fn parse_share_args(args: &[String]) -> Result<Vec<ShareConfig>, ConfigError> {
    let mut shares: Vec<ShareConfig> = Vec::with_capacity(args.len());
    for arg in args {
        let bad = |message: String| ConfigError::plain(format!("--share {arg:?}: {message}"));
        let (name, path) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected NAME=PATH".to_string()))?;
        check_share_name(name).map_err(bad)?;
        if shares.iter().any(|s| same_share_name(&s.name, name)) {
            return Err(bad(format!("share name {name:?} given twice")));
        }
        if path.is_empty() {
            return Err(bad("the path must not be empty".to_string()));
        }
        shares.push(ShareConfig {
            name: name.to_string(),
            path: absolute(Path::new(path)),
            read_only: false,
            access: ShareAccess::default(),
            source: ShareSource::Argument(arg.clone()),
            modes: NewModes::default(),
            comment: String::new(),
            names: ShareNames::default(),
            audit: AuditKinds::NONE,
            snapshots: None,
            recycle: None,
        });
    }
    Ok(shares)
}

fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>().map_err(|_| {
        "not an ADDR:PORT address (e.g. 0.0.0.0:445, [::]:445, 127.0.0.1:0)".to_string()
    })
}

/// Share names follow the rules Windows applies to NetShareAdd
/// (MS-SRVS 3.1.4.7): 1 to 80 characters, none of `"/\[]:|<>+=;,*?` and no
/// control characters.
pub(crate) fn check_share_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("share name must not be empty".to_string());
    }
    let len = name.chars().count();
    if len > MAX_SHARE_NAME {
        return Err(format!(
            "share name {name:?} is {len} characters long, the limit is {MAX_SHARE_NAME}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c.is_control() || "\"/\\[]:|<>+=;,*?".contains(c))
    {
        return Err(format!(
            "share name {name:?} contains the invalid character {c:?}"
        ));
    }
    if name.trim() != name {
        return Err(format!(
            "share name {name:?} starts or ends with white space"
        ));
    }
    if same_share_name(name, "IPC$") {
        return Err("share name \"IPC$\" is reserved for the server".to_string());
    }
    Ok(())
}

/// Share names compare case-insensitively, as on Windows.
fn same_share_name(a: &str, b: &str) -> bool {
    a.to_uppercase() == b.to_uppercase()
}

/// Returns the 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()
        .get(..end)
        .map_or(0, |before| before.iter().filter(|&&b| b == b'\n').count())
        + 1
}

/// The file's shape, as serde sees it; spans are kept for error messages.
mod raw {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct File {
        pub listen: Option<Spanned<Vec<Spanned<String>>>>,
        pub state_dir: Option<Spanned<String>>,
        pub server_name: Option<Spanned<String>>,
        pub server_string: Option<Spanned<String>>,
        pub engine: Option<Spanned<String>>,
        pub multichannel: Option<bool>,
        pub change_notify: Option<bool>,
        pub security: Option<Security>,
        pub share: Option<Vec<Share>>,
        pub homes: Option<Share>,
        pub limits: Option<Limits>,
        pub control: Option<Spanned<String>>,
        pub trace: Option<Trace>,
        pub metrics: Option<Metrics>,
        pub kerberos: Option<Kerberos>,
        pub discovery: Option<Discovery>,
        pub audit: Option<Audit>,
        pub log: Option<Log>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Audit {
        pub file: Option<Spanned<String>>,
        pub max_size_mib: Option<Spanned<u32>>,
        pub keep: Option<Spanned<u32>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Log {
        pub level: Option<Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Discovery {
        pub mdns: Option<bool>,
        pub wsd: Option<bool>,
        pub model: Option<Spanned<String>>,
        pub workgroup: Option<Spanned<String>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Kerberos {
        pub keytab: Spanned<String>,
        pub realm: Option<Spanned<String>>,
        pub clock_skew: Option<Spanned<i64>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Trace {
        pub enabled: Option<bool>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Metrics {
        pub listen: Option<Spanned<String>>,
        pub user_labels: Option<bool>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Security {
        pub signing: Option<Spanned<String>>,
        pub encryption: Option<Spanned<String>>,
        pub guest: Option<Spanned<bool>>,
        pub guest_account: Option<Spanned<String>>,
        pub map_to_guest: Option<Spanned<String>>,
        pub hosts_allow: Option<Spanned<Vec<Spanned<String>>>>,
        pub hosts_deny: Option<Spanned<Vec<Spanned<String>>>>,
        pub min_protocol: Option<Spanned<String>>,
        pub max_protocol: Option<Spanned<String>>,
        pub quota_admins: Option<Spanned<Vec<String>>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Share {
        pub name: Option<Spanned<String>>,
        pub path: Spanned<String>,
        #[serde(default)]
        pub read_only: bool,
        pub valid_users: Option<Spanned<Vec<String>>>,
        pub read_only_users: Option<Spanned<Vec<String>>>,
        pub write_users: Option<Spanned<Vec<String>>>,
        pub guest_ok: Option<Spanned<bool>>,
        pub browseable: Option<bool>,
        #[serde(default)]
        pub access_based_enumeration: bool,
        #[serde(default)]
        pub access_based_share_enum: bool,
        pub force_user: Option<Spanned<String>>,
        pub force_group: Option<Spanned<String>>,
        pub hosts_allow: Option<Spanned<Vec<Spanned<String>>>>,
        pub hosts_deny: Option<Spanned<Vec<Spanned<String>>>>,
        pub create_mask: Option<Spanned<toml::Value>>,
        pub directory_mask: Option<Spanned<toml::Value>>,
        pub force_create_mode: Option<Spanned<toml::Value>>,
        pub force_directory_mode: Option<Spanned<toml::Value>>,
        #[serde(default)]
        pub inherit_permissions: bool,
        #[serde(default)]
        pub inherit_acls: bool,
        pub comment: Option<Spanned<String>>,
        #[serde(default)]
        pub hide_dot_files: bool,
        pub hide_files: Option<Spanned<Vec<String>>>,
        pub veto_files: Option<Spanned<Vec<String>>>,
        #[serde(default)]
        pub delete_veto_files: bool,
        pub audit: Option<Spanned<Vec<Spanned<String>>>>,
        pub snapshots: Option<Spanned<String>>,
        pub recycle: Option<Spanned<bool>>,
        pub recycle_exclude: Option<Spanned<Vec<String>>>,
        pub recycle_max_size: Option<Spanned<i64>>,
        pub recycle_keep_days: Option<Spanned<i64>>,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Limits {
        pub max_message_size: Option<Spanned<u32>>,
        pub max_preauth_message_size: Option<Spanned<u32>>,
        pub max_read_write: Option<Spanned<u32>>,
        pub max_connections: Option<Spanned<u32>>,
        pub max_unauthenticated_connections: Option<Spanned<u32>>,
        pub max_unauthenticated_per_address: Option<Spanned<u32>>,
        pub max_sessions_per_connection: Option<Spanned<u32>>,
        pub max_tree_connects_per_session: Option<Spanned<u32>>,
        pub max_open_files: Option<Spanned<u32>>,
        pub max_open_files_per_connection: Option<Spanned<u32>>,
        pub max_open_files_per_user: Option<Spanned<u32>>,
        pub max_open_files_total: Option<Spanned<u32>>,
        pub max_listing_bytes_per_connection: Option<Spanned<u32>>,
        pub max_listing_bytes_per_user: Option<Spanned<u32>>,
        pub max_listing_bytes_total: Option<Spanned<u32>>,
        pub max_credits: Option<Spanned<u16>>,
        pub preauth_timeout_secs: Option<Spanned<u32>>,
        pub max_local_watches: Option<Spanned<u32>>,
    }
}

/// Whether `text`, which TOML refused, reads as an smb.conf: a
/// `[global]` section, a key with a space in it (`read only = no`, which
/// TOML cannot hold), or a `;` comment line.
fn looks_like_smb_conf(text: &str) -> bool {
    text.lines().map(str::trim).any(|l| {
        l.eq_ignore_ascii_case("[global]")
            || l.starts_with(';')
            || l.split_once('=').is_some_and(|(k, _)| {
                let k = k.trim();
                k.contains(' ') && !k.starts_with(['"', '\'', '#', '['])
            })
    })
}

/// An error inside the file text, before the file name is attached.
struct SpanError {
    span: Option<Range<usize>>,
    message: String,
}

impl SpanError {
    fn at<T>(value: &Spanned<T>, message: impl Into<String>) -> SpanError {
        SpanError {
            span: Some(value.span()),
            message: message.into(),
        }
    }
}

fn parse(text: &str, base: &Path, file_name: &Path) -> Result<Config, SpanError> {
    let file: raw::File = toml::from_str(text).map_err(|e| {
        let mut message = e.message().trim_end().to_string();
        if looks_like_smb_conf(text) {
            message.push_str(&format!(
                "; this looks like Samba's smb.conf: convert it with `copyless import smb.conf {}`",
                file_name.display()
            ));
        }
        SpanError {
            span: e.span(),
            message,
        }
    })?;

    let listen = match file.listen {
        None => vec![SocketAddr::from(([0, 0, 0, 0], 445))],
        Some(list) => parse_listen_list(&list)?,
    };

    let state_dir = match file.state_dir {
        None => default_state_dir(),
        Some(dir) => {
            if dir.get_ref().is_empty() {
                return Err(SpanError::at(&dir, "state_dir must not be empty"));
            }
            file_path(&dir, base, "state_dir")?
        }
    };

    let server_name = match file.server_name {
        None => default_server_name(),
        Some(name) => check_server_name(&name)?,
    };
    let host = rustix::system::uname();
    let server_string = one_line("server_string", file.server_string.as_ref())?
        .replace("%h", &host.nodename().to_string_lossy());

    let engine = match file.engine {
        None => EngineKind::default(),
        Some(e) => parse_engine(e.get_ref()).map_err(|m| SpanError::at(&e, m))?,
    };
    let guest_account = match file
        .security
        .as_ref()
        .and_then(|s| s.guest_account.as_ref())
    {
        None => DEFAULT_GUEST_ACCOUNT.to_string(),
        Some(name) if name.get_ref().is_empty() => {
            return Err(SpanError::at(name, "guest_account must not be empty"))
        }
        Some(name) => name.get_ref().clone(),
    };
    check_guest_account(file.security.as_ref(), &guest_account)?;
    let hosts = match &file.security {
        None => HostFilter::default(),
        Some(s) => parse_hosts(s.hosts_allow.as_ref(), s.hosts_deny.as_ref())?,
    };
    let dialects = parse_protocols(file.security.as_ref())?;
    let map_to_guest = parse_map_to_guest(file.security.as_ref())?;
    let quota_admins = match file.security.as_ref().and_then(|s| s.quota_admins.as_ref()) {
        Some(list) => principals(list, "quota_admins")?,
        None => Vec::new(),
    };
    let (signing, encryption, guest) = parse_security(file.security)?;
    let source = |spans: Vec<(&'static str, Range<usize>)>| ShareSource::File {
        file: file_name.to_path_buf(),
        lines: spans
            .into_iter()
            .map(|(key, span)| (key, line_of(text, span.start)))
            .collect(),
    };
    let shares = parse_shares(file.share.unwrap_or_default(), text, base, &source)?;
    let homes = file
        .homes
        .as_ref()
        .map(|h| parse_homes(h, text, base, &source))
        .transpose()?;
    let limits = parse_limits(file.limits)?;

    let control = match file.control {
        None => None,
        Some(path) => {
            if path.get_ref().is_empty() {
                return Err(SpanError::at(&path, "control must not be empty"));
            }
            Some(file_path(&path, base, "control")?)
        }
    };
    let kerberos = match file.kerberos {
        None => None,
        Some(k) => Some(Arc::new(parse_kerberos(k, base)?)),
    };
    let discovery = parse_discovery(file.discovery)?;
    let audit_to = parse_audit(file.audit, base)?;
    let log_level = parse_log(file.log)?;
    let trace_enabled = file.trace.and_then(|t| t.enabled).unwrap_or(true);
    let multichannel = file.multichannel.unwrap_or(true);
    let change_notify = file.change_notify.unwrap_or(true);
    let metrics_user_labels = file
        .metrics
        .as_ref()
        .and_then(|m| m.user_labels)
        .unwrap_or(false);
    let metrics_listen = match file.metrics.and_then(|m| m.listen) {
        None => None,
        Some(addr) => Some(parse_listen(addr.get_ref()).map_err(|m| {
            SpanError::at(&addr, format!("metrics listen {:?}: {m}", addr.get_ref()))
        })?),
    };

    Ok(Config {
        listen,
        state_dir,
        signing,
        encryption,
        guest,
        guest_account,
        map_to_guest,
        dialects,
        shares,
        homes,
        limits,
        server_name,
        server_string,
        control,
        trace_enabled,
        multichannel,
        change_notify,
        metrics_listen,
        metrics_user_labels,
        engine,
        kerberos,
        discovery,
        hosts,
        audit_to,
        log_level,
        quota_admins,
    })
}

/// `[audit]`: a file, rotated at `max_size_mib` (default 10) keeping
/// `keep` old ones (default 5), or without `file` the journal.
fn parse_audit(raw: Option<raw::Audit>, base: &Path) -> Result<AuditTo, SpanError> {
    let Some(raw) = raw else {
        return Ok(AuditTo::Journal);
    };
    let Some(file) = raw.file else {
        if let Some(key) = raw.max_size_mib.as_ref().or(raw.keep.as_ref()) {
            return Err(SpanError::at(
                key,
                "[audit] max_size_mib and keep are for a file: name it with `file`",
            ));
        }
        return Ok(AuditTo::Journal);
    };
    if file.get_ref().is_empty() {
        return Err(SpanError::at(&file, "[audit] file must not be empty"));
    }
    let max_size_mib = match raw.max_size_mib {
        None => 10,
        Some(m) if (1..=65_536).contains(m.get_ref()) => *m.get_ref(),
        Some(m) => return Err(SpanError::at(&m, "[audit] max_size_mib: from 1 to 65536")),
    };
    let keep = match raw.keep {
        None => 5,
        Some(k) if *k.get_ref() <= 1000 => *k.get_ref(),
        Some(k) => return Err(SpanError::at(&k, "[audit] keep: at most 1000 old files")),
    };
    Ok(AuditTo::File {
        path: file_path(&file, base, "file")?,
        max_bytes: u64::from(max_size_mib) << 20,
        keep,
    })
}

/// `[log] level`: error, warning, info (the default) or debug.
fn parse_log(raw: Option<raw::Log>) -> Result<LogLevel, SpanError> {
    let Some(level) = raw.and_then(|l| l.level) else {
        return Ok(LogLevel::Info);
    };
    LogLevel::named(level.get_ref()).ok_or_else(|| {
        SpanError::at(
            &level,
            format!(
                "[log] level {:?}: error, warning, info or debug",
                level.get_ref()
            ),
        )
    })
}

fn parse_discovery(raw: Option<raw::Discovery>) -> Result<Discovery, SpanError> {
    let mut discovery = Discovery::default();
    let Some(raw) = raw else {
        return Ok(discovery);
    };
    discovery.mdns = raw.mdns.unwrap_or(true);
    discovery.wsd = raw.wsd.unwrap_or(true);
    if let Some(model) = &raw.model {
        let text = model.get_ref();
        if !is_model(text) {
            return Err(SpanError::at(
                model,
                format!("model {text:?} must be 1 to {MAX_MODEL} printable ASCII characters"),
            ));
        }
        discovery.model = text.clone();
    }
    if let Some(workgroup) = &raw.workgroup {
        let text = workgroup.get_ref();
        if !is_server_name(text) {
            return Err(SpanError::at(
                workgroup,
                format!(
                    "workgroup {text:?} must be 1 to {MAX_SERVER_NAME} ASCII letters, digits, \
                     '-' or '_'"
                ),
            ));
        }
        discovery.workgroup = text.to_ascii_uppercase();
    }
    Ok(discovery)
}

/// Seconds a client's clock may differ from the server's, as MIT and
/// Windows allow by default.
const DEFAULT_CLOCK_SKEW: u64 = 300;

/// Encryption types the acceptor takes (aes128 and aes256-cts-hmac-sha1-96).
const AES_ENCTYPES: [i32; 2] = [17, 18];

/// `[kerberos]`: reads the keytab now, so that a missing or unusable one
/// is a configuration error naming its line, not a failed logon later.
fn parse_kerberos(k: raw::Kerberos, base: &Path) -> Result<KerberosService, SpanError> {
    let path = file_path(&k.keytab, base, "keytab")?;
    let shown = path.display();
    let data = std::fs::read(&path)
        .map_err(|e| SpanError::at(&k.keytab, format!("keytab {shown}: cannot read: {e}")))?;
    let keytab = copyless_auth::keytab::parse(&data)
        .map_err(|e| SpanError::at(&k.keytab, format!("keytab {shown}: {e}")))?;
    if !keytab.iter().any(|e| AES_ENCTYPES.contains(&e.enctype)) {
        return Err(SpanError::at(
            &k.keytab,
            format!(
                "keytab {shown} holds no AES key (aes256-cts-hmac-sha1-96 or \
                 aes128-cts-hmac-sha1-96), the only kinds copyless accepts"
            ),
        ));
    }
    let realm = match &k.realm {
        Some(realm) if realm.get_ref().is_empty() => {
            return Err(SpanError::at(realm, "realm must not be empty"))
        }
        Some(realm) => realm.get_ref().clone(),
        None => {
            let mut realms: Vec<&str> = keytab.iter().map(|e| e.realm.as_str()).collect();
            realms.sort_unstable();
            realms.dedup();
            match realms.as_slice() {
                [one] => one.to_string(),
                _ => {
                    return Err(SpanError::at(
                        &k.keytab,
                        format!(
                            "keytab {shown} holds keys of realms {}: say which realm's users \
                             log on with `realm`",
                            realms.join(", ")
                        ),
                    ))
                }
            }
        }
    };
    let skew = match &k.clock_skew {
        None => DEFAULT_CLOCK_SKEW,
        Some(skew) => u64::try_from(*skew.get_ref())
            .ok()
            .filter(|s| (1..=3600).contains(s))
            .ok_or_else(|| SpanError::at(skew, "clock_skew must be 1 to 3600 seconds"))?,
    };
    Ok(KerberosService::new(keytab, realm, skew))
}

fn parse_listen_list(list: &Spanned<Vec<Spanned<String>>>) -> Result<Vec<SocketAddr>, SpanError> {
    if list.get_ref().is_empty() {
        return Err(SpanError::at(
            list,
            "listen must name at least one ADDR:PORT",
        ));
    }
    let mut addrs = Vec::with_capacity(list.get_ref().len());
    for item in list.get_ref() {
        let addr = parse_listen(item.get_ref())
            .map_err(|m| SpanError::at(item, format!("listen {:?}: {m}", item.get_ref())))?;
        if addrs.contains(&addr) {
            return Err(SpanError::at(
                item,
                format!("listen {:?}: address given twice", item.get_ref()),
            ));
        }
        addrs.push(addr);
    }
    Ok(addrs)
}

fn check_server_name(name: &Spanned<String>) -> Result<String, SpanError> {
    let text = name.get_ref();
    if text.is_empty() || text.chars().count() > MAX_SERVER_NAME {
        return Err(SpanError::at(
            name,
            format!("server_name {text:?} must be 1 to {MAX_SERVER_NAME} characters long"),
        ));
    }
    if !text.chars().all(is_server_name_char) {
        return Err(SpanError::at(
            name,
            format!("server_name {text:?} may hold only ASCII letters, digits, '-' and '_'"),
        ));
    }
    Ok(text.to_ascii_uppercase())
}

/// A path from the file: relative ones are taken from the file's directory.
fn file_path(value: &Spanned<String>, base: &Path, key: &str) -> Result<PathBuf, SpanError> {
    if value.get_ref().contains('\0') {
        return Err(SpanError::at(
            value,
            format!("{key} contains a NUL character"),
        ));
    }
    Ok(base.join(value.get_ref()))
}

/// Every dialect copyless speaks, by Samba's names.
pub const ALL_DIALECTS: (u16, u16) = (neg::DIALECT_202, neg::DIALECT_311);

/// The dialect a protocol name stands for, as the lowest (`min`) or the
/// highest offered: Samba's names, `SMB2` and `SMB3` being the first of
/// their family as a minimum and the last as a maximum.
pub fn dialect_named(name: &str, min: bool) -> Option<u16> {
    Some(match (name.to_ascii_uppercase().as_str(), min) {
        ("SMB2_02", _) | ("SMB2", true) => neg::DIALECT_202,
        ("SMB2_10", _) | ("SMB2", false) => neg::DIALECT_210,
        ("SMB3_00", _) | ("SMB3", true) => neg::DIALECT_300,
        ("SMB3_02", _) => neg::DIALECT_302,
        ("SMB3_11", _) | ("SMB3", false) => neg::DIALECT_311,
        _ => return None,
    })
}

/// `[security] map_to_guest`: "never" (the default) or "bad user", which
/// needs guests.
fn parse_map_to_guest(security: Option<&raw::Security>) -> Result<bool, SpanError> {
    let Some(value) = security.and_then(|s| s.map_to_guest.as_ref()) else {
        return Ok(false);
    };
    let guest = security
        .and_then(|s| s.guest.as_ref())
        .is_some_and(|g| *g.get_ref());
    match value.get_ref().as_str() {
        "never" => Ok(false),
        "bad user" if guest => Ok(true),
        "bad user" => Err(SpanError::at(
            value,
            "map_to_guest = \"bad user\" makes guests, which need guest = true",
        )),
        other => Err(SpanError::at(
            value,
            format!("map_to_guest {other:?} is not one of \"never\", \"bad user\""),
        )),
    }
}

/// `[security] min_protocol` and `max_protocol`.
fn parse_protocols(security: Option<&raw::Security>) -> Result<(u16, u16), SpanError> {
    let one = |value: Option<&Spanned<String>>, min: bool, default: u16| match value {
        None => Ok(default),
        Some(v) => dialect_named(v.get_ref(), min).ok_or_else(|| {
            SpanError::at(
                v,
                format!(
                    "{} {:?} is not one of SMB2_02, SMB2_10, SMB3_00, SMB3_02, SMB3_11, \
                     SMB2, SMB3 (copyless speaks no SMB1)",
                    if min { "min_protocol" } else { "max_protocol" },
                    v.get_ref()
                ),
            )
        }),
    };
    let min_value = security.and_then(|s| s.min_protocol.as_ref());
    let max_value = security.and_then(|s| s.max_protocol.as_ref());
    let min = one(min_value, true, ALL_DIALECTS.0)?;
    let max = one(max_value, false, ALL_DIALECTS.1)?;
    if min > max {
        return Err(SpanError::at(
            min_value
                .or(max_value)
                .expect("a default range is never empty"),
            "min_protocol is above max_protocol: no client could connect",
        ));
    }
    Ok((min, max))
}

fn parse_security(
    security: Option<raw::Security>,
) -> Result<(Signing, Encryption, bool), SpanError> {
    let Some(security) = security else {
        return Ok((Signing::Required, Encryption::Off, false));
    };
    let signing = match &security.signing {
        None => Signing::Required,
        Some(value) => match value.get_ref().as_str() {
            "required" => Signing::Required,
            "enabled" => Signing::Enabled,
            other => {
                return Err(SpanError::at(
                    value,
                    format!("signing {other:?} is not one of \"required\", \"enabled\""),
                ))
            }
        },
    };
    let encryption = match &security.encryption {
        None => Encryption::Off,
        Some(value) => match value.get_ref().as_str() {
            "off" => Encryption::Off,
            "desired" => Encryption::Desired,
            "required" => Encryption::Required,
            other => {
                return Err(SpanError::at(
                    value,
                    format!(
                        "encryption {other:?} is not one of \"off\", \"desired\", \"required\""
                    ),
                ))
            }
        },
    };
    let guest = security.guest.as_ref().is_some_and(|g| *g.get_ref());
    Ok((signing, encryption, guest))
}

/// Guests act as `guest_account` on disk: when they are allowed it must
/// exist, and it may never be root (as serve takes it, see
/// [`crate::no_root::guest_identity`]).
fn check_guest_account(security: Option<&raw::Security>, account: &str) -> Result<(), SpanError> {
    let guest = security.and_then(|s| s.guest.as_ref());
    let on = guest.is_some_and(|g| *g.get_ref());
    crate::no_root::guest_identity(account, on)
        .map(drop)
        .map_err(|message| SpanError {
            // The account's line, else the line that let guests in.
            span: security
                .and_then(|s| s.guest_account.as_ref().map(Spanned::span))
                .or(guest.map(Spanned::span)),
            message,
        })
}

fn parse_shares(
    raw: Vec<raw::Share>,
    text: &str,
    base: &Path,
    source: &dyn Fn(Vec<(&'static str, Range<usize>)>) -> ShareSource,
) -> Result<Vec<ShareConfig>, SpanError> {
    let mut seen = HashSet::new();
    let mut shares = Vec::with_capacity(raw.len());
    for share in raw {
        let Some(given) = &share.name else {
            return Err(SpanError::at(&share.path, "a [[share]] needs a name"));
        };
        let name = given.get_ref().clone();
        check_share_name(&name).map_err(|m| SpanError::at(given, m))?;
        if !seen.insert(name.to_uppercase()) {
            return Err(SpanError::at(
                given,
                format!("share name {name:?} is used twice (names are case-insensitive)"),
            ));
        }
        shares.push(parse_share(&share, name, text, base, source)?);
    }
    Ok(shares)
}

/// `[homes]`: every key of a share but its name, and a path with `%U`
/// where each user's name goes.
fn parse_homes(
    homes: &raw::Share,
    text: &str,
    base: &Path,
    source: &dyn Fn(Vec<(&'static str, Range<usize>)>) -> ShareSource,
) -> Result<ShareConfig, SpanError> {
    if let Some(name) = &homes.name {
        return Err(SpanError::at(
            name,
            "[homes] takes no name: each user's home share is named after the user",
        ));
    }
    if !homes.path.get_ref().contains(HOME_USER) {
        return Err(SpanError::at(
            &homes.path,
            "[homes] path must hold %U, where each user's name goes (\"/srv/homes/%U\")",
        ));
    }
    parse_share(homes, "homes".to_string(), text, base, source)
}

/// Where a user's name goes in `[homes]` path.
pub const HOME_USER: &str = "%U";

/// The keys of one share, named `name`.
fn parse_share(
    share: &raw::Share,
    name: String,
    text: &str,
    base: &Path,
    source: &dyn Fn(Vec<(&'static str, Range<usize>)>) -> ShareSource,
) -> Result<ShareConfig, SpanError> {
    let force_user = match &share.force_user {
        None => None,
        Some(name) => Some(force_user(name)?),
    };
    let force_group = match &share.force_group {
        None => None,
        Some(name) => Some(force_group(name)?),
    };
    let access = ShareAccess {
        valid_users: share
            .valid_users
            .as_ref()
            .map(|l| principals(l, "valid_users"))
            .transpose()?,
        read_only_users: share
            .read_only_users
            .as_ref()
            .map_or(Ok(Vec::new()), |l| principals(l, "read_only_users"))?,
        write_users: share
            .write_users
            .as_ref()
            .map_or(Ok(Vec::new()), |l| principals(l, "write_users"))?,
        guest_ok: share.guest_ok.as_ref().is_some_and(|g| *g.get_ref()),
        browseable: share.browseable.unwrap_or(true),
        access_based_enumeration: share.access_based_enumeration,
        access_based_share_enum: share.access_based_share_enum,
        force_user,
        force_group,
        hosts: parse_hosts(share.hosts_allow.as_ref(), share.hosts_deny.as_ref())?,
    };
    // The keys checks made after parsing name.
    let mut spans = vec![("path", share.path.span())];
    spans.extend(share.name.as_ref().map(|n| ("name", n.span())));
    let lists = [
        ("valid_users", &share.valid_users),
        ("read_only_users", &share.read_only_users),
        ("write_users", &share.write_users),
    ];
    spans.extend(
        lists
            .iter()
            .filter_map(|(k, l)| Some((*k, l.as_ref()?.span()))),
    );
    spans.extend(share.guest_ok.as_ref().map(|g| ("guest_ok", g.span())));
    let defaults = NewModes::default();
    let mode = |value: &Option<Spanned<toml::Value>>, key, default| {
        value
            .as_ref()
            .map_or(Ok(default), |v| octal_mode(v, text, key))
    };
    let modes = NewModes {
        create_mask: mode(&share.create_mask, "create_mask", defaults.create_mask)?,
        directory_mask: mode(
            &share.directory_mask,
            "directory_mask",
            defaults.directory_mask,
        )?,
        force_create_mode: mode(&share.force_create_mode, "force_create_mode", 0)?,
        force_directory_mode: mode(&share.force_directory_mode, "force_directory_mode", 0)?,
        inherit_permissions: share.inherit_permissions,
        inherit_acls: share.inherit_acls,
    };
    Ok(ShareConfig {
        name,
        path: file_path(&share.path, base, "path")?,
        read_only: share.read_only,
        access,
        source: source(spans),
        modes,
        comment: one_line("comment", share.comment.as_ref())?,
        names: share_names(share)?,
        audit: share_audit(share.audit.as_ref())?,
        snapshots: share.snapshots.as_ref().map(snapshot_source).transpose()?,
        recycle: recycle(share)?,
    })
}

/// A share's recycle bin, when `recycle = true`; its other keys need it.
fn recycle(share: &raw::Share) -> Result<Option<RecycleConfig>, SpanError> {
    let on = share.recycle.as_ref().is_some_and(|r| *r.get_ref());
    let without = |key: &str, span: Range<usize>| {
        Err(SpanError {
            span: Some(span),
            message: format!("{key} needs recycle = true"),
        })
    };
    if !on {
        if let Some(v) = &share.recycle_exclude {
            return without("recycle_exclude", v.span());
        }
        if let Some(v) = &share.recycle_max_size {
            return without("recycle_max_size", v.span());
        }
        if let Some(v) = &share.recycle_keep_days {
            return without("recycle_keep_days", v.span());
        }
        return Ok(None);
    }
    let exclude = match &share.recycle_exclude {
        None => Vec::new(),
        Some(v) => copyless_core::recycle::RecycleBin::new(v.get_ref(), 0, 0)
            .map(|_| v.get_ref().clone())
            .map_err(|e| SpanError::at(v, format!("recycle_exclude: {e}")))?,
    };
    let max_size = match &share.recycle_max_size {
        None => 0,
        Some(v) => u64::try_from(*v.get_ref())
            .map_err(|_| SpanError::at(v, "recycle_max_size: bytes, 0 or more (0: any size)"))?,
    };
    let keep_days = match &share.recycle_keep_days {
        None => 0,
        Some(v) => u32::try_from(*v.get_ref()).map_err(|_| {
            SpanError::at(
                v,
                "recycle_keep_days: days, 0 or more (0: kept until emptied)",
            )
        })?,
    };
    Ok(Some(RecycleConfig {
        exclude,
        max_size,
        keep_days,
    }))
}

/// A share's `snapshots`: `"btrfs"` (its `.snapshots` folder, as snapper
/// keeps it), `"zfs"` (`.zfs/snapshot`) or `"dir:PATH"` (a folder of
/// `@GMT-…` folders; PATH relative to the share, or absolute).
fn snapshot_source(value: &Spanned<String>) -> Result<copyless_vfs::snapshots::Source, SpanError> {
    use copyless_vfs::snapshots::Source;
    match value.get_ref().as_str() {
        "btrfs" => Ok(Source::Btrfs),
        "zfs" => Ok(Source::Zfs),
        v => match v.strip_prefix("dir:") {
            Some(path) if !path.is_empty() => Ok(Source::Dir(PathBuf::from(path))),
            _ => Err(SpanError::at(
                value,
                format!("snapshots: {v:?} is none of \"btrfs\", \"zfs\" or \"dir:PATH\""),
            )),
        },
    }
}

/// A share's `audit`: the kinds of event its trail keeps, by name, or
/// `"all"`.
fn share_audit(audit: Option<&Spanned<Vec<Spanned<String>>>>) -> Result<AuditKinds, SpanError> {
    let mut kinds = AuditKinds::NONE;
    for name in audit.map_or(&[][..], |a| a.get_ref()) {
        if name.get_ref() == "all" {
            kinds = AuditKind::ALL.into_iter().collect();
            continue;
        }
        let kind = AuditKind::named(name.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = AuditKind::ALL.iter().map(|k| k.name()).collect();
            SpanError::at(
                name,
                format!(
                    "audit: unknown kind {:?} (known: {}, or all)",
                    name.get_ref(),
                    known.join(", ")
                ),
            )
        })?;
        kinds = kinds.with(kind);
    }
    Ok(kinds)
}

/// A share's rules for names, each pattern checked.
fn share_names(share: &raw::Share) -> Result<ShareNames, SpanError> {
    let list = |key: &str, value: &Option<Spanned<Vec<String>>>| match value {
        None => Ok(Vec::new()),
        Some(v) => copyless_core::NameRules::new(false, v.get_ref(), &[], false)
            .map(|_| v.get_ref().clone())
            .map_err(|e| SpanError::at(v, format!("{key}: {e}"))),
    };
    Ok(ShareNames {
        hide_dot_files: share.hide_dot_files,
        hide_files: list("hide_files", &share.hide_files)?,
        veto_files: list("veto_files", &share.veto_files)?,
        delete_veto_files: share.delete_veto_files,
    })
}

/// A share's `comment` or `server_string`: one line of what Windows shows
/// (at most 256 characters, NetShareEnum's remark; no control characters).
fn one_line(key: &str, text: Option<&Spanned<String>>) -> Result<String, SpanError> {
    let Some(c) = text else {
        return Ok(String::new());
    };
    let text = c.get_ref();
    if text.chars().count() > 256 || text.chars().any(char::is_control) {
        return Err(SpanError::at(
            c,
            format!("{key}: one line of at most 256 characters"),
        ));
    }
    Ok(text.clone())
}

/// A mode key (`create_mask = "0664"`, or the TOML octal `0o664`): a
/// decimal number is refused, since `664` would not be the mode meant.
fn octal_mode(value: &Spanned<toml::Value>, text: &str, key: &str) -> Result<u32, SpanError> {
    let wrong = || {
        SpanError::at(
            value,
            format!("{key}: write the mode in octal, as \"0664\" or 0o664 (at most 7777)"),
        )
    };
    let mode = match value.get_ref() {
        toml::Value::String(s) => {
            let digits = s.strip_prefix("0o").unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(wrong());
            }
            u32::from_str_radix(digits, 8).map_err(|_| wrong())?
        }
        toml::Value::Integer(n) if text.get(value.span()).is_some_and(|t| t.starts_with("0o")) => {
            u32::try_from(*n).map_err(|_| wrong())?
        }
        _ => return Err(wrong()),
    };
    if mode > 0o7777 {
        return Err(wrong());
    }
    Ok(mode)
}

/// `force_user`: an existing account without root's powers.
fn force_user(name: &Spanned<String>) -> Result<Identity, SpanError> {
    let account = copyless_auth::unix::lookup(name.get_ref())
        .map_err(|e| SpanError::at(name, format!("force_user: {e}")))?;
    if let Some(why) = crate::no_root::account_refusal("force_user", name.get_ref(), &account) {
        return Err(SpanError::at(name, why));
    }
    Ok(Identity::unix(account.uid, account.gid, account.groups))
}

/// `force_group`: an existing group other than root's.
fn force_group(name: &Spanned<String>) -> Result<u32, SpanError> {
    let gid = copyless_auth::unix::group_id(name.get_ref()).ok_or_else(|| {
        SpanError::at(
            name,
            format!("force_group: no Unix group {:?}", name.get_ref()),
        )
    })?;
    match crate::no_root::group_refusal("force_group", name.get_ref(), gid) {
        Some(why) => Err(SpanError::at(name, why)),
        None => Ok(gid),
    }
}

/// User names, and Unix groups as `@group`, of a share's access list.
fn principals(list: &Spanned<Vec<String>>, key: &str) -> Result<Vec<Principal>, SpanError> {
    list.get_ref()
        .iter()
        .map(|entry| match entry.strip_prefix('@') {
            Some(group) => {
                let gid = copyless_auth::unix::group_id(group).ok_or_else(|| {
                    SpanError::at(list, format!("{key}: no Unix group {group:?}"))
                })?;
                match crate::no_root::group_refusal(key, &format!("@{group}"), gid) {
                    Some(why) => Err(SpanError::at(list, why)),
                    None => Ok(Principal::Group(gid)),
                }
            }
            None if entry.is_empty() => Err(SpanError::at(list, format!("{key}: an empty name"))),
            None => match crate::no_root::user_refusal(key, entry) {
                Some(why) => Err(SpanError::at(list, why)),
                None => Ok(Principal::User(entry.clone())),
            },
        })
        .collect()
}

type AddressList = Spanned<Vec<Spanned<String>>>;

/// `hosts_allow` and `hosts_deny` (of `[security]` or a share): addresses
/// and CIDR networks, IPv4 or IPv6.
fn parse_hosts(
    allow: Option<&AddressList>,
    deny: Option<&AddressList>,
) -> Result<HostFilter, SpanError> {
    if let Some(list) = allow.filter(|l| l.get_ref().is_empty()) {
        return Err(SpanError::at(
            list,
            "hosts_allow = [] would let nobody in: leave it out to let everyone in, or \
             refuse everyone with hosts_deny = [\"0.0.0.0/0\", \"::/0\"]",
        ));
    }
    Ok(HostFilter {
        allow: allow.map(|l| networks(l, "hosts_allow")).transpose()?,
        deny: deny.map_or(Ok(Vec::new()), |l| networks(l, "hosts_deny"))?,
    })
}

fn networks(list: &AddressList, key: &str) -> Result<Vec<Network>, SpanError> {
    list.get_ref()
        .iter()
        .map(|entry| {
            entry
                .get_ref()
                .parse()
                .map_err(|e| SpanError::at(entry, format!("{key}: {e}")))
        })
        .collect()
}

fn parse_limits(raw: Option<raw::Limits>) -> Result<Limits, SpanError> {
    let mut limits = Limits::default();
    let Some(raw) = raw else {
        return Ok(limits);
    };

    fn take<T: Copy + PartialOrd + fmt::Display>(
        slot: &mut T,
        value: &Option<Spanned<T>>,
        key: &str,
        min: T,
        max: T,
    ) -> Result<(), SpanError> {
        if let Some(value) = value {
            let v = *value.get_ref();
            if v < min || v > max {
                return Err(SpanError::at(
                    value,
                    format!("limits.{key} = {v} is out of range ({min} to {max})"),
                ));
            }
            *slot = v;
        }
        Ok(())
    }

    // The transport's 24-bit length bounds every message either way.
    take(
        &mut limits.max_message_size,
        &raw.max_message_size,
        "max_message_size",
        64 * KIB,
        MAX_TRANSPORT,
    )?;
    take(
        &mut limits.max_preauth_message_size,
        &raw.max_preauth_message_size,
        "max_preauth_message_size",
        4 * KIB,
        16 * MIB,
    )?;
    take(
        &mut limits.max_read_write,
        &raw.max_read_write,
        "max_read_write",
        64 * KIB,
        MAX_TRANSPORT - HEADER_ROOM,
    )?;
    take(
        &mut limits.max_connections,
        &raw.max_connections,
        "max_connections",
        1,
        1_000_000,
    )?;
    take(
        &mut limits.max_unauthenticated_connections,
        &raw.max_unauthenticated_connections,
        "max_unauthenticated_connections",
        1,
        1_000_000,
    )?;
    take(
        &mut limits.max_unauthenticated_per_address,
        &raw.max_unauthenticated_per_address,
        "max_unauthenticated_per_address",
        1,
        1_000_000,
    )?;
    take(
        &mut limits.max_tree_connects_per_session,
        &raw.max_tree_connects_per_session,
        "max_tree_connects_per_session",
        1,
        65_535,
    )?;
    take(
        &mut limits.max_open_files_per_connection,
        &raw.max_open_files_per_connection,
        "max_open_files_per_connection",
        1,
        1 << 24,
    )?;
    for (slot, value, key) in [
        (
            &mut limits.max_open_files_per_user,
            &raw.max_open_files_per_user,
            "max_open_files_per_user",
        ),
        (
            &mut limits.max_open_files_total,
            &raw.max_open_files_total,
            "max_open_files_total",
        ),
    ] {
        if value.is_some() {
            let mut v = 0;
            take(&mut v, value, key, 1, 1 << 24)?;
            *slot = Some(v);
        }
    }
    take(
        &mut limits.max_listing_bytes_per_connection,
        &raw.max_listing_bytes_per_connection,
        "max_listing_bytes_per_connection",
        MIB,
        u32::MAX,
    )?;
    take(
        &mut limits.max_listing_bytes_per_user,
        &raw.max_listing_bytes_per_user,
        "max_listing_bytes_per_user",
        MIB,
        u32::MAX,
    )?;
    take(
        &mut limits.max_listing_bytes_total,
        &raw.max_listing_bytes_total,
        "max_listing_bytes_total",
        MIB,
        u32::MAX,
    )?;
    take(
        &mut limits.max_sessions_per_connection,
        &raw.max_sessions_per_connection,
        "max_sessions_per_connection",
        1,
        65_535,
    )?;
    take(
        &mut limits.max_open_files,
        &raw.max_open_files,
        "max_open_files",
        1,
        1 << 20,
    )?;
    take(
        &mut limits.max_credits,
        &raw.max_credits,
        "max_credits",
        1,
        u16::MAX,
    )?;
    take(
        &mut limits.preauth_timeout_secs,
        &raw.preauth_timeout_secs,
        "preauth_timeout_secs",
        1,
        3600,
    )?;
    take(
        &mut limits.max_local_watches,
        &raw.max_local_watches,
        "max_local_watches",
        0,
        1 << 20,
    )?;

    // A READ or WRITE of max_read_write bytes must fit in one message.
    if limits.max_read_write > limits.max_message_size.saturating_sub(HEADER_ROOM) {
        let at = raw
            .max_read_write
            .as_ref()
            .map(Spanned::span)
            .or(raw.max_message_size.as_ref().map(Spanned::span));
        return Err(SpanError {
            span: at,
            message: format!(
                "limits.max_read_write ({}) must leave {HEADER_ROOM} bytes of room \
                 below limits.max_message_size ({})",
                limits.max_read_write, limits.max_message_size
            ),
        });
    }

    // A client must be able to pay for one request of max_read_write bytes.
    let needed = limits.max_read_write.div_ceil(CREDIT_UNIT);
    if u32::from(limits.max_credits) < needed {
        let at = raw
            .max_credits
            .as_ref()
            .map(Spanned::span)
            .or(raw.max_read_write.as_ref().map(Spanned::span));
        return Err(SpanError {
            span: at,
            message: format!(
                "limits.max_credits ({}) is below the {needed} credits that one \
                 {}-byte read or write costs",
                limits.max_credits, limits.max_read_write
            ),
        });
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A scratch directory removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "copyless-config-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Loads `text` as a config file and expects an error at `line`;
    /// returns the message for further checks.
    fn error_at(text: &str, line: usize) -> String {
        let dir = TempDir::new();
        let path = dir.write("copyless.toml", text);
        let err = Config::load(&path).expect_err("the file should be rejected");
        let shown = err.to_string();
        let prefix = format!("{}:{line}: ", path.display());
        assert!(
            shown.starts_with(&prefix),
            "expected {prefix:?} at the start of {shown:?}"
        );
        assert_eq!(err.line, Some(line));
        err.message
    }

    fn load_text(text: &str) -> (TempDir, Config) {
        let dir = TempDir::new();
        let path = dir.write("copyless.toml", text);
        let config = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
        (dir, config)
    }

    const FULL: &str = r#"
listen = ["0.0.0.0:445", "[::1]:4445"]
state_dir = "/var/lib/copyless-test"
server_name = "nas-1"

[security]
signing = "enabled"
encryption = "desired"
guest = true

[[share]]
name = "public"
path = "/srv/public"
read_only = true

[[share]]
name = "Home$"
path = "homes"

[limits]
max_message_size = 1114112
max_read_write = 1048576
max_connections = 10
max_sessions_per_connection = 2
max_open_files = 100
max_credits = 512
preauth_timeout_secs = 5
max_local_watches = 0
max_preauth_message_size = 8192
max_unauthenticated_connections = 7
max_unauthenticated_per_address = 3
max_tree_connects_per_session = 4
max_open_files_per_connection = 150
max_open_files_per_user = 300
max_open_files_total = 1000
max_listing_bytes_per_user = 16777216
max_listing_bytes_total = 134217728
"#;

    #[test]
    fn full_file() {
        let (dir, config) = load_text(FULL);
        assert_eq!(
            config.listen,
            vec![
                "0.0.0.0:445".parse::<SocketAddr>().unwrap(),
                "[::1]:4445".parse().unwrap()
            ]
        );
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/copyless-test"));
        assert_eq!(config.server_name, "NAS-1");
        assert_eq!(config.signing, Signing::Enabled);
        assert_eq!(config.encryption, Encryption::Desired);
        assert!(config.guest);
        assert_eq!(config.shares.len(), 2);
        assert_eq!(config.shares[0].name, "public");
        assert_eq!(config.shares[0].path, PathBuf::from("/srv/public"));
        assert!(config.shares[0].read_only);
        assert_eq!(config.shares[1].name, "Home$");
        // Relative paths are taken from the config file's directory.
        assert_eq!(config.shares[1].path, dir.0.join("homes"));
        assert!(!config.shares[1].read_only);
        let l = &config.limits;
        assert_eq!(l.max_message_size, 1_114_112);
        assert_eq!(l.max_read_write, 1_048_576);
        assert_eq!(l.max_connections, 10);
        assert_eq!(l.max_sessions_per_connection, 2);
        assert_eq!(l.max_open_files, 100);
        assert_eq!(l.max_credits, 512);
        assert_eq!(l.preauth_timeout_secs, 5);
        assert_eq!(l.max_local_watches, 0);
        assert_eq!(l.max_preauth_message_size, 8192);
        assert_eq!(l.max_unauthenticated_connections, 7);
        assert_eq!(l.max_unauthenticated_per_address, 3);
        assert_eq!(l.max_tree_connects_per_session, 4);
        assert_eq!(l.max_open_files_per_connection, 150);
        assert_eq!(l.max_open_files_per_user, Some(300));
        assert_eq!(l.max_open_files_total, Some(1000));
        assert_eq!(l.max_listing_bytes_per_user, 16 * MIB);
        assert_eq!(l.max_listing_bytes_total, 128 * MIB);
    }

    #[test]
    fn who_may_use_a_share() {
        // nobody and the group users exist on every system this runs on.
        let users = copyless_auth::unix::group_id("users").unwrap();
        let (_dir, config) = load_text(
            "[[share]]\nname = \"s\"\npath = \"/srv/s\"\nread_only = true\n\
             valid_users = [\"alice\", \"@users\"]\nwrite_users = [\"alice\"]\n\
             guest_ok = true\nbrowseable = false\nforce_user = \"nobody\"\n\
             access_based_share_enum = true\n\
             force_group = \"users\"\n",
        );
        let a = &config.shares[0].access;
        assert_eq!(
            a.valid_users,
            Some(vec![
                Principal::User("alice".into()),
                Principal::Group(users)
            ])
        );
        assert_eq!(a.write_users, vec![Principal::User("alice".into())]);
        assert!(a.read_only_users.is_empty());
        assert!(a.guest_ok && !a.browseable && a.access_based_share_enum);
        assert!(matches!(&a.force_user, Some(Identity::Unix(ids)) if ids.uid == 65534));
        assert_eq!(a.force_group, Some(users));
        let (_dir, config) = load_text("[[share]]\nname = \"s\"\npath = \"/srv/s\"\n");
        let a = &config.shares[0].access;
        assert!(a.valid_users.is_none() && !a.guest_ok && a.browseable);
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        for (key, line) in [
            ("valid_users = [\"@no-such-group-here\"]", 4),
            ("read_only_users = [\"\"]", 4),
            ("force_user = \"no-such-account-here\"", 4),
            ("force_group = \"no-such-group-here\"", 4),
        ] {
            let m = error_at(&format!("{share}{key}\n"), line);
            assert!(m.contains(key.split(' ').next().unwrap()), "{m}");
        }
    }

    #[test]
    fn quota_admins_are_users_and_groups_but_never_root() {
        let users = copyless_auth::unix::group_id("users").unwrap();
        let (_dir, config) = load_text("[security]\nquota_admins = [\"alice\", \"@users\"]\n");
        assert_eq!(
            config.quota_admins,
            vec![Principal::User("alice".into()), Principal::Group(users)]
        );
        let (_dir, config) = load_text("[security]\nguest = false\n");
        assert!(config.quota_admins.is_empty());
        for list in ["[\"root\"]", "[\"@root\"]", "[\"\"]"] {
            let m = error_at(&format!("[security]\nquota_admins = {list}\n"), 2);
            assert!(m.contains("quota_admins"), "{m}");
        }
    }

    #[test]
    fn hidden_and_vetoed_names_are_patterns_of_one_name() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let (_dir, config) = load_text(&format!(
            "{share}hide_dot_files = true\nhide_files = [\"desktop.ini\"]\n\
             veto_files = [\"Thumbs.db\", \"._*\"]\ndelete_veto_files = true\n"
        ));
        let names = &config.shares[0].names;
        assert!(names.hide_dot_files && names.delete_veto_files);
        assert_eq!(names.hide_files, ["desktop.ini"]);
        assert_eq!(names.veto_files, ["Thumbs.db", "._*"]);
        let rules = names.rules().unwrap();
        assert!(rules.vetoes("THUMBS.DB") && rules.hides(".x") && rules.hides("Desktop.ini"));
        let (_dir, config) = load_text(share);
        assert_eq!(config.shares[0].names, ShareNames::default());
        for (bad, key) in [
            ("veto_files = [\"a/b\"]", "veto_files"),
            ("hide_files = [\"\"]", "hide_files"),
        ] {
            let m = error_at(&format!("{share}{bad}\n"), 4);
            assert!(
                m.contains(key) && m.contains("not a pattern of one name"),
                "{m}"
            );
        }
    }

    #[test]
    fn homes_are_a_share_without_a_name_and_with_percent_u() {
        let (_dir, config) = load_text(
            "[homes]\npath = \"/srv/homes/%U\"\ncomment = \"Yours\"\ncreate_mask = \"0600\"\n",
        );
        let homes = config.homes.unwrap();
        assert_eq!(homes.path, Path::new("/srv/homes/%U"));
        assert_eq!(
            (homes.comment.as_str(), homes.modes.create_mask),
            ("Yours", 0o600)
        );
        assert!(load_text("listen = [\"127.0.0.1:445\"]\n")
            .1
            .homes
            .is_none());
        let m = error_at("[homes]\nname = \"h\"\npath = \"/srv/homes/%U\"\n", 2);
        assert!(m.contains("[homes] takes no name"), "{m}");
        let m = error_at("[homes]\npath = \"/srv/homes\"\n", 2);
        assert!(m.contains("must hold %U"), "{m}");
        let m = error_at("[[share]]\npath = \"/srv/s\"\n", 2);
        assert!(m.contains("needs a name"), "{m}");
    }

    #[test]
    fn unknown_users_are_guests_only_where_guests_are_allowed() {
        let (_dir, config) = load_text("[security]\nguest = true\nmap_to_guest = \"bad user\"\n");
        assert!(config.map_to_guest && config.guest);
        let (_dir, config) = load_text("[security]\nmap_to_guest = \"never\"\n");
        assert!(!config.map_to_guest);
        let m = error_at("[security]\nmap_to_guest = \"bad user\"\n", 2);
        assert!(m.contains("need guest = true"), "{m}");
        let m = error_at(
            "[security]\nguest = true\nmap_to_guest = \"bad password\"\n",
            3,
        );
        assert!(m.contains("not one of"), "{m}");
    }

    #[test]
    fn the_protocols_offered_are_bounded_by_samba_s_names() {
        let (_dir, config) =
            load_text("[security]\nmin_protocol = \"SMB3\"\nmax_protocol = \"smb3_02\"\n");
        assert_eq!(config.dialects, (neg::DIALECT_300, neg::DIALECT_302));
        let (_dir, config) = load_text("[security]\nmax_protocol = \"SMB2\"\n");
        assert_eq!(config.dialects, (neg::DIALECT_202, neg::DIALECT_210));
        let (_dir, config) = load_text("listen = [\"127.0.0.1:445\"]\n");
        assert_eq!(config.dialects, ALL_DIALECTS);
        let m = error_at("[security]\nmin_protocol = \"NT1\"\n", 2);
        assert!(m.contains("no SMB1"), "{m}");
        let m = error_at(
            "[security]\nmin_protocol = \"SMB3\"\nmax_protocol = \"SMB2\"\n",
            2,
        );
        assert!(m.contains("above max_protocol"), "{m}");
    }

    #[test]
    fn an_smb_conf_is_pointed_to_import() {
        let m = error_at(
            "[global]\n   workgroup = HOME\n[data]\n   path = /srv/data\n",
            2,
        );
        assert!(m.contains("looks like Samba's smb.conf"), "{m}");
        assert!(m.contains("copyless import smb.conf"), "{m}");
        // A broken TOML file is not taken for one.
        let m = error_at("[security]\nsigning = \"required\"\nguest = maybe\n", 3);
        assert!(!m.contains("smb.conf"), "{m}");
    }

    #[test]
    fn a_share_s_comment_is_one_line() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let (_dir, config) = load_text(&format!("{share}comment = \"Photos, 100% family\"\n"));
        assert_eq!(config.shares[0].comment, "Photos, 100% family");
        let (_dir, config) = load_text(share);
        assert_eq!(config.shares[0].comment, "");
        for bad in [
            "comment = \"two\\nlines\"".to_string(),
            format!("comment = \"{}\"", "x".repeat(257)),
        ] {
            let m = error_at(&format!("{share}{bad}\n"), 4);
            assert!(m.contains("comment: one line of at most 256"), "{m}");
        }
    }

    #[test]
    fn the_server_string_names_the_host_for_percent_h() {
        let (_dir, config) = load_text("server_string = \"%h server\"\n");
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        assert_eq!(config.server_string, format!("{host} server"));
        let (_dir, config) = load_text("");
        assert_eq!(config.server_string, "");
        let m = error_at("server_string = \"a\\tb\"\n", 1);
        assert!(m.contains("server_string: one line of at most 256"), "{m}");
    }

    #[test]
    fn audit_and_log_keys() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let (_dir, config) = load_text(&format!(
            "[log]\nlevel = \"debug\"\n[audit]\nfile = \"audit.log\"\nmax_size_mib = 2\n\
             keep = 0\n{share}audit = [\"delete\", \"denied\"]\n"
        ));
        assert_eq!(config.log_level, LogLevel::Debug);
        let AuditTo::File {
            path,
            max_bytes,
            keep,
        } = &config.audit_to
        else {
            panic!("{:?}", config.audit_to);
        };
        assert!(
            path.is_absolute() && path.ends_with("audit.log"),
            "{path:?}"
        );
        assert_eq!((*max_bytes, *keep), (2 << 20, 0));
        let kinds: AuditKinds = [AuditKind::Delete, AuditKind::Denied].into_iter().collect();
        assert_eq!(config.shares[0].audit, kinds);
        let (_dir, config) = load_text(&format!("{share}audit = [\"all\"]\n"));
        assert!(AuditKind::ALL
            .iter()
            .all(|k| config.shares[0].audit.contains(*k)));
        assert_eq!(config.audit_to, AuditTo::Journal);
        assert_eq!(config.log_level, LogLevel::Info);
        let m = error_at(&format!("{share}audit = [\"unlink\"]\n"), 4);
        assert!(m.contains("unknown kind \"unlink\""), "{m}");
        let m = error_at("[audit]\nfile = \"a.log\"\nmax_size_mib = 0\n", 3);
        assert!(m.contains("max_size_mib"), "{m}");
        let m = error_at("[log]\nlevel = \"loud\"\n", 2);
        assert!(m.contains("error, warning, info or debug"), "{m}");
    }

    #[test]
    fn snapshots_are_btrfs_zfs_or_a_folder() {
        use copyless_vfs::snapshots::Source;
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let source = |value: &str| {
            let (_dir, config) = load_text(&format!("{share}snapshots = \"{value}\"\n"));
            config.shares[0].snapshots.clone()
        };
        assert_eq!(source("btrfs"), Some(Source::Btrfs));
        assert_eq!(source("zfs"), Some(Source::Zfs));
        assert_eq!(
            source("dir:/srv/versions"),
            Some(Source::Dir("/srv/versions".into()))
        );
        let (_dir, config) = load_text(share);
        assert_eq!(config.shares[0].snapshots, None);
        for bad in ["lvm", "dir:", "BTRFS"] {
            let m = error_at(&format!("{share}snapshots = \"{bad}\"\n"), 4);
            assert!(m.contains("\"btrfs\", \"zfs\" or \"dir:PATH\""), "{m}");
        }
    }

    #[test]
    fn a_recycle_bin_is_asked_for_and_bounded() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let (_dir, config) = load_text(&format!(
            "{share}recycle = true\nrecycle_exclude = [\"*.tmp\"]\n\
             recycle_max_size = 1048576\nrecycle_keep_days = 30\n"
        ));
        assert_eq!(
            config.shares[0].recycle,
            Some(RecycleConfig {
                exclude: vec!["*.tmp".into()],
                max_size: 1 << 20,
                keep_days: 30
            })
        );
        let (_dir, config) = load_text(&format!("{share}recycle = true\n"));
        assert_eq!(config.shares[0].recycle, Some(RecycleConfig::default()));
        let (_dir, config) = load_text(share);
        assert_eq!(config.shares[0].recycle, None);
        let m = error_at(&format!("{share}recycle_keep_days = 3\n"), 4);
        assert!(m.contains("recycle_keep_days needs recycle = true"), "{m}");
        let m = error_at(
            &format!("{share}recycle = true\nrecycle_max_size = -1\n"),
            5,
        );
        assert!(m.contains("recycle_max_size"), "{m}");
        let m = error_at(
            &format!("{share}recycle = true\nrecycle_exclude = [\"a/b\"]\n"),
            5,
        );
        assert!(m.contains("recycle_exclude"), "{m}");
    }

    #[test]
    fn modes_of_new_files_are_written_in_octal() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        let (_dir, config) = load_text(&format!(
            "{share}create_mask = \"0770\"\nforce_create_mode = 0o660\n\
             directory_mask = \"0o770\"\nforce_directory_mode = \"2770\"\n\
             inherit_permissions = true\ninherit_acls = true\n"
        ));
        let m = config.shares[0].modes;
        assert_eq!(
            (
                m.create_mask,
                m.force_create_mode,
                m.directory_mask,
                m.force_directory_mode
            ),
            (0o770, 0o660, 0o770, 0o2770)
        );
        assert!(m.inherit_permissions && m.inherit_acls);
        let (_dir, config) = load_text(share);
        assert_eq!(config.shares[0].modes, NewModes::default());
        for bad in [
            "create_mask = 664",
            "create_mask = \"0678\"",
            "create_mask = \"\"",
            "force_create_mode = 0o17777",
            "directory_mask = true",
        ] {
            let m = error_at(&format!("{share}{bad}\n"), 4);
            assert!(m.contains("write the mode in octal"), "{bad}: {m}");
            assert!(m.contains(bad.split(' ').next().unwrap()), "{bad}: {m}");
        }
    }

    #[test]
    fn no_key_hands_out_root() {
        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        for (key, line, said) in [
            (
                "force_user = \"root\"",
                4,
                "force_user \"root\" is root (uid 0)",
            ),
            (
                "force_group = \"root\"",
                4,
                "force_group: \"root\" is the root group",
            ),
            (
                "valid_users = [\"@root\"]",
                4,
                "valid_users: \"@root\" is the root group",
            ),
            (
                "read_only_users = [\"alice\", \"@root\"]",
                4,
                "read_only_users: \"@root\"",
            ),
            (
                "write_users = [\"ROOT\"]",
                4,
                "write_users: user \"ROOT\" would act as",
            ),
        ] {
            let m = error_at(&format!("{share}{key}\n"), line);
            assert!(m.contains(said), "{key}: {m}");
        }
        // Guests neither, even when guests are off (anonymous sessions
        // act as the guest account too).
        let m = error_at("[security]\nguest_account = \"root\"\n", 2);
        assert!(m.contains("guest_account \"root\" is root"), "{m}");
        let m = error_at("[security]\nguest = true\nguest_account = \"root\"\n", 3);
        assert!(m.contains("is root"), "{m}");
    }

    #[test]
    fn guests_need_their_account() {
        let m = error_at(
            "[security]\nguest = true\nguest_account = \"no-such-account-here\"\n",
            3,
        );
        assert!(m.contains("no Unix account"), "{m}");
        // Without guests a missing account is no error: nobody's ids stand in.
        load_text("[security]\nguest_account = \"no-such-account-here\"\n");
    }

    #[test]
    fn who_may_connect_by_address() {
        let (_dir, config) = load_text(
            "[security]\nhosts_allow = [\"192.168.1.0/24\", \"fd00::/8\", \"127.0.0.1\"]\n\
             hosts_deny = [\"0.0.0.0/0\", \"::/0\"]\n\
             [[share]]\nname = \"s\"\npath = \"/srv/s\"\nhosts_deny = [\"192.168.1.66\"]\n\
             [[share]]\nname = \"t\"\npath = \"/srv/t\"\n",
        );
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert_eq!(config.hosts.allow.as_ref().map(Vec::len), Some(3));
        assert!(config.hosts.admits(ip("192.168.1.66")) && config.hosts.admits(ip("fd00::1")));
        assert!(!config.hosts.admits(ip("10.0.0.1")));
        let s = &config.shares[0].access.hosts;
        assert!(s.allow.is_none() && !s.admits(ip("192.168.1.66")) && s.admits(ip("10.0.0.1")));
        assert!(config.shares[1].access.hosts.is_open());
        let (_dir, config) = load_text("[[share]]\nname = \"s\"\npath = \"/srv/s\"\n");
        assert!(config.hosts.is_open());

        let share = "[[share]]\nname = \"s\"\npath = \"/srv/s\"\n";
        for (text, line, says) in [
            (
                "[security]\nhosts_allow = [\n  \"10.0.0.0/8\",\n  \"192.168.1.\",\n]\n",
                4,
                "hosts_allow: \"192.168.1.\" is not an address or a network",
            ),
            (
                "[security]\nhosts_deny = [\"10.0.0.0/33\"]\n",
                2,
                "hosts_deny: \"10.0.0.0/33\" is not an address or a network: the prefix",
            ),
            ("[security]\nhosts_allow = []\n", 2, "would let nobody in"),
            (
                &format!("{share}hosts_allow = [\"nas.example.org\"]\n"),
                4,
                "hosts_allow: \"nas.example.org\"",
            ),
        ] {
            let text = if text.starts_with("[security]") {
                format!("{text}{share}")
            } else {
                text.to_string()
            };
            let m = error_at(&text, line);
            assert!(m.contains(says), "{m}");
        }
    }

    #[test]
    fn missing_keys_take_the_defaults() {
        let (_dir, config) = load_text("[[share]]\nname = \"s\"\npath = \"/srv/s\"\n");
        assert_eq!(config.listen, vec![SocketAddr::from(([0, 0, 0, 0], 445))]);
        assert_eq!(config.state_dir, default_state_dir());
        assert_eq!(config.signing, Signing::Required);
        assert_eq!(config.encryption, Encryption::Off);
        assert!(!config.guest);
        assert_eq!(config.guest_account, "nobody");
        assert_eq!(config.limits.max_message_size, 8 * MIB + 64 * KIB);
        assert_eq!(config.limits.max_read_write, 8 * MIB);
        assert_eq!(config.limits.max_connections, 1024);
        assert_eq!(config.limits.max_sessions_per_connection, 64);
        assert_eq!(config.limits.max_open_files, 16384);
        assert_eq!(config.limits.max_credits, 8192);
        assert_eq!(config.limits.preauth_timeout_secs, 10);
        assert_eq!(config.limits.max_preauth_message_size, 64 * KIB);
        assert_eq!(config.limits.max_unauthenticated_connections, 256);
        assert_eq!(config.limits.max_unauthenticated_per_address, 32);
        assert_eq!(config.limits.max_tree_connects_per_session, 128);
        assert_eq!(config.limits.max_open_files_per_user, None);
        assert_eq!(config.limits.max_open_files_total, None);
        assert!(!config.shares[0].read_only);
    }

    #[test]
    fn the_interface_example_parses() {
        let text = r#"
listen = ["0.0.0.0:445"]          # one or more ADDR:PORT
state_dir = "/var/lib/copyless"   # user store and other state

[security]
signing = "required"              # "required" | "enabled"
encryption = "off"                # "off" | "desired" | "required"
guest = false                     # allow guest / anonymous sessions

[[share]]
name = "public"
path = "/srv/public"
read_only = false
"#;
        let (_dir, config) = load_text(text);
        assert_eq!(config.signing, Signing::Required);
        assert_eq!(config.encryption, Encryption::Off);
        assert_eq!(config.shares[0].path, PathBuf::from("/srv/public"));
    }

    #[test]
    fn empty_and_relative_paths_resolve_against_the_file() {
        let (dir, config) = load_text(
            "state_dir = \"state\"\n[[share]]\nname = \"here\"\npath = \"\"\n\
             [[share]]\nname = \"up\"\npath = \"../x\"\n",
        );
        assert_eq!(config.state_dir, dir.0.join("state"));
        assert_eq!(config.shares[0].path, dir.0.join(""));
        assert_eq!(config.shares[1].path, dir.0.join("../x"));
    }

    #[test]
    fn encryption_values() {
        for (value, want) in [
            ("off", Encryption::Off),
            ("desired", Encryption::Desired),
            ("required", Encryption::Required),
        ] {
            let (_dir, config) = load_text(&format!("[security]\nencryption = \"{value}\"\n"));
            assert_eq!(config.encryption, want);
        }
    }

    #[test]
    fn kerberos_reads_its_keytab_when_the_config_is_read() {
        let keytab = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/kerberos/server.keytab");
        let text = format!("[kerberos]\nkeytab = {:?}\n", keytab.display().to_string());
        let (_dir, config) = load_text(&text);
        let service = config.kerberos.expect("kerberos configured");
        // The realm of the keytab's keys, when not given.
        assert_eq!(service.realm(), "COPYLESS.TEST");
        let (_dir, config) = load_text(&format!("{text}realm = \"EXAMPLE.COM\"\n"));
        assert_eq!(config.kerberos.unwrap().realm(), "EXAMPLE.COM");
        assert!(load_text("").1.kerberos.is_none());

        let missing = error_at("[kerberos]\nkeytab = \"nope.keytab\"\n", 2);
        assert!(missing.contains("nope.keytab: cannot read"), "{missing}");
        let dir = TempDir::new();
        let bogus = dir.write("bogus.keytab", "not a keytab");
        let bad = error_at(
            &format!("\n[kerberos]\nkeytab = {:?}\n", bogus.display().to_string()),
            3,
        );
        assert!(bad.contains("not a keytab"), "{bad}");
        let skew = error_at(&format!("{text}clock_skew = 0\n"), 3);
        assert!(skew.contains("clock_skew"), "{skew}");
    }

    #[test]
    fn multichannel_is_on_unless_switched_off() {
        assert!(Config::builtin().multichannel);
        assert!(load_text("").1.multichannel);
        assert!(!load_text("multichannel = false\n").1.multichannel);
        assert!(Config::builtin().change_notify);
        assert!(!load_text("change_notify = false\n").1.change_notify);
    }

    #[test]
    fn tracing_keys() {
        let (dir, config) = load_text(
            "control = \"run/top.sock\"\n[trace]\nenabled = false\n\n\
             [metrics]\nlisten = \"127.0.0.1:9445\"\nuser_labels = true\n",
        );
        assert_eq!(config.control, Some(dir.0.join("run/top.sock")));
        assert_eq!(config.control_path(), dir.0.join("run/top.sock"));
        assert!(!config.trace_enabled);
        assert_eq!(
            config.metrics_listen,
            Some("127.0.0.1:9445".parse().unwrap())
        );
        assert!(config.metrics_user_labels);
        // Tracing is on and the metrics endpoint off unless configured;
        // user names stay out of its labels unless asked for.
        let (_dir, config) = load_text("[trace]\n[metrics]\n");
        assert!(config.trace_enabled);
        assert_eq!(config.metrics_listen, None);
        assert!(!config.metrics_user_labels);
        assert_eq!(config.control, None);
        let builtin = Config::builtin();
        assert!(builtin.trace_enabled);
        assert_eq!(builtin.metrics_listen, None);
        assert!(!builtin.metrics_user_labels);
    }

    #[test]
    fn bad_tracing_keys() {
        let m = error_at("[metrics]\nlisten = \"localhost\"\n", 2);
        assert!(m.contains("metrics listen \"localhost\""), "{m}");
        let m = error_at("[trace]\nenable = true\n", 2);
        assert!(m.contains("unknown field `enable`"), "{m}");
        let m = error_at("\n[metrics]\nport = 9445\n", 3);
        assert!(m.contains("unknown field `port`"), "{m}");
        error_at("[trace]\nenabled = \"yes\"\n", 2);
        let m = error_at(
            "[metrics]\nlisten = \"127.0.0.1:1\"\n\nuser_labels = \"no\"\n",
            4,
        );
        assert!(m.contains("bool"), "{m}");
        let m = error_at("[metrics]\nuser_label = true\n", 2);
        assert!(m.contains("unknown field `user_label`"), "{m}");
        let m = error_at("control = \"\"\n", 1);
        assert!(m.contains("control must not be empty"), "{m}");
    }

    #[test]
    fn default_control_socket() {
        assert_eq!(
            default_control_path(true, Path::new("/var/lib/copyless")),
            PathBuf::from("/run/copyless/control.sock")
        );
        assert_eq!(
            default_control_path(false, Path::new("/home/u/.local/state/copyless")),
            PathBuf::from("/home/u/.local/state/copyless/control.sock")
        );
    }

    #[test]
    fn syntax_error_names_the_line() {
        let message = error_at("listen = [\"0.0.0.0:445\"]\n\nstate_dir = \n", 3);
        assert!(!message.is_empty());
    }

    #[test]
    fn unknown_keys_are_errors() {
        let m = error_at("listen = [\"0.0.0.0:445\"]\nlisen = 1\n", 2);
        assert!(m.contains("unknown field `lisen`"), "{m}");
        let m = error_at("[security]\nsigning = \"required\"\nencrypt = \"off\"\n", 3);
        assert!(m.contains("unknown field `encrypt`"), "{m}");
        let m = error_at(
            "[[share]]\nname = \"a\"\npath = \"/a\"\nreadonly = true\n",
            4,
        );
        assert!(m.contains("unknown field `readonly`"), "{m}");
        let m = error_at("\n[limits]\nmax_files = 3\n", 3);
        assert!(m.contains("unknown field `max_files`"), "{m}");
        let m = error_at("\n\n[securty]\n", 3);
        assert!(m.contains("unknown field `securty`"), "{m}");
    }

    #[test]
    fn wrong_types_are_errors() {
        error_at("listen = \"0.0.0.0:445\"\n", 1);
        error_at("[security]\n\nguest = \"yes\"\n", 3);
        let m = error_at("[security]\nguest_account = \"\"\n", 2);
        assert!(m.contains("guest_account"), "{m}");
        error_at("[limits]\nmax_credits = 70000\n", 2);
        error_at("[limits]\nmax_connections = -1\n", 2);
        let m = error_at("\n[[share]]\npath = \"/a\"\n", 3);
        assert!(m.contains("name"), "{m}");
    }

    #[test]
    fn bad_listen_addresses() {
        let m = error_at("listen = [\n  \"0.0.0.0:445\",\n  \"nas:445\",\n]\n", 3);
        assert!(m.contains("\"nas:445\""), "{m}");
        let m = error_at("\nlisten = [\"0.0.0.0\"]\n", 2);
        assert!(m.contains("ADDR:PORT"), "{m}");
        let m = error_at("listen = []\n", 1);
        assert!(m.contains("at least one"), "{m}");
        let m = error_at("listen = [\"[::]:445\",\n\"[::]:445\"]\n", 2);
        assert!(m.contains("twice"), "{m}");
    }

    #[test]
    fn bad_share_names() {
        let share = |name: &str| format!("\n[[share]]\nname = \"{name}\"\npath = \"/a\"\n");
        let m = error_at(&share(""), 3);
        assert!(m.contains("empty"), "{m}");
        let m = error_at(&share(&"x".repeat(81)), 3);
        assert!(m.contains("81 characters"), "{m}");
        // 80 characters is still fine.
        load_text(&share(&"x".repeat(80)));
        for bad in [
            "a/b", "a\\\\b", "a:b", "a*", "what?", "a|b", "a<b", "x=y", "a\\tb",
        ] {
            let m = error_at(&share(bad), 3);
            assert!(m.contains("invalid character"), "{bad}: {m}");
        }
        let m = error_at(&share(" lead"), 3);
        assert!(m.contains("white space"), "{m}");
        let m = error_at(&share("ipc$"), 3);
        assert!(m.contains("reserved"), "{m}");
    }

    #[test]
    fn duplicate_share_names_are_case_insensitive() {
        let text = "[[share]]\nname = \"Data\"\npath = \"/a\"\n\n\
                    [[share]]\nname = \"dATA\"\npath = \"/b\"\n";
        let m = error_at(text, 6);
        assert!(m.contains("used twice"), "{m}");
    }

    #[test]
    fn bad_security_values() {
        let m = error_at("[security]\nsigning = \"off\"\n", 2);
        assert!(m.contains("\"required\", \"enabled\""), "{m}");
        let m = error_at("[security]\n\nencryption = \"yes\"\n", 3);
        assert!(m.contains("\"off\", \"desired\", \"required\""), "{m}");
    }

    #[test]
    fn limits_out_of_range() {
        let m = error_at("[limits]\nmax_message_size = 65535\n", 2);
        assert!(
            m.contains("max_message_size = 65535 is out of range"),
            "{m}"
        );
        let m = error_at("[limits]\nmax_message_size = 16777216\n", 2);
        assert!(m.contains("out of range"), "{m}");
        error_at("[limits]\nmax_read_write = 16711680\n", 2);
        // The bounds themselves are accepted (with a matching read size).
        load_text("[limits]\nmax_message_size = 16777215\nmax_read_write = 16711679\n");
        load_text("[limits]\nmax_message_size = 131072\nmax_read_write = 65536\n");
        error_at("[limits]\n\n\nmax_connections = 0\n", 4);
        error_at("[limits]\nmax_sessions_per_connection = 0\n", 2);
        error_at("[limits]\nmax_open_files = 0\n", 2);
        error_at("[limits]\nmax_credits = 0\n", 2);
        error_at("[limits]\npreauth_timeout_secs = 0\n", 2);
        error_at("[limits]\nmax_read_write = 4096\n", 2);
        error_at("[limits]\nmax_listing_bytes_per_user = 1000\n", 2);
        error_at("[limits]\n\nmax_listing_bytes_total = 0\n", 3);
    }

    #[test]
    fn limits_must_agree() {
        // The default 8 MiB read size does not fit in a 1 MiB message.
        let m = error_at("[limits]\nmax_message_size = 1048576\n", 2);
        assert!(m.contains("max_read_write"), "{m}");
        let m = error_at(
            "[limits]\nmax_message_size = 1048576\nmax_read_write = 1048576\n",
            3,
        );
        assert!(m.contains("65536 bytes of room"), "{m}");
        // 8 MiB costs 128 credits.
        let m = error_at("[limits]\nmax_credits = 127\n", 2);
        assert!(m.contains("128 credits"), "{m}");
        load_text("[limits]\nmax_credits = 128\n");
    }

    #[test]
    fn engines() {
        let (_dir, config) =
            load_text("engine = \"threads\"\n[[share]]\nname = \"a\"\npath = \"/tmp\"\n");
        assert_eq!(config.engine, EngineKind::Threads);
        assert_eq!(Config::builtin().engine, EngineKind::Auto);
        let m = error_at("\nengine = \"fast\"\n", 2);
        assert!(m.contains("\"auto\", \"io_uring\" or \"threads\""), "{m}");
        let mut a = args(None, &[], &[]);
        a.engine = Some("io_uring".into());
        assert_eq!(
            Config::from_serve_args(&a).unwrap().engine,
            EngineKind::IoUring
        );
        a.engine = Some("uring".into());
        let e = Config::from_serve_args(&a).unwrap_err().to_string();
        assert!(e.starts_with("--engine: "), "{e}");
    }

    #[test]
    fn discovery() {
        let (_dir, config) = load_text("");
        assert_eq!(config.discovery, Discovery::default());
        assert!(config.discovery.mdns && config.discovery.wsd);
        let (_dir, config) = load_text(
            "[discovery]\nmdns = false\nwsd = false\nmodel = \"Xserve\"\nworkgroup = \"home\"\n",
        );
        assert_eq!(
            config.discovery,
            Discovery {
                mdns: false,
                wsd: false,
                model: "Xserve".into(),
                workgroup: "HOME".into(),
            }
        );
        let m = error_at("[discovery]\nwsd = true\nmodel = \"\"\n", 3);
        assert!(m.contains("model"), "{m}");
        let m = error_at("[discovery]\n\nworkgroup = \"a.b\"\n", 3);
        assert!(m.contains("workgroup"), "{m}");
        error_at("[discovery]\nworkgroup = \"sixteen-chars-xx\"\n", 2);
        error_at("[discovery]\nmodel = \"tab\\there\"\n", 2);
        error_at("[discovery]\nbonjour = true\n", 2);
        error_at("[discovery]\nmdns = \"yes\"\n", 2);
    }

    #[test]
    fn bad_server_names() {
        let m = error_at("\nserver_name = \"sixteen-chars-xx\"\n", 2);
        assert!(m.contains("1 to 15"), "{m}");
        let m = error_at("server_name = \"a.b\"\n", 1);
        assert!(m.contains("ASCII letters"), "{m}");
        error_at("server_name = \"\"\n", 1);
    }

    #[test]
    fn unreadable_file_names_the_file() {
        let dir = TempDir::new();
        let path = dir.0.join("missing.toml");
        let err = Config::load(&path).unwrap_err();
        assert_eq!(err.line, None);
        let shown = err.to_string();
        assert!(
            shown.starts_with(&format!("{}: cannot read", path.display())),
            "{shown}"
        );
    }

    #[test]
    fn builtin_defaults() {
        let config = Config::builtin();
        assert_eq!(config.listen, vec![SocketAddr::from(([0, 0, 0, 0], 445))]);
        assert_eq!(config.shares.len(), 1);
        assert_eq!(config.shares[0].name, "share");
        assert_eq!(
            config.shares[0].path,
            std::env::current_dir().unwrap().join("share")
        );
        assert!(!config.shares[0].read_only);
        assert_eq!(config.signing, Signing::Required);
        assert_eq!(config.encryption, Encryption::Off);
        assert!(!config.guest);
        assert_eq!(config.state_dir, default_state_dir());
        assert!(!config.server_name.is_empty() && config.server_name.len() <= 15);
        assert_eq!(config.server_name, config.server_name.to_ascii_uppercase());
    }

    #[test]
    fn state_dir_choice() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(
            state_dir_for(true, os("/x"), os("/home/u")),
            PathBuf::from("/var/lib/copyless")
        );
        assert_eq!(
            state_dir_for(false, os("/x/state"), os("/home/u")),
            PathBuf::from("/x/state/copyless")
        );
        // A relative XDG_STATE_HOME is ignored, as the XDG spec says.
        assert_eq!(
            state_dir_for(false, os("rel"), os("/home/u")),
            PathBuf::from("/home/u/.local/state/copyless")
        );
        assert_eq!(
            state_dir_for(false, None, os("/home/u")),
            PathBuf::from("/home/u/.local/state/copyless")
        );
        assert!(state_dir_for(false, None, None).is_absolute());
    }

    #[test]
    fn netbios_names_from_host_names() {
        assert_eq!(netbios_name("nas"), "NAS");
        assert_eq!(netbios_name("fileserver.example.com"), "FILESERVER");
        assert_eq!(netbios_name("a-very-long-host-name"), "A-VERY-LONG-HOS");
        assert_eq!(netbios_name(""), "COPYLESS");
        assert_eq!(netbios_name("bad name"), "COPYLESS");
    }

    #[test]
    fn line_numbers() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
        assert_eq!(line_of("a\nb\nc", 400), 3);
    }

    fn args(config: Option<&Path>, listen: &[&str], share: &[&str]) -> ServeArgs {
        ServeArgs {
            config: config.map(Path::to_path_buf),
            listen: listen.iter().map(|s| s.to_string()).collect(),
            share: share.iter().map(|s| s.to_string()).collect(),
            state_dir: None,
            engine: None,
        }
    }

    #[test]
    fn share_arguments_never_read_the_default_file() {
        assert_eq!(args(None, &[], &["s=/srv/s"]).config_file(), None);
        let file = Path::new("/x/c.toml");
        assert_eq!(
            args(Some(file), &[], &["s=/srv/s"])
                .config_file()
                .as_deref(),
            Some(file)
        );
    }

    #[test]
    fn no_arguments_is_the_builtin() {
        let config = Config::from_serve_args(&ServeArgs::default()).unwrap();
        assert_eq!(config.listen, Config::builtin().listen);
        assert_eq!(config.shares[0].name, "share");
    }

    #[test]
    fn cli_overrides_replace_the_file() {
        let dir = TempDir::new();
        let path = dir.write("copyless.toml", FULL);
        let mut a = args(
            Some(&path),
            &["127.0.0.1:0", "[::1]:0"],
            &["a=/srv/a", "b=rel/b"],
        );
        a.state_dir = Some(PathBuf::from("/tmp/state"));
        let config = Config::from_serve_args(&a).unwrap();
        assert_eq!(
            config.listen,
            vec![
                "127.0.0.1:0".parse::<SocketAddr>().unwrap(),
                "[::1]:0".parse().unwrap()
            ]
        );
        assert_eq!(config.shares.len(), 2);
        assert_eq!(config.shares[0].name, "a");
        assert_eq!(config.shares[0].path, PathBuf::from("/srv/a"));
        assert!(!config.shares[0].read_only);
        assert_eq!(
            config.shares[1].path,
            std::env::current_dir().unwrap().join("rel/b")
        );
        assert_eq!(config.state_dir, PathBuf::from("/tmp/state"));
        // What the CLI does not override stays from the file.
        assert_eq!(config.signing, Signing::Enabled);
        assert_eq!(config.limits.max_credits, 512);

        // Without overrides the file's values stand.
        let config = Config::from_serve_args(&args(Some(&path), &[], &[])).unwrap();
        assert_eq!(config.shares[0].name, "public");
        assert_eq!(config.listen.len(), 2);
    }

    #[test]
    fn only_the_listen_list_is_replaced() {
        let config = Config::from_serve_args(&args(None, &["127.0.0.1:4445"], &[])).unwrap();
        assert_eq!(config.listen, vec!["127.0.0.1:4445".parse().unwrap()]);
        assert_eq!(config.shares[0].name, "share");
    }

    #[test]
    fn cli_errors_name_the_argument() {
        let err = |a: ServeArgs| Config::from_serve_args(&a).unwrap_err().to_string();
        let m = err(args(None, &["localhost"], &[]));
        assert!(m.starts_with("--listen \"localhost\": "), "{m}");
        let m = err(args(None, &["127.0.0.1:1", "127.0.0.1:1"], &[]));
        assert!(
            m.starts_with("--listen \"127.0.0.1:1\": ") && m.contains("twice"),
            "{m}"
        );
        let m = err(args(None, &[], &["nopath"]));
        assert!(
            m.starts_with("--share \"nopath\": expected NAME=PATH"),
            "{m}"
        );
        let m = err(args(None, &[], &["a/b=/x"]));
        assert!(
            m.starts_with("--share \"a/b=/x\": ") && m.contains("invalid character"),
            "{m}"
        );
        let m = err(args(None, &[], &["=/x"]));
        assert!(m.contains("empty"), "{m}");
        let m = err(args(None, &[], &["a="]));
        assert!(
            m.starts_with("--share \"a=\": ") && m.contains("empty"),
            "{m}"
        );
        let m = err(args(None, &[], &["A=/x", "a=/y"]));
        assert!(
            m.starts_with("--share \"a=/y\": ") && m.contains("twice"),
            "{m}"
        );
        let mut a = args(None, &[], &[]);
        a.state_dir = Some(PathBuf::new());
        assert!(err(a).starts_with("--state-dir"));
    }

    #[test]
    fn share_path_may_contain_equals() {
        let config = Config::from_serve_args(&args(None, &[], &["x=/srv/a=b"])).unwrap();
        assert_eq!(config.shares[0].path, PathBuf::from("/srv/a=b"));
    }

    #[test]
    fn file_errors_pass_through_serve_args() {
        let dir = TempDir::new();
        let path = dir.write("bad.toml", "[security]\nsigning = \"maybe\"\n");
        let m = Config::from_serve_args(&args(Some(&path), &["127.0.0.1:0"], &[]))
            .unwrap_err()
            .to_string();
        assert!(m.starts_with(&format!("{}:2: ", path.display())), "{m}");
    }

    #[test]
    fn a_file_without_shares_needs_share_arguments() {
        let dir = TempDir::new();
        let path = dir.write("noshare.toml", "listen = [\"127.0.0.1:0\"]\n");
        let m = Config::from_serve_args(&args(Some(&path), &[], &[]))
            .unwrap_err()
            .to_string();
        assert!(m.contains("no share configured"), "{m}");
        let config = Config::from_serve_args(&args(Some(&path), &[], &["s=/srv/s"])).unwrap();
        assert_eq!(config.shares[0].name, "s");
    }
}
