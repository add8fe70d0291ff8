//! How fast the protocol core answers over an io_uring loop with no
//! runtime in between, against a plain thread per connection: the bound
//! on what rewriting the io_uring engine without compio could gain
//! (issue 26).
//!
//!     cargo run --release -p copyless-engine --example lean_ring -- ring|threads PORT FOLDER
//!
//! Serves FOLDER as the share `share` to the user `bench` (password
//! `bench`), signing as the client asks, until killed. `ring`: one thread
//! per core, each with its own ring; per connection one single-shot RECV
//! into the connection's buffer, each whole frame handled by the core
//! where it lies, replies written by one `writev` on the non-blocking
//! socket, and the next RECV submitted with the wait for the next
//! completion in one `io_uring_enter`. `threads`: a thread per
//! connection, blocking `recv` into the same kind of buffer and `writev`.
//! Nothing else the engines do is here: no letters between connections,
//! no timers, no tracing, no pool (every request is handled where it
//! arrives, as the engines handle echoes and opens of cached names); a
//! reply the socket does not take at once is written blocking. Only for
//! measuring, with `smbtorture` (smb2.bench.echo,
//! smb2.bench.path-contention-shared) or `copyless bench`.

use std::io::{self, IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{mpsc, Arc};

use copyless_core::{Connection, Env, Output, Server};
use copyless_scripted::{config, server, Users};
use io_uring::{opcode, types, IoUring};

/// Bytes a receive asks for at least.
const CHUNK: usize = 64 * 1024;

struct Clock;

impl Env for Clock {
    fn now(&self) -> u64 {
        copyless_engine::filetime_now()
    }

    fn fill_random(&mut self, buf: &mut [u8]) {
        getrandom::fill(buf).expect("kernel random number generator");
    }
}

/// One connection's core and the bytes received and not yet handled.
struct Peer {
    stream: TcpStream,
    conn: Connection,
    buf: Vec<u8>,
    have: usize,
}

impl Peer {
    fn new(stream: TcpStream, server: &Arc<Server>) -> io::Result<Peer> {
        stream.set_nodelay(true)?;
        let conn = Connection::new(server.clone(), stream.peer_addr()?, stream.local_addr()?);
        Ok(Peer {
            stream,
            conn,
            buf: vec![0; CHUNK],
            have: 0,
        })
    }

    /// Handles every whole frame received and writes the replies; false
    /// when the connection is to end. Leaves room for the next receive.
    fn frames(&mut self) -> bool {
        let mut at = 0;
        while let Some(head) = self.buf[at..self.have].first_chunk::<4>() {
            if head[0] != 0 {
                return false;
            }
            let len = u32::from_be_bytes(*head) as usize;
            if len > self.conn.max_message_size(true) {
                return false;
            }
            let end = at + 4 + len;
            if end > self.have {
                if end - at > self.buf.len() {
                    self.buf.resize(end - at, 0);
                }
                break;
            }
            let frame = &mut self.buf[at + 4..end];
            let out = self.conn.handle_in_place(frame, &mut Clock);
            let out = self.conn.perform_intents(out, frame, &mut Clock);
            if !send(&self.stream, &out) || out.disconnect {
                return false;
            }
            at = end;
        }
        self.buf.copy_within(at..self.have, 0);
        self.have -= at;
        if self.buf.len() - self.have < CHUNK / 2 {
            self.buf.resize(self.have + CHUNK, 0);
        }
        true
    }
}

/// Writes the replies of `out`: at once when the socket takes them,
/// blocking for the rest.
fn send(stream: &TcpStream, out: &Output) -> bool {
    let heads: Vec<[u8; 4]> = out
        .frames
        .iter()
        .map(|f| (f.len() as u32).to_be_bytes())
        .collect();
    let mut bytes: Vec<&[u8]> = Vec::with_capacity(2 * heads.len());
    for (h, f) in heads.iter().zip(&out.frames) {
        bytes.push(h);
        bytes.push(f);
    }
    let mut skip = 0;
    let total: usize = bytes.iter().map(|b| b.len()).sum();
    while skip < total {
        let mut left = skip;
        let slices: Vec<IoSlice<'_>> = bytes
            .iter()
            .filter_map(|b| {
                if left >= b.len() {
                    left -= b.len();
                    None
                } else {
                    let s = IoSlice::new(&b[left..]);
                    left = 0;
                    Some(s)
                }
            })
            .collect();
        match (&*stream).write_vectored(&slices) {
            Ok(0) => return false,
            Ok(n) => skip += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let _ = stream.set_nonblocking(false);
                let mut rest = Vec::with_capacity(total - skip);
                for s in &slices {
                    rest.extend_from_slice(s);
                }
                let r = (&*stream).write_all(&rest);
                let _ = stream.set_nonblocking(true);
                return r.is_ok();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

fn serve_thread(stream: TcpStream, server: Arc<Server>) {
    let Ok(mut peer) = Peer::new(stream, &server) else {
        return;
    };
    loop {
        let have = peer.have;
        match (&peer.stream).read(&mut peer.buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => peer.have += n,
        }
        if !peer.frames() {
            return;
        }
    }
}

/// The user data of the eventfd's read: new connections are waiting.
const ARRIVALS: u64 = u64::MAX;

/// IORING_RECVSEND_POLL_FIRST when LEAN_POLL_FIRST is set: the receive
/// waits for data before trying, rather than trying first.
fn recv_flags() -> u16 {
    static FLAGS: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *FLAGS.get_or_init(|| u16::from(std::env::var_os("LEAN_POLL_FIRST").is_some()))
}

fn arm_recv(ring: &mut IoUring, peer: &mut Peer, slot: usize) {
    let room = &mut peer.buf[peer.have..];
    let recv = opcode::Recv::new(
        types::Fd(peer.stream.as_raw_fd()),
        room.as_mut_ptr(),
        room.len() as u32,
    )
    .ioprio(recv_flags())
    .build()
    .user_data(slot as u64);
    // SAFETY: the buffer is the peer's, which stays in its slot, neither
    // moved nor resized, until this receive's completion is reaped.
    unsafe { ring.submission().push(&recv).expect("ring has room") };
}

fn ring_worker(arrivals: mpsc::Receiver<TcpStream>, bell: OwnedFd, server: Arc<Server>) {
    let mut ring = IoUring::new(1024).expect("io_uring");
    let mut peers: Vec<Option<Peer>> = Vec::new();
    let mut count = [0u8; 8];
    let arm_bell = |ring: &mut IoUring, count: &mut [u8; 8]| {
        let read = opcode::Read::new(types::Fd(bell.as_raw_fd()), count.as_mut_ptr(), 8)
            .build()
            .user_data(ARRIVALS);
        // SAFETY: `count` lives as long as the loop, which never ends.
        unsafe { ring.submission().push(&read).expect("ring has room") };
    };
    arm_bell(&mut ring, &mut count);
    loop {
        ring.submit_and_wait(1).expect("io_uring_enter");
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (slot, result) in done {
            if slot == ARRIVALS {
                for stream in arrivals.try_iter() {
                    let Ok(mut peer) = Peer::new(stream, &server) else {
                        continue;
                    };
                    let _ = peer.stream.set_nonblocking(true);
                    let slot = peers.iter().position(Option::is_none).unwrap_or_else(|| {
                        peers.push(None);
                        peers.len() - 1
                    });
                    arm_recv(&mut ring, &mut peer, slot);
                    peers[slot] = Some(peer);
                }
                arm_bell(&mut ring, &mut count);
                continue;
            }
            let slot = slot as usize;
            let Some(peer) = peers[slot].as_mut() else {
                continue;
            };
            let alive = result > 0 && {
                peer.have += result as usize;
                peer.frames()
            };
            if alive {
                arm_recv(&mut ring, peer, slot);
            } else {
                peers[slot] = None;
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: lean_ring ring|threads PORT FOLDER";
    let mode = args.next().expect(usage);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).expect(usage);
    let folder = args.next().expect(usage);
    let users = Arc::new(Users::default());
    users.add("bench", "bench");
    let mut cfg = config();
    cfg.signing_required = false;
    let server = server(std::path::Path::new(&folder), cfg, users);
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind");
    eprintln!("lean_ring: {mode} on 127.0.0.1:{port}, share `share` at {folder}");
    match mode.as_str() {
        "threads" => {
            for stream in listener.incoming().flatten() {
                let server = server.clone();
                std::thread::spawn(move || serve_thread(stream, server));
            }
        }
        "ring" => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            let workers: Vec<(mpsc::Sender<TcpStream>, OwnedFd)> = (0..n)
                .map(|_| {
                    let (tx, rx) = mpsc::channel();
                    // SAFETY: a plain system call; the descriptor is owned
                    // by the OwnedFd made of it.
                    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
                    assert!(efd >= 0, "eventfd");
                    // SAFETY: just made, owned only here.
                    let bell = unsafe { OwnedFd::from_raw_fd(efd) };
                    let theirs = bell.try_clone().expect("dup");
                    let server = server.clone();
                    std::thread::spawn(move || ring_worker(rx, theirs, server));
                    (tx, bell)
                })
                .collect();
            for (i, stream) in listener.incoming().flatten().enumerate() {
                let (tx, bell) = &workers[i % n];
                if tx.send(stream).is_ok() {
                    let one = 1u64.to_ne_bytes();
                    // SAFETY: writes 8 bytes from a live array.
                    unsafe { libc::write(bell.as_raw_fd(), one.as_ptr().cast(), 8) };
                }
            }
        }
        _ => panic!("{usage}"),
    }
}
