//! The engine: sockets, threads and signals. This first engine gives each
//! connection a thread doing plain blocking reads and writes; the protocol
//! core it drives does no I/O of its own, so a zero-copy io_uring engine
//! can replace this one without touching protocol code.

mod env;
mod framing;

use std::collections::HashMap;
use std::io;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use copyless_core::{Connection, Server};
use rustix::event::{poll, PollFd, PollFlags};

pub use env::filetime_now;
use env::SystemEnv;
use framing::{read_frame, write_frame, Frame};

#[derive(Debug, Clone)]
pub struct EngineLimits {
    pub max_message_size: usize,
    pub max_connections: usize,
    /// A connection must finish authenticating within this time.
    pub preauth_timeout: Duration,
}

type Registry = Arc<Mutex<HashMap<u64, TcpStream>>>;

/// Accepts connections until SIGTERM or SIGINT, then stops accepting, lets
/// every connection finish the request it is running, closes their opens,
/// and returns.
pub fn run(
    server: Arc<Server>,
    listeners: Vec<TcpListener>,
    limits: EngineLimits,
) -> io::Result<()> {
    let (stop_rx, stop_tx) = UnixStream::pair()?;
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::low_level::pipe::register(sig, stop_tx.try_clone()?)?;
    }
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    let registry: Registry = Arc::new(Mutex::new(HashMap::new()));
    let next_id = AtomicU64::new(1);
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    'accept: loop {
        let mut fds: Vec<PollFd<'_>> = listeners
            .iter()
            .map(|l| PollFd::new(l, PollFlags::IN))
            .collect();
        fds.push(PollFd::from_borrowed_fd(stop_rx.as_fd(), PollFlags::IN));
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if !fds.last().expect("stop fd").revents().is_empty() {
            break 'accept;
        }
        drop(fds);
        threads.retain(|t| !t.is_finished());
        for l in &listeners {
            loop {
                let (stream, peer) = match l.accept() {
                    Ok(s) => s,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        // Out of descriptors and the like: keep serving the
                        // connections we have.
                        eprintln!("copyless: accept: {e}");
                        break;
                    }
                };
                if registry.lock().map(|r| r.len()).unwrap_or(0) >= limits.max_connections {
                    eprintln!("copyless: refusing {peer}: connection limit reached");
                    continue;
                }
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                if let Ok(c) = stream.try_clone() {
                    lock(&registry).insert(id, c);
                }
                let server = server.clone();
                let limits = limits.clone();
                let registry = registry.clone();
                let t = std::thread::Builder::new()
                    .name(format!("conn-{id}"))
                    .spawn(move || {
                        serve_connection(server, stream, &limits);
                        lock(&registry).remove(&id);
                    })?;
                threads.push(t);
            }
        }
    }
    drop(listeners);
    for (_, s) in lock(&registry).iter() {
        // The next read sees end of stream; a reply being written still
        // goes out.
        let _ = s.shutdown(Shutdown::Read);
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

fn lock(r: &Registry) -> std::sync::MutexGuard<'_, HashMap<u64, TcpStream>> {
    r.lock().unwrap_or_else(|e| e.into_inner())
}

fn serve_connection(server: Arc<Server>, stream: TcpStream, limits: &EngineLimits) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let mut conn = Connection::new(server, peer, local);
    let result = catch_unwind(AssertUnwindSafe(|| {
        connection_loop(&mut conn, stream, limits)
    }));
    if result.is_err() {
        eprintln!("copyless: connection from {peer}: internal error, connection closed");
    }
    // Release share modes and run delete-on-close even after a panic.
    let _ = catch_unwind(AssertUnwindSafe(|| conn.shutdown()));
}

fn connection_loop(conn: &mut Connection, stream: TcpStream, limits: &EngineLimits) {
    let mut env = SystemEnv;
    let Ok(mut reader) = stream.try_clone() else {
        return;
    };
    let mut writer = stream;
    let mut authenticated = false;
    if writer
        .set_read_timeout(Some(limits.preauth_timeout))
        .is_err()
    {
        return;
    }
    let mut buf = Vec::new();
    loop {
        match read_frame(&mut reader, &mut buf, limits.max_message_size) {
            Ok(Frame::Message) => {}
            Ok(Frame::Closed) | Err(_) => return,
        }
        let out = conn.handle(&buf, &mut env);
        for f in &out.frames {
            if write_frame(&mut writer, f).is_err() {
                return;
            }
        }
        if out.disconnect {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
        if !authenticated && conn.has_valid_session() {
            authenticated = true;
            if writer.set_read_timeout(None).is_err() {
                return;
            }
        }
    }
}
