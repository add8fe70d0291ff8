//! The engine: sockets, threads and signals. This first engine gives each
//! connection a thread doing plain blocking reads and writes; the protocol
//! core it drives does no I/O of its own, so a zero-copy io_uring engine
//! can replace this one without touching protocol code.

mod env;
mod framing;
mod timing;

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

use copyless_core::{Connection, Output, Server};
use copyless_trace::{clock, FrameTimes, Recorder, Request, Tracer};
use rustix::event::{poll, PollFd, PollFlags};

pub use env::filetime_now;
use env::SystemEnv;
use framing::{read_frame, write_frame, Frame};
use timing::{CountingWriter, TimedReader};

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
    tracer: Arc<Tracer>,
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
                let tracer = tracer.clone();
                let t = std::thread::Builder::new()
                    .name(format!("conn-{id}"))
                    .spawn(move || {
                        serve_connection(server, stream, &limits, &tracer);
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

fn serve_connection(
    server: Arc<Server>,
    stream: TcpStream,
    limits: &EngineLimits,
    tracer: &Arc<Tracer>,
) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    // Made on this thread, and dropped after the shutdown below, so that
    // every filesystem call of the connection is counted for it.
    let mut recorder = tracer.connection(peer.ip());
    let mut conn = Connection::new(server, peer, local);
    let result = catch_unwind(AssertUnwindSafe(|| {
        connection_loop(&mut conn, stream, limits, recorder.as_mut())
    }));
    if result.is_err() {
        eprintln!("copyless: connection from {peer}: internal error, connection closed");
    }
    // Release share modes and run delete-on-close even after a panic.
    let _ = catch_unwind(AssertUnwindSafe(|| conn.shutdown()));
}

fn connection_loop(
    conn: &mut Connection,
    stream: TcpStream,
    limits: &EngineLimits,
    mut recorder: Option<&mut Recorder>,
) {
    let mut env = SystemEnv;
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut reader = TimedReader::new(reader, recorder.is_some());
    let mut writer = CountingWriter {
        inner: stream,
        calls: 0,
    };
    let mut authenticated = false;
    if writer
        .inner
        .set_read_timeout(Some(limits.preauth_timeout))
        .is_err()
    {
        return;
    }
    let mut buf = Vec::new();
    loop {
        reader.reset();
        writer.calls = 0;
        match read_frame(&mut reader, &mut buf, limits.max_message_size) {
            Ok(Frame::Message) => {}
            Ok(Frame::Closed) | Err(_) => return,
        }
        let sent = match recorder.as_deref_mut() {
            None => {
                let out = conn.handle(&buf, &mut env);
                send(&mut writer, &out)
            }
            Some(recorder) => handle_traced(conn, &buf, &mut env, &reader, &mut writer, recorder),
        };
        if !sent {
            return;
        }
        if !authenticated && conn.has_valid_session() {
            authenticated = true;
            if writer.inner.set_read_timeout(None).is_err() {
                return;
            }
        }
    }
}

/// Handles and answers a frame as the untraced path does, noting the
/// clock at each phase boundary.
fn handle_traced(
    conn: &mut Connection,
    buf: &[u8],
    env: &mut SystemEnv,
    reader: &TimedReader<TcpStream>,
    writer: &mut CountingWriter<TcpStream>,
    recorder: &mut Recorder,
) -> bool {
    let mut t = FrameTimes {
        received: clock::now(),
        ..FrameTimes::default()
    };
    t.first_byte = reader.first_byte.unwrap_or(t.received);
    timing::start_requests(buf);
    t.parsed = clock::now();
    // The threaded engine runs a frame as soon as it is parsed: nothing is
    // queued.
    t.dispatched = t.parsed;
    let out = conn.handle(buf, env);
    t.handled = clock::now();
    let sent = send(writer, &out);
    t.sent = clock::now();
    t.bytes_in = buf.len() as u64 + 4;
    t.bytes_out = out.frames.iter().map(|f| f.len() as u64 + 4).sum();
    t.recv_calls = reader.calls;
    t.send_calls = writer.calls;
    recorder.frame(
        &t,
        out.requests.iter().map(|r| Request {
            command: r.command,
            message_id: r.message_id,
            status: r.status,
            share: r.share,
            user: r.user.as_deref(),
        }),
    );
    sent
}

/// Writes the replies; false when the connection is finished (a write
/// failed, or the core asked to disconnect).
fn send(writer: &mut CountingWriter<TcpStream>, out: &Output) -> bool {
    for f in &out.frames {
        if write_frame(writer, f).is_err() {
            return false;
        }
    }
    if out.disconnect {
        let _ = writer.inner.shutdown(Shutdown::Both);
        return false;
    }
    true
}
