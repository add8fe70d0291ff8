//! Data intents carried out as ring operations: reads land straight in
//! the reply's buffer, writes go from the received frame, syncs are
//! fdatasync. Data in memory (tmpfs) is written, and read in small
//! pieces, at once instead. Handles whose data only the VFS can reach
//! (alternate data streams) go to the blocking pool.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::rc::Rc;

use super::aside::{self, Pipe};
use super::held::Frame;
use compio::buf::{BufResult, IntoInner, IoBuf};
use compio::driver::op::{ReadAt, Sync, WriteAt};
use copyless_core::{Completion, DataFile, Intent, Op, Token, WriteData};
use copyless_trace::{clock, Scope};
use copyless_vfs::posix::data_error;
use copyless_vfs::{VfsError, VfsResult};
use futures_channel::oneshot;

/// A handle whose data is its descriptor (checked before it is made).
#[derive(Clone)]
struct DataFd(DataFile);

impl AsFd for DataFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.data_fd().expect("checked when made")
    }
}

/// The bytes of a write: part of the received frame, or the core's own.
enum WriteBuf {
    Frame(Rc<Frame>, std::ops::Range<usize>),
    Owned(Vec<u8>),
}

impl IoBuf for WriteBuf {
    fn as_init(&self) -> &[u8] {
        match self {
            WriteBuf::Frame(f, r) => &f[r.clone()],
            WriteBuf::Owned(v) => v,
        }
    }
}

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

/// Performs `intent`, or stops it when `stop` fires first (the ring
/// cancels an operation under way); `frame` is the received frame it came
/// from. Data moved on the ring is counted for the connection `scope`
/// names, when tracing (the VFS counts what it moves itself).
pub async fn perform(
    intent: Intent,
    frame: Rc<Frame>,
    scope: Option<Scope>,
    stop: oneshot::Receiver<()>,
) -> Done {
    let start = clock::now();
    let token = intent.token;
    // Only what has no effect when cut short is stopped: a write the
    // kernel may already have begun runs to its end, and its reply says
    // what happened.
    let stopped = match &intent.op {
        Op::Read { .. } => Completion::Read(Vec::new(), Err(VfsError::Cancelled)),
        Op::Flush => Completion::Flush(Err(VfsError::Cancelled)),
        Op::Write { .. } => return carry_out(intent, frame, scope, start).await,
    };
    // A dropped sender (the connection ended) is no request to stop.
    let stop = async {
        if stop.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let work = std::pin::pin!(carry_out(intent, frame, scope, start));
    match futures_util::future::select(work, std::pin::pin!(stop)).await {
        futures_util::future::Either::Left((done, _)) => done,
        futures_util::future::Either::Right(((), _)) => Done {
            token,
            completion: stopped,
            ns: clock::nanos(start, clock::now()),
            aside: None,
        },
    }
}

async fn carry_out(intent: Intent, frame: Rc<Frame>, scope: Option<Scope>, start: u64) -> Done {
    let token = intent.token;
    if intent.file.data_fd().is_none() {
        return Done {
            token,
            completion: through_vfs(intent, &frame, scope).await,
            ns: clock::nanos(start, clock::now()),
            aside: None,
        };
    }
    // Small copies from and to memory were made at once (`at_once`);
    // large ones come here.
    let in_memory = intent.file.vfs.data_in_memory();
    let fd = DataFd(intent.file);
    let mut aside = None;
    let (completion, moved) = match intent.op {
        Op::Read {
            offset,
            len,
            buf,
            bare,
        } => {
            let pipe = (bare && aside::fits(offset, len))
                .then(Pipe::take)
                .flatten();
            let filled = match pipe {
                Some(pipe) => {
                    let r = pipe.fill(&fd, offset, len).await;
                    match r {
                        Ok(0) => pipe.give_back(),
                        Ok(_) => aside = Some(pipe),
                        // What a failed splice left in the pipe goes with
                        // it.
                        Err(_) => drop(pipe),
                    }
                    Some(r)
                }
                None => None,
            };
            match filled {
                Some(r)
                    if !r
                        .as_ref()
                        .is_err_and(|e| e.kind() == io::ErrorKind::WouldBlock) =>
                {
                    let n = *r.as_ref().unwrap_or(&0);
                    let r = r.map_err(data_error);
                    (Completion::ReadAside(buf, r), Some((false, n)))
                }
                _ => {
                    let before = buf.len();
                    // A large read from memory stays a ring operation:
                    // its worker thread copies while this one sends (1 MiB
                    // at depth 32 ran at 1,775 MB/s so, 1,570 read at once).
                    let (buf, r) = read(&fd, offset, len, buf).await;
                    let n = buf.len() - before;
                    (Completion::Read(buf, r), Some((false, n)))
                }
            }
        }
        Op::Write { offset, data, sync } => {
            let n = data.len();
            let buf = match data {
                WriteData::Frame(r) => WriteBuf::Frame(frame, r),
                WriteData::Owned(v) => WriteBuf::Owned(v),
            };
            let mut r = write(&fd, offset, buf).await;
            // Memory has nothing to make durable.
            if r.is_ok() && sync && !in_memory {
                r = fdatasync(&fd).await;
            }
            let moved = r.is_ok().then_some((true, n));
            (Completion::Write(r), moved)
        }
        Op::Flush => (Completion::Flush(fdatasync(&fd).await), None),
    };
    let ns = clock::nanos(start, clock::now());
    if let (Some(scope), Some((write, n))) = (scope, moved) {
        scope.run(|| fd.0.vfs.data_done(write, n as u64, ns));
    }
    Done {
        token,
        completion,
        ns,
        aside,
    }
}

/// Only the VFS can reach this data, and it blocks: the pool does it.
async fn through_vfs(intent: Intent, frame: &[u8], scope: Option<Scope>) -> Completion {
    let Intent { token, file, op } = intent;
    let op = match op {
        Op::Write { offset, data, sync } => Op::Write {
            offset,
            data: WriteData::Owned(data.bytes(frame).to_vec()),
            sync,
        },
        op => op,
    };
    let intent = Intent { token, file, op };
    let blocking = move || match scope {
        Some(scope) => scope.run(|| intent.perform(&[])).0 .1,
        None => intent.perform(&[]).1,
    };
    match compio::runtime::spawn_blocking(blocking).await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(Box::new(e.to_string())),
    }
}

/// Appends up to `len` bytes at `offset` to `buf`, fewer only at end of
/// file.
async fn read(fd: &DataFd, offset: u64, len: usize, mut buf: Vec<u8>) -> (Vec<u8>, VfsResult<()>) {
    let start = buf.len();
    let end = start + len;
    buf.reserve_exact(len);
    while buf.len() < end {
        let filled = buf.len();
        let at = offset + (filled - start) as u64;
        let op = ReadAt::new(fd.clone(), at, buf.slice(filled..end));
        let BufResult(r, op) = compio::runtime::submit(op).await;
        buf = op.into_inner().into_inner();
        match r {
            Ok(0) => break,
            Ok(n) => {
                // SAFETY: the kernel reported `n` bytes read into the
                // slice `filled..end`, which lies within the capacity
                // reserved above; they are initialised now.
                unsafe { buf.set_len(filled + n.min(end - filled)) };
            }
            Err(e) => return (buf, Err(data_error(e))),
        }
    }
    (buf, Ok(()))
}

/// As [`read`], by plain system calls that wait for nothing but the copy.
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

/// As [`write`], by plain system calls that wait for nothing but the copy.
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

async fn write(fd: &DataFd, offset: u64, mut buf: WriteBuf) -> VfsResult<()> {
    let len = buf.as_init().len();
    let mut done = 0;
    while done < len {
        let op = WriteAt::new(fd.clone(), offset + done as u64, buf.slice(done..));
        let BufResult(r, op) = compio::runtime::submit(op).await;
        buf = op.into_inner().into_inner();
        match r {
            Ok(0) => return Err(data_error(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) => return Err(data_error(e)),
        }
    }
    Ok(())
}

async fn fdatasync(fd: &DataFd) -> VfsResult<()> {
    let BufResult(r, _) = compio::runtime::submit(Sync::new(fd.clone(), true)).await;
    r.map(|_| ()).map_err(data_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_in_memory_is_read_behind_the_head_and_short_at_the_end() {
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
