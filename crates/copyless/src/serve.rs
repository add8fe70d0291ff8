//! `copyless serve`: from a Config to a running engine.

use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use copyless_auth::LiveUsers;
use copyless_core::recycle::RecycleBin;
use copyless_core::{Server, ServerConfig, Share};
use copyless_trace::prometheus::ClientLabels;
use copyless_trace::{TimedVfs, Tracer};
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::snapshots::Snapshots;
use copyless_vfs::{Identity, Vfs};

use crate::config::{Config, Encryption, Limits, ServeArgs, ShareConfig, Signing};
use crate::descriptors::Budget;
use copyless_engine::log_limit::RateLimit;
use copyless_engine::{self as engine, AdmissionLimits, EngineLimits, LiveLimits};

/// Runs the server; Err carries a message for the user and the exit code.
/// `args` are kept to read the configuration again on SIGHUP.
pub fn serve(
    config: Config,
    args: ServeArgs,
    create_missing_share: bool,
) -> Result<(), (String, u8)> {
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stdout());
    if let Some(said) = crate::first_user::create_on_first_start(
        &config.state_dir,
        on_terminal,
        crate::first_user::first_account,
    )
    .map_err(|e| (e, 1))?
    {
        println!("{said}");
    }
    copyless_engine::log_level::set_log_level(config.log_level);
    let users = Arc::new(LiveUsers::load(&config.state_dir).map_err(|e| (e.to_string(), 1))?);
    if create_missing_share {
        for s in &config.shares {
            if !s.path.exists() {
                std::fs::create_dir_all(&s.path)
                    .map_err(|e| (format!("cannot create {}: {e}", s.path.display()), 1))?;
                give_to_first_user(&s.path, &users)?;
            }
        }
    }
    // What check-config and a reload check too; a configuration error,
    // as from parsing.
    let warnings =
        crate::validate::validate(&config, Ok(&users.users())).map_err(|e| (e.to_string(), 2))?;
    for warning in warnings {
        eprintln!("copyless: {warning}");
    }
    if users.users().is_empty() {
        eprintln!(
            "copyless: {}",
            crate::first_user::nobody_can_log_in(&config.state_dir)
        );
    }
    // Before the first thread: each inherits what its maker holds.
    crate::privileges::keep_only_what_is_needed()
        .map_err(|e| (format!("cannot drop privileges: {e}"), 1))?;
    crate::users_watch::start(Arc::clone(&users))
        .map_err(|e| (format!("cannot start the user store watcher: {e}"), 1))?;
    let tracer = Tracer::new(
        config.shares.iter().map(|s| s.name.clone()).collect(),
        config.trace_enabled,
    );
    // Every logon outcome shows in the metrics from their first scrape,
    // which may come as soon as the server says it listens.
    engine::expect_logon_outcomes(&tracer);
    let mut shares = Vec::new();
    for (index, s) in config.shares.iter().enumerate() {
        shares.push(make_share(s, index, &tracer).map_err(|e| (e, 1))?);
    }
    let descriptors = crate::descriptors::raise_limit()
        .map_err(|e| (format!("cannot read the descriptor limit: {e}"), 1))?;
    let budget = crate::descriptors::budget(descriptors, &config.limits);
    eprintln!(
        "copyless: descriptor limit {descriptors}: up to {} connections and {} open files \
         ({} per user, {} per connection)",
        budget.max_connections,
        budget.open_files_total,
        budget.open_files_per_user,
        budget.open_files_per_connection
    );
    if !budget.lowered.is_empty() {
        eprintln!(
            "copyless: lowered to fit the descriptor limit: {} (raise it with ulimit -n or \
             LimitNOFILE=)",
            budget.lowered.join(", ")
        );
    }
    let act_as_users = rustix::process::geteuid().is_root();
    let guest_identity =
        crate::no_root::guest_identity(&config.guest_account, config.guest).map_err(|e| (e, 2))?;
    eprintln!(
        "copyless: {}",
        acting_as(act_as_users, &config.guest_account, &guest_identity)
    );
    let machine_sid = crate::machine_sid::load_or_create(&config.state_dir).map_err(|e| (e, 1))?;
    let mut guid = [0u8; 16];
    getrandom::fill(&mut guid).map_err(|e| (format!("random: {e}"), 1))?;
    let server_config = ServerConfig {
        server_name: config.server_name.clone(),
        server_comment: config.server_string.clone(),
        min_dialect: config.dialects.0,
        max_dialect: config.dialects.1,
        signing_required: config.signing == Signing::Required,
        encrypt_data: config.encryption == Encryption::Desired,
        reject_unencrypted: config.encryption == Encryption::Required,
        allow_guest: config.guest,
        unknown_users_as_guests: config.map_to_guest,
        multichannel: config.multichannel,
        change_notify: config.change_notify,
        kerberos: config.kerberos.clone(),
        limits: core_limits(&config.limits, &budget),
        server_guid: guid,
        start_time: engine::filetime_now(),
        unix_uid: rustix::process::geteuid().as_raw(),
        unix_gid: rustix::process::getegid().as_raw(),
        act_as_users,
        guest_identity,
        machine_sid,
        quota_admins: config.quota_admins.clone(),
    };
    let server = Server::new(server_config, shares, users.clone());
    let keeper = Arc::new(crate::share_keeper::ShareKeeper::new(
        &config.shares,
        tracer.clone(),
    ));
    server.set_share_keeper(keeper.clone());
    if let Some(template) = &config.homes {
        let homes = crate::homes::Homes::new(template.clone(), tracer.clone());
        server.set_homes(Arc::new(homes));
    }
    watch_share_folders(server.clone())
        .map_err(|e| (format!("cannot start the share folder watcher: {e}"), 1))?;
    let recycle_sweeper = crate::recycle_sweeper::start(server.clone())
        .map_err(|e| (format!("cannot start the recycle bin sweeper: {e}"), 1))?;
    // Both are served before the SMB listeners are announced, so that a
    // script that waits for those finds them ready.
    let (audit, audit_writer) = engine::AuditLog::start(config.audit_to.clone()).map_err(|e| {
        let to = match &config.audit_to {
            engine::AuditTo::File { path, .. } => path.display().to_string(),
            engine::AuditTo::Journal => "standard error".into(),
        };
        (format!("cannot write the audit log {to}: {e}"), 1)
    })?;
    let control_path = config.control_path();
    let sources = crate::control::Sources {
        status: {
            let server = server.clone();
            Arc::new(move || crate::status::to_json(&server.status()))
        },
        audit: audit.clone(),
    };
    let _control = match crate::control::start(&control_path, tracer.clone(), sources) {
        Ok(socket) => Some(socket),
        Err(e) => {
            // Statistics are not worth refusing to serve files over.
            eprintln!(
                "copyless: control socket {}: {e}; `copyless top` will not reach this server",
                control_path.display()
            );
            None
        }
    };
    if let Some(addr) = config.metrics_listen {
        let labels = if config.metrics_user_labels {
            ClientLabels::AddressAndUser
        } else {
            ClientLabels::Address
        };
        let nas = crate::metrics::nas_source(server.clone());
        let local = crate::metrics::start(addr, tracer.clone(), labels, nas)
            .map_err(|e| (format!("cannot serve metrics on {addr}: {e}"), 1))?;
        if let Some(warning) = crate::metrics::exposure_warning(local) {
            eprintln!("copyless: warning: {warning}");
        }
        println!("copyless metrics on http://{local}/metrics");
        println!("copyless dashboard on http://{local}/");
    }
    let stop = engine::StopSignal::install()
        .map_err(|e| (format!("cannot catch SIGTERM and SIGINT: {e}"), 1))?;
    let notifier = crate::systemd::Notifier::from_env();
    let live_limits = LiveLimits::new(engine_limits(&config.limits, &budget));
    live_limits.set_hosts(config.hosts.clone());
    let reloader = crate::reload::Reloader {
        args,
        users: Arc::clone(&users),
        descriptors,
        engine_limits: live_limits.clone(),
        current: config.clone(),
        server: server.clone(),
        tracer: tracer.clone(),
        notifier: notifier.clone(),
        keeper,
        recycle_sweeper,
    };
    watch_signals(notifier.clone(), reloader)
        .map_err(|e| (format!("cannot catch SIGTERM, SIGINT and SIGHUP: {e}"), 1))?;
    let mut listeners = Vec::new();
    for addr in &config.listen {
        let l =
            TcpListener::bind(addr).map_err(|e| (format!("cannot listen on {addr}: {e}"), 1))?;
        let local = l.local_addr().map_err(|e| (e.to_string(), 1))?;
        println!("copyless listening on {local}");
        listeners.push(l);
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if let Some(notifier) = &notifier {
        let addrs: Vec<String> = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect();
        notifier.ready(&format!(
            "serving {} share(s) on {}",
            config.shares.len(),
            addrs.join(", ")
        ));
        let first = listeners.first().and_then(|l| l.local_addr().ok());
        if let (Some(interval), Some(addr)) = (crate::systemd::watchdog_interval(), first) {
            crate::systemd::start_watchdog(
                notifier.clone(),
                interval,
                crate::systemd::local_probe_address(addr),
            );
        }
    }
    let listening: Vec<_> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .collect();
    let discovery = crate::discovery::start(&config, &listening, machine_sid);
    contain_panic_messages();
    let served = engine::run(
        server,
        listeners,
        live_limits,
        tracer,
        config.engine,
        stop,
        audit,
    );
    audit_writer.finish();
    // The signal thread says so as soon as a stop is asked for; should the
    // engine finish first, it is said here, before the process ends.
    if let Some(n) = &notifier {
        n.stopping();
    }
    discovery.stop();
    served.map_err(|e| (e.to_string(), 1))
}

/// Says STOPPING to systemd as soon as a stop is asked for (the engine
/// then takes a while to finish its connections), and reloads the
/// configuration on SIGHUP (the unit's ExecReload).
fn watch_signals(
    notifier: Option<Arc<crate::systemd::Notifier>>,
    mut reloader: crate::reload::Reloader,
) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                match signal {
                    SIGHUP => reloader.reload(),
                    _ => {
                        if let Some(n) = &notifier {
                            n.stopping();
                        }
                    }
                }
            }
        })?;
    Ok(())
}

/// Has the keeper of the shares' folders (share_keeper.rs) look at them
/// every second: a share whose folder vanished is set aside before the
/// next tree connect needs to find out, and served again once it is back.
fn watch_share_folders(server: Arc<Server>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("share-folders".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            server.check_shares();
        })?;
    Ok(())
}

/// The core's limits: `limits` within what the descriptor `budget` allows.
pub fn core_limits(limits: &Limits, budget: &Budget) -> copyless_core::Limits {
    copyless_core::Limits {
        max_message_size: limits.max_message_size,
        max_preauth_message_size: limits.max_preauth_message_size,
        max_io_size: limits.max_read_write,
        max_credits: limits.max_credits,
        max_sessions: limits.max_sessions_per_connection,
        max_tree_connects: limits.max_tree_connects_per_session,
        max_open_files: limits.max_open_files,
        max_open_files_per_connection: budget.open_files_per_connection,
        max_open_files_per_user: budget.open_files_per_user,
        max_open_files_total: budget.open_files_total,
        max_listing_bytes: limits.max_listing_bytes_per_connection as usize,
        max_listing_bytes_per_user: limits.max_listing_bytes_per_user as usize,
        max_listing_bytes_total: limits.max_listing_bytes_total as usize,
    }
}

/// The engine's limits: `limits` within what the descriptor `budget`
/// allows.
pub fn engine_limits(limits: &Limits, budget: &Budget) -> EngineLimits {
    EngineLimits {
        admission: AdmissionLimits {
            max_connections: budget.max_connections as usize,
            max_unauthenticated: limits.max_unauthenticated_connections as usize,
            max_unauthenticated_per_address: limits.max_unauthenticated_per_address as usize,
        },
        preauth_timeout: Duration::from_secs(u64::from(limits.preauth_timeout_secs)),
        max_local_watches: limits.max_local_watches as usize,
    }
}

/// A configured share, served at `index` (its figures go there).
pub fn make_share(s: &ShareConfig, index: usize, tracer: &Arc<Tracer>) -> Result<Share, String> {
    let vfs = PosixVfs::new(&s.path)
        .map_err(|e| format!("share {}: {}: {e}", s.name, s.path.display()))?
        .with_modes(s.modes)
        .with_quotas(Arc::new(copyless_engine::Quotactl));
    let vfs: Arc<dyn Vfs> = if tracer.enabled() {
        Arc::new(TimedVfs::new(Arc::new(vfs), tracer.clone(), index))
    } else {
        Arc::new(vfs)
    };
    let snapshots = s
        .snapshots
        .clone()
        .map(|source| Arc::new(Snapshots::new(&s.path, source)));
    // The folder that holds the snapshots, where it lies in the share, is
    // reached only through the versions it holds.
    let mut names = s.names.clone();
    names
        .veto_files
        .extend(snapshots.as_ref().and_then(|s| s.folder_in_share()));
    // The recycle bin shows hidden, as Explorer and Finder show what they
    // are asked to.
    let recycle = match &s.recycle {
        Some(r) => {
            names
                .hide_files
                .push(copyless_core::recycle::FOLDER.to_owned());
            let bin = RecycleBin::new(&r.exclude, r.max_size, r.keep_days)
                .map_err(|e| format!("share {}: recycle_exclude: {e}", s.name))?;
            Some(Arc::new(bin))
        }
        None => None,
    };
    Ok(Share {
        name: s.name.clone(),
        vfs,
        read_only: s.read_only,
        path: display_path(&s.path),
        comment: s.comment.clone(),
        names: Arc::new(
            names
                .rules()
                .map_err(|e| format!("share {}: {e}", s.name))?,
        ),
        owner: None,
        access: s.access.clone(),
        audit: s.audit,
        snapshots,
        recycle,
    })
}

fn display_path(p: &Path) -> String {
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// A panic is contained to its connection, but its message would still be
/// printed each time: a client that can trigger one must not be able to
/// flood the log with it.
fn contain_panic_messages() {
    static PANICKED: RateLimit = RateLimit::new(Duration::from_secs(10));
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed").to_string();
        PANICKED.log(|| format!("internal error in thread {name}: {info}"));
    }));
}

/// Who sessions act as on disk, for the start log: the kernel checks
/// each file operation against that identity.
fn acting_as(act_as_users: bool, guest_account: &str, guest: &Identity) -> String {
    let own = rustix::process::geteuid().as_raw();
    if !act_as_users {
        return format!(
            "not running as root: every session acts on disk as this process's own account \
             (uid {own}), whoever logs in"
        );
    }
    let guest = match guest {
        Identity::Unix(ids) => format!("{guest_account} (uid {})", ids.uid),
        Identity::Server => format!("uid {own}"),
    };
    format!(
        "running as root: each session acts on disk as its user's Unix account (its uid, \
         primary group and groups; force_user and force_group where a share sets them), \
         guests and anonymous sessions as {guest}"
    )
}

/// A share directory the server made itself belongs to the first user's
/// Unix account, so that on a first start as root the user it created can
/// write there.
fn give_to_first_user(path: &Path, users: &LiveUsers) -> Result<(), (String, u8)> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let store = users.users();
    let Some(account) = store
        .names()
        .first()
        .and_then(|name| store.unix_account(name).map(str::to_string))
    else {
        return Ok(());
    };
    let Ok(owner) = copyless_auth::unix::lookup(&account) else {
        return Ok(());
    };
    std::os::unix::fs::chown(path, Some(owner.uid), Some(owner.gid)).map_err(|e| {
        (
            format!("cannot give {} to {account}: {e}", path.display()),
            1,
        )
    })?;
    eprintln!(
        "copyless: created {} for Unix account {account}",
        path.display()
    );
    Ok(())
}
