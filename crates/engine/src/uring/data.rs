//! Data intents on data in memory (tmpfs), small enough to be carried
//! out at once on the loop's thread, and calls that wait for nothing but
//! memory. The rest are ring operations (see `conn`), or go to the pool
//! where only the VFS reaches the data.

use std::io;
use std::os::fd::BorrowedFd;

use super::aside::Pipe;
use copyless_core::{Call, CallOp, Completion, Intent, Op, Token};
use copyless_trace::{clock, Scope};
use copyless_vfs::posix::data_error;
use copyless_vfs::{Disposition, VfsResult};

/// Reads from memory of at most this many bytes are made at once.
const READ_AT_ONCE: usize = 64 * 1024;

/// Writes to memory of at most this many bytes are made at once: a copy
/// of 1 MiB holds the ring's other connections up for a few hundred
/// microseconds at most; larger ones go to a worker.
const WRITE_AT_ONCE: usize = 1024 * 1024;

/// An intent carried out, and the time it took.
pub struct Done {
    pub token: Token,
    pub completion: Completion,
    pub ns: u64,
    /// The pipe holding a read's data, for a [`Completion::ReadAside`].
    pub aside: Option<Pipe>,
}

/// Carries `intent` out here and now when its data is in memory and the
/// copy is small ([`READ_AT_ONCE`], [`WRITE_AT_ONCE`]): no ring operation,
/// no future, no turn of the loop (tmpfs takes no RWF_NOWAIT, so the ring
/// would hand the copy to a worker thread that makes it cold; see
/// `Vfs::data_in_memory`: 1 MiB writes at depth 32 to tmpfs ran at
/// 1,973 MB/s by the ring, 2,820 so). Gives the intent back otherwise.
/// `frame` is the received frame it came from.
pub fn at_once(intent: Intent, frame: &[u8], scope: Option<&Scope>) -> Result<Done, Intent> {
    let small = match &intent.op {
        Op::Read { len, .. } => *len <= READ_AT_ONCE,
        Op::Write { data, .. } => data.len() <= WRITE_AT_ONCE,
        Op::Flush => true,
    };
    let fd = intent.file.data_fd();
    if !small || !intent.file.vfs.data_in_memory() || fd.is_none() {
        return Err(intent);
    }
    let start = clock::now();
    let Intent { token, file, op } = intent;
    let fd = file.data_fd().expect("checked above");
    let (completion, moved) = match op {
        Op::Read {
            offset, len, buf, ..
        } => {
            let before = buf.len();
            let (buf, r) = read_at_once(fd, offset, len, buf);
            let n = buf.len() - before;
            (Completion::Read(buf, r), Some((false, n)))
        }
        // Memory has nothing to make durable.
        Op::Write { offset, data, .. } => {
            let r = write_at_once(fd, offset, data.bytes(frame));
            let moved = r.is_ok().then_some((true, data.len()));
            (Completion::Write(r), moved)
        }
        Op::Flush => (Completion::Flush(Ok(())), None),
    };
    let ns = clock::nanos(start, clock::now());
    if let (Some(scope), Some((write, n))) = (scope, moved) {
        scope.run(|| file.vfs.data_done(write, n as u64, ns));
    }
    Ok(Done {
        token,
        completion,
        ns,
        aside: None,
    })
}

/// Whether `call` waits for nothing but memory, and is best made at once
/// on the loop's thread, as data in memory is: on a filesystem that keeps
/// everything in memory (tmpfs, whose metadata lives there as its data
/// does), in a folder the kernel finds in its cache without leaving the
/// share's mount; on any other local filesystem, the plain open of an
/// object the kernel finds in its cache with its stored attributes
/// remembered (see `Vfs::found_without_waiting`): opening it changes and
/// reads nothing on the disk. A hop to the pool and back costs more than
/// the call (`cargo run --release -p copyless-engine --example fs_hop`).
pub fn call_at_once(call: &Call) -> bool {
    // The watcher's table may be held while its reader walks a tree; a
    // file-system control may copy gigabytes, from another share.
    if matches!(call.op, CallOp::Watch(_) | CallOp::Fsctl(_)) {
        return false;
    }
    if !call.vfs.data_in_memory() {
        return match &call.op {
            CallOp::Open(o) => {
                o.disposition == Disposition::Open && call.vfs.found_without_waiting(&o.path)
            }
            _ => false,
        };
    }
    call.op.paths().into_iter().all(|path| {
        let folder = path.rsplit_once('/').map_or("", |(folder, _)| folder);
        call.vfs.found_without_waiting(folder)
    })
}

/// Appends up to `len` bytes at `offset` to `buf`, fewer only at end of
/// file, by plain system calls that wait for nothing but the copy.
fn read_at_once(
    fd: BorrowedFd<'_>,
    offset: u64,
    len: usize,
    mut buf: Vec<u8>,
) -> (Vec<u8>, VfsResult<()>) {
    let start = buf.len();
    let end = start + len;
    buf.reserve_exact(len);
    while buf.len() < end {
        let filled = buf.len();
        let at = offset + (filled - start) as u64;
        let spare = &mut buf.spare_capacity_mut()[..end - filled];
        match rustix::io::pread(fd, spare, at).map(|(read, _)| read.len()) {
            Ok(0) => break,
            Ok(n) => {
                // SAFETY: pread initialised the first `n` bytes of the
                // spare capacity, which lie within `filled..end`.
                unsafe { buf.set_len(filled + n) };
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return (buf, Err(data_error(e.into()))),
        }
    }
    (buf, Ok(()))
}

/// Writes all of `data` at `offset`, by plain system calls that wait for
/// nothing but the copy.
fn write_at_once(fd: BorrowedFd<'_>, offset: u64, data: &[u8]) -> VfsResult<()> {
    let mut done = 0;
    while done < data.len() {
        match rustix::io::pwrite(fd, &data[done..], offset + done as u64) {
            Ok(0) => return Err(data_error(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(data_error(e.into())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_in_a_cached_folder_of_tmpfs_are_made_at_once() {
        use copyless_core::OpenCall;
        use copyless_vfs::{posix::PosixVfs, Identity, Kind, OpenRequest};
        use std::sync::Arc;
        let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let vfs: Arc<dyn copyless_vfs::Vfs> = Arc::new(PosixVfs::new(dir.path()).unwrap());
        let who = Identity::Server;
        let open = |path: &str| Call {
            token: 1,
            vfs: vfs.clone(),
            op: CallOp::Open(OpenCall::new(&OpenRequest {
                disposition: Disposition::Create,
                ..OpenRequest::look(&who, path, Kind::NonDirectory)
            })),
        };
        assert!(call_at_once(&open("new")), "in the share's root");
        let _ = std::fs::metadata(dir.path().join("sub"));
        assert!(call_at_once(&open("sub/new")));
        assert!(!call_at_once(&open("gone/new")), "a folder not there");
        let (_, done) = open("sub/new").perform();
        let Completion::Made(made) = done else {
            panic!("an open's completion: {done:?}");
        };
        assert!(matches!(
            *made,
            copyless_core::Made::Opened { opened: Ok(_), .. }
        ));
        assert!(dir.path().join("sub/new").exists());
    }

    #[test]
    fn a_plain_open_of_what_the_kernel_remembers_is_made_at_once_on_any_local_filesystem() {
        use copyless_core::OpenCall;
        use copyless_vfs::{posix::PosixVfs, Identity, Kind, OpenRequest};
        use std::sync::Arc;
        // The project's own filesystem: a disk's where the tests run
        // from one, else memory, whose rule is checked above.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::fs::write(dir.path().join("doc"), b"kept").unwrap();
        let vfs: Arc<dyn copyless_vfs::Vfs> = Arc::new(PosixVfs::new(dir.path()).unwrap());
        let who = Identity::Server;
        let call = |path: &str, disposition| Call {
            token: 1,
            vfs: vfs.clone(),
            op: CallOp::Open(OpenCall::new(&OpenRequest {
                disposition,
                ..OpenRequest::look(&who, path, Kind::NonDirectory)
            })),
        };
        // Once opened, its stored attributes are remembered.
        let (_, done) = call("doc", Disposition::Open).perform();
        assert!(matches!(done, Completion::Made(_)), "{done:?}");
        assert!(call_at_once(&call("doc", Disposition::Open)));
        assert!(
            !call_at_once(&call("gone", Disposition::Open)),
            "a name not there"
        );
        // What may make or change an object waits for the disk's journal.
        let memory = vfs.data_in_memory();
        assert_eq!(call_at_once(&call("new", Disposition::Create)), memory);
        assert_eq!(call_at_once(&call("doc", Disposition::OpenIf)), memory);
    }

    #[test]
    fn data_in_memory_is_read_behind_the_head_and_short_at_the_end() {
        use std::os::fd::AsFd;
        let file = tempfile::tempfile().expect("a file");
        write_at_once(file.as_fd(), 3, b"abcdef").expect("written");
        // Behind the reply's head; four bytes asked, four there.
        let (buf, r) = read_at_once(file.as_fd(), 4, 4, b"head".to_vec());
        assert!(r.is_ok());
        assert_eq!(buf, b"headbcde");
        // Past the end: what there is.
        let (buf, r) = read_at_once(file.as_fd(), 7, 100, Vec::new());
        assert!(r.is_ok());
        assert_eq!(buf, b"ef");
        let (buf, r) = read_at_once(file.as_fd(), 50, 10, b"h".to_vec());
        assert!(r.is_ok());
        assert_eq!(buf, b"h");
        // The hole before the first write reads as zeros.
        let (buf, _) = read_at_once(file.as_fd(), 0, 4, Vec::new());
        assert_eq!(buf, b"\0\0\0a");
    }
}
