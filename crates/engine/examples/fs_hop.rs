//! What a metadata request's filesystem work costs where it is done.
//!
//!     cargo run --release -p copyless-engine --example fs_hop [FOLDER]
//!
//! Times, one at a time (depth 1, as a client waiting for each reply),
//! the system calls the POSIX VFS makes to open an existing folder for a
//! CREATE (openat2 with RESOLVE_BENEATH, statx, two fgetxattr for the DOS
//! attributes and birth time, close) done four ways:
//!
//! - inline, on the calling thread (the thread engine; also a ring thread
//!   that would do it itself);
//! - on a worker thread, the caller waiting in io_uring for an eventfd
//!   the worker writes (how the io_uring engine's blocking pool answers);
//! - on compio's blocking pool, awaited by a task (the io_uring engine's
//!   pool itself);
//! - as io_uring operations: OPENAT2, then STATX and both FGETXATTR linked,
//!   then CLOSE (the kernel runs STATX and the xattr operations on its own
//!   io-wq workers);
//! - OPENAT2 on the ring, the rest inline.
//!
//! FOLDER defaults to /dev/shm. Prints the median and 90th percentile of
//! each way, per round.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

use io_uring::{opcode, squeue, types, IoUring};

const TIMES: usize = 20_000;
const ROUNDS: usize = 3;
const DOS: &CStr = c"user.copyless.dosattrib";
const BTIME: &CStr = c"user.copyless.btime";
const RESOLVE_BENEATH: u64 = 0x08;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;

fn how() -> types::OpenHow {
    types::OpenHow::new()
        .flags((libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY) as u64)
        .resolve(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
}

/// statx and the two attribute reads, on an open descriptor.
fn facts(fd: RawFd) {
    let mut buf = [0u8; 8];
    // SAFETY: every pointer is to a live local of the size passed.
    unsafe {
        let mut stx: libc::statx = std::mem::zeroed();
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_ALL,
            &mut stx,
        );
        libc::fgetxattr(fd, DOS.as_ptr(), buf.as_mut_ptr().cast(), 4);
        libc::fgetxattr(fd, BTIME.as_ptr(), buf.as_mut_ptr().cast(), 8);
    }
}

fn inline(dir: RawFd) {
    // SAFETY: open_how is plain data; the path is a live C string.
    let fd = unsafe {
        let mut how: libc::open_how = std::mem::zeroed();
        how.flags = (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY) as u64;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
        libc::syscall(
            libc::SYS_openat2,
            dir,
            c".".as_ptr(),
            &how,
            std::mem::size_of::<libc::open_how>(),
        ) as RawFd
    };
    assert!(fd >= 0, "openat2: {}", std::io::Error::last_os_error());
    facts(fd);
    // SAFETY: fd was just opened here and is closed once.
    unsafe { libc::close(fd) };
}

/// Waits for the one completion submitted, and returns its result.
fn one(ring: &mut IoUring, sqe: squeue::Entry) -> i32 {
    // SAFETY: what the entry points to outlives the wait below.
    unsafe { ring.submission().push(&sqe).expect("queue full") };
    ring.submit_and_wait(1).expect("io_uring_enter");
    ring.completion().next().expect("a completion").result()
}

fn percentiles(mut ns: Vec<u64>) -> String {
    ns.sort_unstable();
    let at = |q: usize| ns[ns.len() * q / 100] as f64 / 1000.0;
    format!("p50 {:5.1} us  p90 {:5.1} us", at(50), at(90))
}

fn timed(mut f: impl FnMut()) -> String {
    let ns = (0..TIMES)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as u64
        })
        .collect();
    percentiles(ns)
}

fn main() {
    let folder = std::env::args().nth(1).unwrap_or_else(|| "/dev/shm".into());
    let path = CString::new(folder.clone()).expect("a path without NUL");
    // SAFETY: a live C string; the descriptor is owned below.
    let dir = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    assert!(dir >= 0, "{folder}: {}", std::io::Error::last_os_error());
    // SAFETY: just opened, owned only here.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    let dir = dir.as_raw_fd();
    let mut ring = IoUring::new(64).expect("io_uring");
    println!("{TIMES} opens of {folder}, one at a time");
    for round in 1..=ROUNDS {
        println!(
            "round {round} inline:                 {}",
            timed(|| inline(dir))
        );

        let (go, work) = std::sync::mpsc::channel::<()>();
        // SAFETY: plain system call; the descriptor is closed below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        let worker = std::thread::spawn(move || {
            while work.recv().is_ok() {
                inline(dir);
                let one: u64 = 1;
                // SAFETY: writes 8 bytes from a live u64.
                unsafe { libc::write(efd, (&one as *const u64).cast(), 8) };
            }
        });
        let mut count = [0u8; 8];
        let pool = timed(|| {
            let read = opcode::Read::new(types::Fd(efd), count.as_mut_ptr(), 8).build();
            go.send(()).expect("worker alive");
            assert_eq!(one(&mut ring, read), 8);
        });
        drop(go);
        worker.join().expect("worker");
        // SAFETY: made above, closed once.
        unsafe { libc::close(efd) };
        println!("round {round} worker thread, eventfd: {pool}");

        let rt = compio::runtime::Runtime::new().expect("a compio runtime");
        let compio_pool = rt.block_on(async {
            let mut ns = Vec::with_capacity(TIMES);
            for _ in 0..TIMES {
                let start = Instant::now();
                compio::runtime::spawn_blocking(move || inline(dir))
                    .await
                    .expect("no panic");
                ns.push(start.elapsed().as_nanos() as u64);
            }
            percentiles(ns)
        });
        println!("round {round} compio's blocking pool: {compio_pool}");

        let how = how();
        let ring_ops = timed(|| {
            let fd = one(
                &mut ring,
                opcode::OpenAt2::new(types::Fd(dir), c".".as_ptr(), &how).build(),
            );
            assert!(fd >= 0, "OPENAT2: {fd}");
            // SAFETY: a zeroed statx is valid; the buffers live until the
            // three completions are reaped below.
            let mut stx: libc::statx = unsafe { std::mem::zeroed() };
            let mut a = [0u8; 4];
            let mut b = [0u8; 8];
            let link = squeue::Flags::IO_LINK;
            let chain = [
                opcode::Statx::new(
                    types::Fd(fd),
                    c"".as_ptr(),
                    (&mut stx as *mut libc::statx).cast(),
                )
                .flags(libc::AT_EMPTY_PATH)
                .mask(libc::STATX_ALL)
                .build()
                .flags(link),
                opcode::FGetXattr::new(types::Fd(fd), DOS.as_ptr(), a.as_mut_ptr().cast(), 4)
                    .build()
                    .flags(link),
                opcode::FGetXattr::new(types::Fd(fd), BTIME.as_ptr(), b.as_mut_ptr().cast(), 8)
                    .build(),
            ];
            // SAFETY: as above, the buffers outlive the wait.
            unsafe { ring.submission().push_multiple(&chain).expect("queue full") };
            ring.submit_and_wait(3).expect("io_uring_enter");
            assert_eq!(ring.completion().count(), 3);
            one(&mut ring, opcode::Close::new(types::Fd(fd)).build());
        });
        println!("round {round} io_uring operations:    {ring_ops}");

        let ring_open = timed(|| {
            let fd = one(
                &mut ring,
                opcode::OpenAt2::new(types::Fd(dir), c".".as_ptr(), &how).build(),
            );
            assert!(fd >= 0, "OPENAT2: {fd}");
            facts(fd);
            // SAFETY: opened above, closed once.
            unsafe { libc::close(fd) };
        });
        println!("round {round} OPENAT2, rest inline:   {ring_open}");
    }
}
