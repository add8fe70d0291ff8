//! What one request and its reply cost the server in kernel and user time,
//! by how the server waits for the socket.
//!
//!     cargo run --release -p copyless-engine --example ping [ROUNDS]
//!
//! A client thread sends 64 bytes over loopback TCP and waits for 64 back,
//! ROUNDS times (default 100,000), as `smb2.bench.echo` does on one
//! connection. The server thread answers in one of these ways, and reports
//! its own CPU time (getrusage of its thread) per round trip:
//!
//! - `blocking`: read, then write (the thread engine);
//! - `single`: io_uring; each receive a single-shot RECV (the kernel arms a
//!   poll for every one), the reply a SEND submitted with the next RECV in
//!   one `io_uring_enter` that also waits;
//! - `single-timespec`: as `single`, each wait bounded by a timeout (what
//!   a runtime with any timer pending passes to every `io_uring_enter`);
//! - `multishot`: io_uring; one RECV_MULTISHOT into a ring of provided
//!   buffers answers every arrival, the reply a SEND whose success posts no
//!   completion, so one `io_uring_enter` per round trip both sends and waits;
//! - `multishot-defer`: as `multishot` on a ring set up with SINGLE_ISSUER
//!   and DEFER_TASKRUN (completions run in the waiting `io_uring_enter`,
//!   not by interrupting the thread);
//! - `compio`: the runtime the io_uring engine is built on, one task
//!   reading into a Vec and writing it back (single-shot receives);
//! - `blocking-open`: as `blocking`, each round trip also making the file
//!   calls of one request of `smb2.bench.path-contention-shared` answered
//!   in place, in turn an open of a folder (the probe's statx, openat2,
//!   statx, a DOS attribute xattr not there) and its close: the floor
//!   of that benchmark per request.
//!
//! The figures are the floor each way of waiting sets under the engine's
//! own work: compare them within one run only.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Instant;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

const SIZE: usize = 64;
const BUFFERS: u16 = 64;
const BUF_LEN: usize = 4096;
const GROUP: u16 = 7;
const RECV: u64 = 1;
const SEND: u64 = 2;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    for pass in 0..3 {
        for way in [
            "blocking",
            "single",
            "single-timespec",
            "multishot",
            "multishot-defer",
            "compio",
            "blocking-open",
        ] {
            let (rate, user, sys) = run(way, rounds);
            println!(
                "pass {pass} {way:>16}: {rate:>7.0} round trips/s; server {user:>5.2} us user, {sys:>5.2} us system per round trip"
            );
        }
    }
}

/// Round trips per second, and the server thread's user and system
/// microseconds per round trip.
fn run(way: &'static str, rounds: usize) -> (f64, f64, f64) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = std::thread::spawn(move || {
        let (s, _) = listener.accept().expect("accept");
        s.set_nodelay(true).expect("nodelay");
        let before = thread_cpu();
        match way {
            "blocking" => blocking(s, rounds),
            "single" => single(s, rounds, false),
            "single-timespec" => single(s, rounds, true),
            "compio" => compio_runtime(s, rounds),
            "blocking-open" => blocking_open(s, rounds),
            "multishot" => multishot(s, rounds, false),
            _ => multishot(s, rounds, true),
        }
        let after = thread_cpu();
        (after.0 - before.0, after.1 - before.1)
    });
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_nodelay(true).expect("nodelay");
    let mut buf = [7u8; SIZE];
    let start = Instant::now();
    for _ in 0..rounds {
        c.write_all(&buf).expect("client write");
        c.read_exact(&mut buf).expect("client read");
    }
    let secs = start.elapsed().as_secs_f64();
    let (user, sys) = server.join().expect("server");
    let n = rounds as f64;
    (n / secs, user * 1e6 / n, sys * 1e6 / n)
}

/// The calling thread's user and system seconds.
fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

fn blocking(mut s: TcpStream, rounds: usize) {
    let mut buf = [0u8; SIZE];
    for _ in 0..rounds {
        s.read_exact(&mut buf).expect("server read");
        s.write_all(&buf).expect("server write");
    }
}

fn blocking_open(mut s: TcpStream, rounds: usize) {
    use rustix::fs::{
        openat, openat2, statx, AtFlags, Mode, OFlags, ResolveFlags, StatxFlags, CWD,
    };
    let dir = std::env::temp_dir();
    let root = openat(CWD, &dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).expect("dir");
    let mut buf = [0u8; SIZE];
    let mut open = None;
    let mut value = [0u8; 64];
    for _ in 0..rounds {
        s.read_exact(&mut buf).expect("server read");
        match open.take() {
            None => {
                let _ = statx(&root, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS);
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
                let fd =
                    openat2(&root, ".", flags, Mode::empty(), ResolveFlags::BENEATH).expect("open");
                let _ = statx(&fd, "", AtFlags::EMPTY_PATH, StatxFlags::BASIC_STATS);
                let _ = rustix::fs::fgetxattr(&fd, "user.copyless-ping", &mut value);
                open = Some(fd);
            }
            Some(fd) => drop(fd),
        }
        s.write_all(&buf).expect("server write");
    }
}

fn single(s: TcpStream, rounds: usize, timespec: bool) {
    let fd = types::Fd(s.as_raw_fd());
    let mut ring = IoUring::new(64).expect("ring");
    let mut inbuf = [0u8; BUF_LEN];
    let outbuf = [7u8; SIZE];
    let recv = |inbuf: &mut [u8]| {
        opcode::Recv::new(fd, inbuf.as_mut_ptr(), inbuf.len() as u32)
            .build()
            .user_data(RECV)
    };
    push(&mut ring, &recv(&mut inbuf));
    let mut answered = 0;
    let ts = types::Timespec::new().sec(60);
    let args = types::SubmitArgs::new().timespec(&ts);
    while answered < rounds {
        if timespec {
            ring.submitter().submit_with_args(1, &args).expect("enter");
        } else {
            ring.submit_and_wait(1).expect("enter");
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (what, res) in done {
            if what != RECV {
                continue;
            }
            assert_eq!(res, SIZE as i32, "a round trip's bytes arrive at once");
            push(&mut ring, &reply(fd, &outbuf));
            answered += 1;
            if answered < rounds {
                push(&mut ring, &recv(&mut inbuf));
            }
        }
    }
    ring.submit().expect("last send");
}

fn multishot(s: TcpStream, rounds: usize, defer: bool) {
    let fd = types::Fd(s.as_raw_fd());
    let mut builder = IoUring::builder();
    if defer {
        builder.setup_single_issuer().setup_defer_taskrun();
    }
    let mut ring = builder.build(64).expect("ring");
    let pool = BufRing::new(&ring);
    let outbuf = [7u8; SIZE];
    let recv = opcode::RecvMulti::new(fd, GROUP).build().user_data(RECV);
    push(&mut ring, &recv);
    let mut answered = 0;
    while answered < rounds {
        ring.submit_and_wait(1).expect("enter");
        let done: Vec<(u64, i32, u32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result(), c.flags()))
            .collect();
        for (what, res, flags) in done {
            if what != RECV {
                continue;
            }
            assert_eq!(res, SIZE as i32, "a round trip's bytes arrive at once");
            let id = cqueue::buffer_select(flags).expect("a provided buffer");
            pool.give_back(id);
            if !cqueue::more(flags) {
                push(&mut ring, &recv);
            }
            push(&mut ring, &reply(fd, &outbuf));
            answered += 1;
        }
    }
    ring.submit().expect("last send");
    drop(ring);
    drop(pool);
}

fn compio_runtime(s: TcpStream, rounds: usize) {
    use compio::buf::BufResult;
    use compio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = compio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let mut s = compio::net::TcpStream::from_std(s).expect("stream");
        let mut buf = vec![0u8; SIZE];
        for _ in 0..rounds {
            let BufResult(r, b) = s.read_exact(buf).await;
            r.expect("server read");
            let BufResult(r, b) = s.write_all(b).await;
            r.expect("server write");
            buf = b;
        }
    });
}

/// The reply's SEND: its success posts no completion, so the wait that
/// submits it goes on to the next request.
fn reply(fd: types::Fd, outbuf: &[u8; SIZE]) -> squeue::Entry {
    opcode::Send::new(fd, outbuf.as_ptr(), SIZE as u32)
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(SEND)
}

fn push(ring: &mut IoUring, entry: &squeue::Entry) {
    // SAFETY: every buffer an entry points to outlives the ring's use of
    // it: each lives until the function that owns the ring returns.
    unsafe { ring.submission().push(entry).expect("queue has room") };
}

/// A ring of provided buffers the kernel receives into.
struct BufRing {
    entries: *mut types::BufRingEntry,
    ring_len: usize,
    data: Vec<u8>,
    tail: std::cell::Cell<u16>,
}

impl BufRing {
    fn new(ring: &IoUring) -> BufRing {
        let ring_len = BUFFERS as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping, checked before use.
        let entries = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        assert_ne!(entries, libc::MAP_FAILED, "mmap");
        let pool = BufRing {
            entries: entries.cast(),
            ring_len,
            data: vec![0; BUFFERS as usize * BUF_LEN],
            tail: std::cell::Cell::new(0),
        };
        // SAFETY: the mapping is page aligned and outlives the ring (the
        // ring is dropped first by every caller).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, BUFFERS, GROUP, 0)
                .expect("register buffer ring");
        }
        for id in 0..BUFFERS {
            pool.give_back(id);
        }
        pool
    }

    /// Hands buffer `id` to the kernel again.
    fn give_back(&self, id: u16) {
        let tail = self.tail.get();
        let i = (tail & (BUFFERS - 1)) as usize;
        // SAFETY: `i` is below BUFFERS, the ring's length; the data buffer
        // is BUF_LEN bytes at id * BUF_LEN, inside `data`.
        unsafe {
            let e = &mut *self.entries.add(i);
            e.set_addr(self.data.as_ptr().add(id as usize * BUF_LEN) as u64);
            e.set_len(BUF_LEN as u32);
            e.set_bid(id);
            let tail_ptr = types::BufRingEntry::tail(self.entries);
            let next = tail.wrapping_add(1);
            std::sync::atomic::AtomicU16::from_ptr(tail_ptr as *mut u16)
                .store(next, std::sync::atomic::Ordering::Release);
        }
        self.tail.set(tail.wrapping_add(1));
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer registered.
        unsafe { libc::munmap(self.entries.cast(), self.ring_len) };
    }
}
