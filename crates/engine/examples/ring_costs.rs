//! What a metadata call and a small reply cost as io_uring operations,
//! against the same work as plain system calls.
//!
//!     cargo run --release -p copyless-engine --example ring_costs [FOLDER]
//!
//! Metadata: statx, fgetxattr (of an attribute not set), renameat, and
//! openat with close, on 2,000 files of FOLDER (default /dev/shm), each
//! made directly, then as ring operations one per `io_uring_enter` (a
//! client at depth 1), then 32 per enter (a loop that gathers a turn's
//! calls). Replies: a 124-byte reply (a 4-byte frame head and its
//! message) written to a loopback TCP socket by writev, by a SENDMSG of
//! the two buffers on the ring, and by a SEND of one buffer they are
//! copied into; each ring send is submitted alone here, where the engine
//! would submit it in the `io_uring_enter` it waits in anyway, so a bare
//! system call's cost (printed last) is what that would save.
//!
//! Prints microseconds per operation, wall and CPU (the process's CPU
//! time, which counts io_uring's worker threads), and how many of those
//! workers the process has.

use std::ffi::CString;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use io_uring::{opcode, squeue, types, IoUring};

const FILES: usize = 2000;
const ROUNDS: usize = 20;
const SENDS: usize = 200_000;

/// The process's CPU time in seconds, all threads.
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after_name = stat.rsplit(')').next().unwrap_or_default();
    let f: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap_or(0.0) + f[12].parse::<f64>().unwrap_or(0.0);
    ticks / 100.0
}

/// io_uring's worker threads of this process.
fn workers() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("iou-wrk"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn report(what: &str, ops: usize, start: Instant, cpu_start: f64) {
    let wall = start.elapsed().as_secs_f64() * 1e6 / ops as f64;
    let cpu = (cpu() - cpu_start) * 1e6 / ops as f64;
    println!(
        "{what:42} {wall:7.2} us wall {cpu:7.2} us CPU   io-wq workers {}",
        workers()
    );
}

/// Submits `entries` and waits for all their completions; their results.
fn submit_all(ring: &mut IoUring, entries: &[squeue::Entry]) -> Vec<i32> {
    for e in entries {
        // SAFETY: every pointer an entry holds is to memory its caller
        // keeps alive until this function has reaped all completions.
        unsafe { ring.submission().push(e).expect("queue has room") };
    }
    ring.submit_and_wait(entries.len()).expect("io_uring_enter");
    ring.completion().map(|c| c.result()).collect()
}

/// Runs one operation per file, directly and then as ring entries in
/// batches of 1 and of 32 (each entry's result checked).
fn compare(
    what: &str,
    ring: &mut IoUring,
    direct: &mut dyn FnMut(usize),
    entry: &mut dyn FnMut(usize) -> squeue::Entry,
    check: fn(i32),
) {
    compare_batched(what, ring, direct, &mut |ring, chunk| {
        let entries: Vec<squeue::Entry> = chunk.iter().map(|&i| entry(i)).collect();
        submit_all(ring, &entries).into_iter().for_each(check);
    });
}

/// Runs `direct(i)` for every file, then `batched` over the files in
/// chunks of 1 and of 32.
fn compare_batched(
    what: &str,
    ring: &mut IoUring,
    direct: &mut dyn FnMut(usize),
    batched: &mut dyn FnMut(&mut IoUring, &[usize]),
) {
    let (start, cpu_start) = (Instant::now(), cpu());
    for _ in 0..ROUNDS {
        (0..FILES).for_each(&mut *direct);
    }
    let label = format!("{what}, system calls");
    report(&label, ROUNDS * FILES, start, cpu_start);
    let all: Vec<usize> = (0..FILES).collect();
    for batch in [1, 32] {
        let (start, cpu_start) = (Instant::now(), cpu());
        for _ in 0..ROUNDS {
            for chunk in all.chunks(batch) {
                batched(ring, chunk);
            }
        }
        let label = format!("{what}, ring, {batch} per enter");
        report(&label, ROUNDS * FILES, start, cpu_start);
    }
}

fn metadata(folder: &str) {
    let path = CString::new(folder).expect("a path");
    // SAFETY: a live C string; the descriptor is closed at the end.
    let dir: RawFd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    assert!(dir >= 0, "{folder}: {}", std::io::Error::last_os_error());
    let names: Vec<CString> = (0..FILES)
        .map(|i| CString::new(format!("ring-costs-{i}")).expect("a name"))
        .collect();
    let others: Vec<CString> = (0..FILES)
        .map(|i| CString::new(format!("ring-costs-moved-{i}")).expect("a name"))
        .collect();
    for n in &names {
        // SAFETY: a live C string; the descriptor is closed at once.
        let fd = unsafe { libc::openat(dir, n.as_ptr(), libc::O_CREAT | libc::O_WRONLY, 0o644) };
        assert!(fd >= 0, "create: {}", std::io::Error::last_os_error());
        // SAFETY: just opened here.
        unsafe { libc::close(fd) };
    }
    let mut ring = IoUring::new(64).expect("io_uring");
    // SAFETY: statx is plain data.
    let mut stx: Vec<libc::statx> = vec![unsafe { std::mem::zeroed() }; FILES];
    let stx_at = stx.as_mut_ptr();

    compare(
        "statx",
        &mut ring,
        &mut |i| {
            // SAFETY: a live name and a statx of this loop's vector.
            let r = unsafe {
                libc::statx(
                    dir,
                    names[i].as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                    libc::STATX_ALL,
                    stx_at.add(i),
                )
            };
            assert_eq!(r, 0);
        },
        &mut |i| {
            // The vector outlives every batch.
            opcode::Statx::new(
                types::Fd(dir),
                names[i].as_ptr(),
                stx_at.wrapping_add(i).cast(),
            )
            .flags(libc::AT_SYMLINK_NOFOLLOW)
            .mask(libc::STATX_ALL)
            .build()
        },
        |r| assert_eq!(r, 0),
    );

    let fds: Vec<RawFd> = names
        .iter()
        // SAFETY: live names; each descriptor is closed below.
        .map(|n| unsafe { libc::openat(dir, n.as_ptr(), libc::O_RDONLY) })
        .collect();
    let attr = c"user.ring-costs";
    let mut buf = [0u8; 16];
    let buf_at = buf.as_mut_ptr();
    compare(
        "fgetxattr (not set)",
        &mut ring,
        &mut |i| {
            // SAFETY: a live descriptor, name and buffer of its size.
            unsafe { libc::fgetxattr(fds[i], attr.as_ptr(), buf_at.cast(), 16) };
        },
        &mut |i| {
            opcode::FGetXattr::new(types::Fd(fds[i]), attr.as_ptr(), buf_at.cast(), 16).build()
        },
        |r| assert_eq!(r, -libc::ENODATA),
    );
    for fd in fds {
        // SAFETY: opened above, closed once.
        unsafe { libc::close(fd) };
    }

    // There and back: each file's name flips at each rename.
    let moved: Vec<std::cell::Cell<bool>> = (0..FILES).map(|_| Default::default()).collect();
    let name_of = |i: usize| {
        if moved[i].get() {
            &others[i]
        } else {
            &names[i]
        }
    };
    let flip = |i: usize| {
        let (from, to) = (
            name_of(i).as_ptr(),
            if moved[i].get() {
                &names[i]
            } else {
                &others[i]
            }
            .as_ptr(),
        );
        moved[i].set(!moved[i].get());
        (from, to)
    };
    compare(
        "renameat",
        &mut ring,
        &mut |i| {
            let (from, to) = flip(i);
            // SAFETY: live names.
            assert_eq!(unsafe { libc::renameat(dir, from, dir, to) }, 0);
        },
        &mut |i| {
            let (from, to) = flip(i);
            opcode::RenameAt::new(types::Fd(dir), from, types::Fd(dir), to).build()
        },
        |r| assert_eq!(r, 0),
    );

    compare_batched(
        "openat and close",
        &mut ring,
        &mut |i| {
            // SAFETY: a live name; the descriptor is closed at once.
            let fd = unsafe { libc::openat(dir, name_of(i).as_ptr(), libc::O_RDONLY) };
            assert!(fd >= 0);
            // SAFETY: just opened here.
            unsafe { libc::close(fd) };
        },
        &mut |ring, chunk| {
            let opens: Vec<squeue::Entry> = chunk
                .iter()
                .map(|&i| {
                    opcode::OpenAt::new(types::Fd(dir), name_of(i).as_ptr())
                        .flags(libc::O_RDONLY)
                        .build()
                })
                .collect();
            let closes: Vec<squeue::Entry> = submit_all(ring, &opens)
                .into_iter()
                .map(|fd| {
                    assert!(fd >= 0);
                    opcode::Close::new(types::Fd(fd)).build()
                })
                .collect();
            for r in submit_all(ring, &closes) {
                assert_eq!(r, 0);
            }
        },
    );

    for i in 0..FILES {
        // SAFETY: a live name.
        unsafe { libc::unlinkat(dir, name_of(i).as_ptr(), 0) };
    }
    // SAFETY: opened above, closed once.
    unsafe { libc::close(dir) };
}

fn replies() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let socket = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
    let (mut peer, _) = listener.accept().expect("accept");
    socket.set_nodelay(true).expect("nodelay");
    std::thread::spawn(move || {
        let mut sink = vec![0u8; 1 << 20];
        while peer.read(&mut sink).unwrap_or(0) > 0 {}
    });
    let fd = socket.as_raw_fd();
    let head = [0u8, 0, 0, 120];
    let body = [1u8; 120];
    let iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        },
    ];
    let mut ring = IoUring::new(64).expect("io_uring");
    let (start, cpu_start) = (Instant::now(), cpu());
    for _ in 0..SENDS {
        // SAFETY: the iovecs point to live arrays of their lengths.
        assert_eq!(unsafe { libc::writev(fd, iov.as_ptr(), 2) }, 124);
    }
    report("124-byte reply, writev", SENDS, start, cpu_start);
    // SAFETY: msghdr is plain data; all zeros is an empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = 2;
    let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    let (start, cpu_start) = (Instant::now(), cpu());
    for _ in 0..SENDS {
        let e = opcode::SendMsg::new(types::Fd(fd), &msg)
            .flags(flags as u32)
            .build();
        assert_eq!(submit_all(&mut ring, &[e]), [124]);
    }
    report("124-byte reply, ring SENDMSG", SENDS, start, cpu_start);
    let mut one = Vec::with_capacity(124);
    let (start, cpu_start) = (Instant::now(), cpu());
    for _ in 0..SENDS {
        one.clear();
        one.extend_from_slice(&head);
        one.extend_from_slice(&body);
        let e = opcode::Send::new(types::Fd(fd), one.as_ptr(), one.len() as u32)
            .flags(flags)
            .build();
        assert_eq!(submit_all(&mut ring, &[e]), [124]);
    }
    report("124-byte reply, copied, ring SEND", SENDS, start, cpu_start);
    let (start, cpu_start) = (Instant::now(), cpu());
    for _ in 0..SENDS {
        // SAFETY: a system call without arguments.
        assert!(unsafe { libc::syscall(libc::SYS_getppid) } > 0);
    }
    report("a bare system call (getppid)", SENDS, start, cpu_start);
}

fn main() {
    let folder = std::env::args().nth(1).unwrap_or_else(|| "/dev/shm".into());
    metadata(&folder);
    replies();
}
