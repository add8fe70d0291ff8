//! The engines: sockets, threads, rings and the kernel, the only layer
//! that does I/O. Both drive the same sans-IO protocol core:
//!
//! - `uring`: a few threads, one per core, each a loop over its own
//!   io_uring; connections are driven by their loop's calls, data intents
//!   are ring operations, and work that touches file metadata runs on a
//!   thread pool, never on the loop that serves sockets.
//! - `threads`: a thread per connection with plain blocking reads and
//!   writes, for hosts that refuse io_uring (container seccomp profiles,
//!   `kernel.io_uring_disabled`).
//!
//! The accept loop, admission and shutdown are shared.

mod admission;
mod audit_log;
mod env;
mod framing;
mod local;
pub mod log_level;
pub mod log_limit;
mod logons;
mod memory;
mod post;
mod quotas;
mod threads;
mod uring;

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use copyless_core::hosts::HostFilter;
use copyless_core::Server;
use copyless_trace::Tracer;
use rustix::event::{poll, PollFd, PollFlags, Timespec};

pub use admission::AdmissionLimits;
use admission::{Refusal, Table};
pub use audit_log::{utc_stamp, AuditLog, AuditTo, AuditWriter, RECENT as AUDIT_RECENT};
pub use env::filetime_now;
use log_level::{log, LogLevel};
use log_limit::RateLimit;
pub use logons::expect_logon_outcomes;
use logons::Logons;
pub use quotas::Quotactl;

/// The engine's own limits; a connection's message sizes are the core's
/// (`Connection::max_message_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLimits {
    pub admission: AdmissionLimits,
    /// A connection must finish NEGOTIATE and SESSION_SETUP within this
    /// time of being accepted, whatever it sends meanwhile.
    pub preauth_timeout: Duration,
    /// Directories watched for changes local processes make (inotify
    /// watches); 0 reports only changes made through the server.
    pub max_local_watches: usize,
}

/// The engine's limits, and the client addresses it lets in, as the last
/// reload left them: admission is checked against those in force at each
/// accept, a connection's pre-authentication deadline is set at its
/// accept, and the watch of local changes reads its limit at each new
/// watch.
#[derive(Debug)]
pub struct LiveLimits {
    limits: RwLock<EngineLimits>,
    hosts: RwLock<Arc<HostFilter>>,
}

impl LiveLimits {
    /// Every client address is let in until [`LiveLimits::set_hosts`].
    pub fn new(limits: EngineLimits) -> Arc<LiveLimits> {
        Arc::new(LiveLimits {
            limits: RwLock::new(limits),
            hosts: RwLock::default(),
        })
    }

    pub fn get(&self) -> EngineLimits {
        *self.limits.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set(&self, limits: EngineLimits) {
        *self.limits.write().unwrap_or_else(|e| e.into_inner()) = limits;
    }

    /// `[security] hosts_allow` and `hosts_deny`.
    pub fn hosts(&self) -> Arc<HostFilter> {
        self.hosts.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_hosts(&self, hosts: HostFilter) {
        *self.hosts.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(hosts);
    }
}

/// Which engine serves connections (`engine` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// io_uring when the kernel allows it (not refused by seccomp,
    /// `kernel.io_uring_disabled` or an old kernel), else threads: the
    /// default.
    #[default]
    Auto,
    IoUring,
    /// A thread per connection: for hosts that refuse io_uring, and the
    /// yardstick the io_uring engine is measured against.
    Threads,
}

/// What the accept loop keeps of each connection: enough to close it.
pub(crate) type Connections = Arc<Mutex<Table<Arc<TcpStream>>>>;

pub(crate) fn lock(c: &Connections) -> MutexGuard<'_, Table<Arc<TcpStream>>> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// A connection the accept loop let in, for an engine to serve.
pub(crate) struct Accepted {
    pub id: u64,
    pub stream: Arc<TcpStream>,
    pub peer: SocketAddr,
    pub connections: Connections,
}

impl Accepted {
    /// Lifts the pre-authentication caps from this connection.
    pub fn authenticated(&self) {
        lock(&self.connections).authenticated(self.id);
    }

    /// Gives the connection's slot back.
    pub fn finished(&self) {
        lock(&self.connections).remove(self.id);
        log(LogLevel::Debug, || {
            format!("connection from {} closed", self.peer)
        });
    }
}

/// How an engine takes connections from the accept loop.
pub(crate) trait Serve {
    /// Starts serving `c`; an error means the process lacks the resources
    /// for it now (the connection is then dropped, others go on).
    fn start(&mut self, c: Accepted) -> io::Result<()>;
    /// Accepting has stopped and every connection was told to finish:
    /// waits until they have.
    fn finish(self);
}

pub(crate) static ACCEPT_FAILED: RateLimit = RateLimit::new(Duration::from_secs(10));
static REFUSED: RateLimit = RateLimit::new(Duration::from_secs(10));
static NOT_LET_IN: RateLimit = RateLimit::new(Duration::from_secs(10));
static EVICTED: RateLimit = RateLimit::new(Duration::from_secs(10));
pub(crate) static START_FAILED: RateLimit = RateLimit::new(Duration::from_secs(10));

/// The first pause after `accept` fails for lack of descriptors or
/// memory; it doubles up to [`MAX_BACKOFF`] while failures go on.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(50);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// SIGTERM and SIGINT, caught from the moment this is made: the server
/// installs it before it announces its listeners, so that a signal sent as
/// soon as they are announced stops it cleanly.
pub struct StopSignal(UnixStream);

impl StopSignal {
    pub fn install() -> io::Result<StopSignal> {
        let (stop_rx, stop_tx) = UnixStream::pair()?;
        for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::low_level::pipe::register(sig, stop_tx.try_clone()?)?;
        }
        Ok(StopSignal(stop_rx))
    }
}

/// Serves with the engine `kind` asks for (saying which on standard
/// error) until `stop`; then stops accepting, lets every connection finish
/// the request it is running, closes their opens, and returns.
pub fn run(
    server: Arc<Server>,
    listeners: Vec<TcpListener>,
    limits: Arc<LiveLimits>,
    tracer: Arc<Tracer>,
    kind: EngineKind,
    stop: StopSignal,
    audit: Arc<AuditLog>,
) -> io::Result<()> {
    let stop_rx = stop.0;
    let (logons, log_writer) = Logons::start(tracer.clone(), audit)?;
    let uring = match kind {
        EngineKind::Threads => None,
        EngineKind::IoUring => Some(uring::Engine::new(&server, &limits, &tracer, &logons)?),
        EngineKind::Auto => match uring::Engine::new(&server, &limits, &tracer, &logons) {
            Ok(e) => Some(e),
            Err(e) => {
                log(LogLevel::Warning, || {
                    format!("io_uring is not available ({e}); using threads")
                });
                None
            }
        },
    };
    let served = match uring {
        Some(engine) => {
            log(LogLevel::Info, || {
                format!("engine io_uring, {} threads", engine.threads())
            });
            // Stops when dropped, after the connections have finished.
            let _local = local::start(&server, engine.post(), &limits);
            engine.run(listeners, &limits, &stop_rx)
        }
        None => {
            log(LogLevel::Info, || {
                "engine threads, one per connection".into()
            });
            let engine = threads::Engine::new(server.clone(), limits.clone(), tracer, logons);
            let _local = local::start(&server, engine.post(), &limits);
            accept_loop(listeners, &limits, stop_rx, engine)
        }
    };
    log_writer.finish();
    served
}

fn accept_loop(
    listeners: Vec<TcpListener>,
    limits: &LiveLimits,
    stop_rx: UnixStream,
    mut engine: impl Serve,
) -> io::Result<()> {
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    let connections: Connections = Arc::new(Mutex::new(Table::new(limits.get().admission)));
    let mut backoff: Option<(Instant, Duration)> = None;
    loop {
        // While backing off, the listeners are not watched: they would
        // report the same pending connection at once, and the loop spin.
        let pause = backoff.map(|(until, _)| until.saturating_duration_since(Instant::now()));
        let watch = if pause.is_some_and(|p| !p.is_zero()) {
            &listeners[..0]
        } else {
            &listeners[..]
        };
        let mut fds: Vec<PollFd<'_>> = watch
            .iter()
            .map(|l| PollFd::new(l, PollFlags::IN))
            .collect();
        fds.push(PollFd::from_borrowed_fd(stop_rx.as_fd(), PollFlags::IN));
        let timeout = pause.and_then(|p| Timespec::try_from(p).ok());
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if !fds.last().expect("stop fd").revents().is_empty() {
            break;
        }
        drop(fds);
        for l in watch {
            match accept_all(l, limits, &connections, &mut engine) {
                Ok(()) => backoff = None,
                Err(e) => {
                    let step = backoff.map_or(FIRST_BACKOFF, |(_, d)| (d * 2).min(MAX_BACKOFF));
                    ACCEPT_FAILED
                        .log(|| format!("accept: {e}; not accepting for {} ms", step.as_millis()));
                    backoff = Some((Instant::now() + step, step));
                }
            }
        }
    }
    drop(listeners);
    end_all(&connections);
    engine.finish();
    Ok(())
}

/// Waits until `stop` is readable: a signal came.
fn wait_for_stop(stop: &UnixStream) -> io::Result<()> {
    loop {
        let mut fds = [PollFd::from_borrowed_fd(stop.as_fd(), PollFlags::IN)];
        match poll(&mut fds, None) {
            Ok(_) if !fds[0].revents().is_empty() => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Tells every connection to finish once accepting has stopped.
fn end_all(connections: &Connections) {
    for s in lock(connections).handles() {
        // The next read sees end of stream; a reply being written still
        // goes out.
        let _ = s.shutdown(Shutdown::Read);
    }
}

/// Accepts every connection waiting on `l`. An error means the process
/// lacks descriptors or memory for now: the caller backs off.
fn accept_all(
    l: &TcpListener,
    limits: &LiveLimits,
    connections: &Connections,
    engine: &mut impl Serve,
) -> io::Result<()> {
    loop {
        let (stream, peer) = match l.accept() {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The connection went away while queued.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return Err(e),
        };
        let Some(accepted) = admit(stream, peer, limits, connections) else {
            continue;
        };
        let (id, peer) = (accepted.id, accepted.peer);
        if let Err(e) = engine.start(accepted) {
            // The client sees the connection close; others go on.
            lock(connections).remove(id);
            START_FAILED.log(|| format!("cannot serve {peer}: {e}"));
        }
    }
}

/// Takes a new connection into the table, or refuses it (the client sees
/// it close) when every slot is taken by an authenticated connection.
pub(crate) fn admit(
    stream: TcpStream,
    peer: SocketAddr,
    limits: &LiveLimits,
    connections: &Connections,
) -> Option<Accepted> {
    if !limits.hosts().admits(peer.ip()) {
        // Dropped before it costs a slot, a thread or a read.
        NOT_LET_IN.log(|| {
            format!("refused a connection from {peer}: not let in by [security] hosts_allow and hosts_deny")
        });
        return None;
    }
    let stream = Arc::new(stream);
    let admission = limits.get().admission;
    let admitted = {
        let mut table = lock(connections);
        table.set_limits(admission);
        table.admit(peer.ip(), stream.clone())
    };
    let admitted = match admitted {
        Ok(a) => a,
        Err(Refusal::Full) => {
            REFUSED.log(|| {
                format!(
                    "refusing {peer}: all {} connections are in use",
                    admission.max_connections
                )
            });
            return None;
        }
    };
    for (address, evicted) in admitted.evicted {
        EVICTED.log(|| {
            format!(
                "closed a connection from {address} that had not authenticated, \
                 to make room for {peer}"
            )
        });
        let _ = evicted.shutdown(Shutdown::Both);
    }
    log(LogLevel::Debug, || format!("connection from {peer}"));
    Some(Accepted {
        id: admitted.id,
        stream,
        peer,
        connections: connections.clone(),
    })
}
