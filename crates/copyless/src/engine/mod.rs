//! The engine: sockets, threads and signals. This first engine gives each
//! connection a thread doing plain blocking reads and writes; the protocol
//! core it drives does no I/O of its own, so a zero-copy io_uring engine
//! can replace this one without touching protocol code.

mod admission;
mod connection;
mod env;
mod framing;
pub mod log_limit;
mod timing;

use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use copyless_core::Server;
use copyless_trace::Tracer;
use rustix::event::{poll, PollFd, PollFlags, Timespec};

pub use admission::AdmissionLimits;
use admission::{Refusal, Table};
pub use env::filetime_now;
use log_limit::RateLimit;

#[derive(Debug, Clone)]
pub struct EngineLimits {
    pub max_message_size: usize,
    /// Until a session is authenticated, no larger message is read.
    pub max_preauth_message_size: usize,
    pub admission: AdmissionLimits,
    /// A connection must finish NEGOTIATE and SESSION_SETUP within this
    /// time of being accepted, whatever it sends meanwhile.
    pub preauth_timeout: Duration,
}

/// What the accept loop keeps of each connection: enough to close it.
type Connections = Arc<Mutex<Table<Arc<TcpStream>>>>;

fn lock(c: &Connections) -> MutexGuard<'_, Table<Arc<TcpStream>>> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

static ACCEPT_FAILED: RateLimit = RateLimit::new(Duration::from_secs(10));
static REFUSED: RateLimit = RateLimit::new(Duration::from_secs(10));
static EVICTED: RateLimit = RateLimit::new(Duration::from_secs(10));
static SPAWN_FAILED: RateLimit = RateLimit::new(Duration::from_secs(10));

/// The first pause after `accept` fails for lack of descriptors or
/// memory; it doubles up to [`MAX_BACKOFF`] while failures go on.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Accepts connections until SIGTERM or SIGINT, then stops accepting, lets
/// every connection finish the request it is running, closes their opens,
/// and returns.
pub fn run(
    server: Arc<Server>,
    listeners: Vec<TcpListener>,
    limits: EngineLimits,
    tracer: Arc<Tracer>,
) -> io::Result<()> {
    let (stop_rx, stop_tx) = UnixStream::pair()?;
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::low_level::pipe::register(sig, stop_tx.try_clone()?)?;
    }
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    let connections: Connections = Arc::new(Mutex::new(Table::new(limits.admission)));
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
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
        threads.retain(|t| !t.is_finished());
        for l in watch {
            match accept_all(l, &server, &limits, &tracer, &connections, &mut threads) {
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
    for s in lock(&connections).handles() {
        // The next read sees end of stream; a reply being written still
        // goes out.
        let _ = s.shutdown(Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

/// Accepts every connection waiting on `l`. An error means the process
/// lacks descriptors or memory for now: the caller backs off.
fn accept_all(
    l: &TcpListener,
    server: &Arc<Server>,
    limits: &EngineLimits,
    tracer: &Arc<Tracer>,
    connections: &Connections,
    threads: &mut Vec<JoinHandle<()>>,
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
        let stream = Arc::new(stream);
        let admitted = lock(connections).admit(peer.ip(), stream.clone());
        let admitted = match admitted {
            Ok(a) => a,
            Err(Refusal::Full) => {
                REFUSED.log(|| {
                    format!(
                        "refusing {peer}: all {} connections are in use",
                        limits.admission.max_connections
                    )
                });
                continue;
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
        let id = admitted.id;
        let spawned = {
            let server = server.clone();
            let limits = limits.clone();
            let connections = connections.clone();
            let tracer = tracer.clone();
            std::thread::Builder::new()
                .name(format!("conn-{id}"))
                .spawn(move || {
                    let on_authenticated = || lock(&connections).authenticated(id);
                    connection::serve(server, &stream, &limits, &tracer, on_authenticated);
                    lock(&connections).remove(id);
                })
        };
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                // The closure, and the stream with it, is dropped: the
                // client sees the connection close; others go on.
                lock(connections).remove(id);
                SPAWN_FAILED.log(|| format!("cannot start a thread for {peer}: {e}"));
            }
        }
    }
}
