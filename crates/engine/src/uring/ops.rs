//! A ring and the operations under way on it, with no runtime between
//! them and the loop that drives them (see `examples/lean_ring`: a loop so
//! made costs what a thread per connection costs, where one on compio
//! cost 7-18 us per request more).
//!
//! Each operation's slot keeps what the kernel reads or writes while it
//! runs (buffers, iovec arrays) and the descriptor it works on, so that
//! nothing the kernel points into moves or goes before its completion is
//! reaped. This is the one place that hands the kernel pointers.

use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::recv_pool::{self, RecvPool};

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("this kernel's io_uring lacks {what}"),
    )
}

/// A descriptor an operation works on, kept open while it runs.
pub(crate) type Fd = Arc<dyn AsRawFd + Send + Sync>;

/// An operation under way, by its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key(usize);

/// What an operation's slot keeps until its completion, handed back
/// with it. Some of it is only held, never read: the kernel points into
/// it, or works on it, until then.
#[derive(Default)]
#[allow(dead_code)]
pub(crate) enum Kept {
    #[default]
    Nothing,
    /// The buffers a send sends, in order, the iovecs that point into
    /// them, and the message header that points to those.
    Vectored(Vec<Vec<u8>>, Vec<libc::iovec>, Box<libc::msghdr>),
    /// An eight-byte counter (an eventfd's).
    Counter(Box<[u8; 8]>),
    /// A buffer read into behind its length: the bytes read are counted
    /// into its length when the read completes.
    Filling(Vec<u8>),
    /// Bytes others hold too (a received frame a write sends from).
    Shared(Rc<dyn AsRef<[u8]>>),
    /// A second descriptor the operation works on (a splice's pipe).
    Fd(Fd),
}

/// A completion, with what its operation kept.
pub(crate) struct Done<T> {
    pub tag: T,
    /// What the kernel answered: bytes moved, or a negated errno.
    pub result: i32,
    pub kept: Kept,
    /// The receive pool's buffer the bytes are in (see [`Ops::recv_pooled`]).
    pub buffer: Option<u16>,
}

struct Slot<T> {
    tag: T,
    kept: Kept,
    _fd: Option<Fd>,
}

pub(crate) struct Ops<T> {
    // Dropped before the pool: the ring's end ends the pool's registration.
    ring: IoUring,
    pool: Option<RecvPool>,
    slots: Vec<Option<Slot<T>>>,
    free: Vec<usize>,
    under_way: usize,
}

// SAFETY (every `unsafe` push below): an entry's pointers point into the
// heap memory of what its slot keeps (a Vec's buffer, a boxed counter, an
// iovec array), which is neither moved nor freed until the completion of
// that entry is reaped by `reap`, which alone empties the slot; the
// descriptor it names is kept open by the slot's `Fd` as long.
impl<T> Ops<T> {
    /// A ring of `entries` entries whose completions wait for the loop's
    /// next system call: COOP_TASKRUN (5.19), else a plain ring.
    pub fn new(entries: u32) -> io::Result<Ops<T>> {
        // By default the kernel interrupts a loop running in user space
        // (an inter-processor interrupt, a VM exit in a guest) to finish
        // each receive or wake-up that completes meanwhile. The loop makes
        // a system call at least every turn and at every look (see
        // `look`), so nothing is gained by interrupting it: without the
        // interrupts echo went from 23,748 to 31,044 a second, contended
        // opens from 36,188 to 44,570 (docs/PERFORMANCE.md, session 21).
        let ring = match IoUring::builder()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(entries)
        {
            Ok(ring) => ring,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries)?,
            Err(e) => return Err(e),
        };
        Ok(Ops {
            ring,
            pool: None,
            slots: Vec::new(),
            free: Vec::new(),
            under_way: 0,
        })
    }

    /// Whether this kernel's io_uring has every operation and feature the
    /// engine uses: waits bounded by a timeout (5.11) and the operations
    /// of [`Ops`] (splice, the newest, 5.7). A kernel that sets up rings
    /// but lacks one would fail connections later; refused here, the
    /// engine is not started and `auto` picks threads. (The receive pool,
    /// 5.19, is optional: see `with_recv_pool`.)
    pub fn check_kernel(&self) -> io::Result<()> {
        if !self.ring.params().is_feature_ext_arg() {
            return Err(unsupported("waits bounded by a timeout (Linux 5.11)"));
        }
        let mut probe = io_uring::Probe::new();
        self.ring.submitter().register_probe(&mut probe)?;
        let needed = [
            (opcode::Read::CODE, "READ"),
            (opcode::Write::CODE, "WRITE"),
            (opcode::Recv::CODE, "RECV"),
            (opcode::SendMsg::CODE, "SENDMSG"),
            (opcode::Accept::CODE, "ACCEPT"),
            (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
            (opcode::Fsync::CODE, "FSYNC"),
            (opcode::PollAdd::CODE, "POLL_ADD"),
            (opcode::Splice::CODE, "SPLICE"),
        ];
        match needed.iter().find(|(code, _)| !probe.is_supported(*code)) {
            Some((_, name)) => Err(unsupported(&format!("the {name} operation"))),
            None => Ok(()),
        }
    }

    /// Registers a pool of `count` (a power of two) receive buffers of
    /// `len` bytes.
    pub fn with_recv_pool(mut self, count: u16, len: usize) -> io::Result<Ops<T>> {
        self.pool = Some(RecvPool::register(&self.ring, count, len)?);
        Ok(self)
    }

    /// The receive pool, when there is one.
    pub fn recv_pool(&mut self) -> Option<&mut RecvPool> {
        self.pool.as_mut()
    }

    /// Receives into a buffer the kernel takes from the receive pool when
    /// bytes arrive ([`Done::buffer`]); ENOBUFS when the pool has none.
    pub fn recv_pooled(&mut self, fd: Fd, tag: T) -> io::Result<Key> {
        let len = match &self.pool {
            Some(p) => p.buffer_len(),
            None => return Err(io::ErrorKind::Unsupported.into()),
        };
        let entry = opcode::Recv::new(types::Fd(fd.as_raw_fd()), std::ptr::null_mut(), len as u32)
            .buf_group(recv_pool::GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        self.push(entry, tag, Kept::Nothing, Some(fd))
    }

    /// Operations submitted or queued whose completions are not reaped.
    #[cfg(test)]
    pub fn under_way(&self) -> usize {
        self.under_way
    }

    fn slot(&mut self, slot: Slot<T>) -> usize {
        self.under_way += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(slot);
                i
            }
            None => {
                self.slots.push(Some(slot));
                self.slots.len() - 1
            }
        }
    }

    /// Queues `entry` for slot `i`, submitting what is queued first when
    /// the queue is full.
    fn queue(&mut self, entry: squeue::Entry, i: usize) -> io::Result<Key> {
        let entry = entry.user_data(i as u64);
        loop {
            // SAFETY: see the impl's note.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(Key(i));
            }
            if let Err(e) = self.ring.submit() {
                self.slots[i] = None;
                self.free.push(i);
                self.under_way -= 1;
                return Err(e);
            }
        }
    }

    /// Queues `entry` in a new slot that keeps `kept` and `fd` until its
    /// completion.
    fn push(
        &mut self,
        entry: squeue::Entry,
        tag: T,
        kept: Kept,
        fd: Option<Fd>,
    ) -> io::Result<Key> {
        let i = self.slot(Slot { tag, kept, _fd: fd });
        self.queue(entry, i)
    }

    /// Receives up to `len` bytes into `buf`, behind what it holds.
    pub fn recv(&mut self, fd: Fd, buf: Vec<u8>, len: usize, tag: T) -> io::Result<Key> {
        self.recv_flags(fd, buf, len, 0, tag)
    }

    /// Receives `len` bytes into `buf`, behind what it holds, in one
    /// completion (MSG_WAITALL): the kernel goes on receiving as the bytes
    /// come, in the loop's own waits, where each part received would
    /// otherwise complete on its own and cost the loop a turn and a system
    /// call. Fewer only when the socket fails or the client closes it.
    pub fn recv_all(&mut self, fd: Fd, buf: Vec<u8>, len: usize, tag: T) -> io::Result<Key> {
        self.recv_flags(fd, buf, len, libc::MSG_WAITALL, tag)
    }

    fn recv_flags(
        &mut self,
        fd: Fd,
        mut buf: Vec<u8>,
        len: usize,
        flags: i32,
        tag: T,
    ) -> io::Result<Key> {
        let room = spare_room(&mut buf, len);
        let entry = opcode::Recv::new(types::Fd(fd.as_raw_fd()), room, len as u32)
            .flags(flags)
            .build();
        self.push(entry, tag, Kept::Filling(buf), Some(fd))
    }

    /// Sends `bufs` on a socket, in order, skipping the first `skip`
    /// bytes of the first; it completes with fewer bytes only when the
    /// socket fails or is shut down.
    pub fn send(&mut self, fd: Fd, bufs: Vec<Vec<u8>>, skip: usize, tag: T) -> io::Result<Key> {
        let iovecs: Vec<libc::iovec> = bufs
            .iter()
            .enumerate()
            .map(|(n, b)| {
                let b = if n == 0 {
                    &b[skip.min(b.len())..]
                } else {
                    &b[..]
                };
                libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                }
            })
            .collect();
        // SAFETY: msghdr is plain data; all zeros is an empty message.
        let mut msg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        msg.msg_iov = iovecs.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = iovecs.len();
        // MSG_WAITALL: the kernel goes on sending as the socket drains,
        // instead of completing with a part.
        let entry = opcode::SendMsg::new(types::Fd(fd.as_raw_fd()), &*msg)
            .flags((libc::MSG_WAITALL | libc::MSG_NOSIGNAL) as u32)
            .build();
        self.push(entry, tag, Kept::Vectored(bufs, iovecs, msg), Some(fd))
    }

    /// Reads up to `len` bytes at `offset` of a file into `buf`, behind
    /// what it holds.
    pub fn read_at(
        &mut self,
        fd: Fd,
        offset: u64,
        mut buf: Vec<u8>,
        len: usize,
        tag: T,
    ) -> io::Result<Key> {
        let room = spare_room(&mut buf, len);
        let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), room, len as u32)
            .offset(offset)
            .build();
        self.push(entry, tag, Kept::Filling(buf), Some(fd))
    }

    /// Writes `data`'s bytes `range` at `offset` of a file, without
    /// copying them.
    pub fn write_shared(
        &mut self,
        fd: Fd,
        offset: u64,
        data: Rc<dyn AsRef<[u8]>>,
        range: Range<usize>,
        tag: T,
    ) -> io::Result<Key> {
        let bytes = &(*data).as_ref()[range];
        let entry = opcode::Write::new(
            types::Fd(fd.as_raw_fd()),
            bytes.as_ptr(),
            bytes.len() as u32,
        )
        .offset(offset)
        .build();
        self.push(entry, tag, Kept::Shared(data), Some(fd))
    }

    /// Moves up to `len` bytes of a file at `offset` into a pipe, never
    /// waiting for room in the pipe: EAGAIN when it is full.
    pub fn splice_in(
        &mut self,
        file: Fd,
        offset: u64,
        pipe: Fd,
        len: usize,
        tag: T,
    ) -> io::Result<Key> {
        let offset = i64::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let len = u32::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
        let entry = opcode::Splice::new(
            types::Fd(file.as_raw_fd()),
            offset,
            types::Fd(pipe.as_raw_fd()),
            -1,
            len,
        )
        .flags(libc::SPLICE_F_NONBLOCK)
        .build();
        self.push(entry, tag, Kept::Fd(pipe), Some(file))
    }

    /// Completes once `fd` has room to write (or has failed): the result
    /// is the poll's event mask.
    pub fn poll_writable(&mut self, fd: Fd, tag: T) -> io::Result<Key> {
        let entry = opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), libc::POLLOUT as u32).build();
        self.push(entry, tag, Kept::Nothing, Some(fd))
    }

    /// fdatasync.
    pub fn fdatasync(&mut self, fd: Fd, tag: T) -> io::Result<Key> {
        let entry = opcode::Fsync::new(types::Fd(fd.as_raw_fd()))
            .flags(types::FsyncFlags::DATASYNC)
            .build();
        self.push(entry, tag, Kept::Nothing, Some(fd))
    }

    /// Accepts a connection on a listening socket: the completion's
    /// result is the new descriptor, which the caller then owns.
    pub fn accept(&mut self, fd: Fd, tag: T) -> io::Result<Key> {
        let entry = opcode::Accept::new(
            types::Fd(fd.as_raw_fd()),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
        .flags(libc::SOCK_CLOEXEC)
        .build();
        self.push(entry, tag, Kept::Nothing, Some(fd))
    }

    /// Reads an eventfd's counter.
    pub fn read_counter(&mut self, fd: Fd, tag: T) -> io::Result<Key> {
        let mut counter = Box::new([0u8; 8]);
        let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), counter.as_mut_ptr(), 8).build();
        self.push(entry, tag, Kept::Counter(counter), Some(fd))
    }

    /// Asks the kernel to stop the operation `key`: it completes with
    /// ECANCELED if it had not begun, as it would have otherwise. The
    /// request's own completion is reaped as `tag`.
    pub fn cancel(&mut self, key: Key, tag: T) -> io::Result<Key> {
        let entry = opcode::AsyncCancel::new(key.0 as u64).build();
        self.push(entry, tag, Kept::Nothing, None)
    }

    /// Submits what is queued, then looks for a completion for up to
    /// `window`, yielding the core between looks: whether one came. Each
    /// yield is a system call, on whose return the kernel finishes what
    /// completed meanwhile (see `new`).
    pub fn look(&mut self, window: Duration) -> io::Result<bool> {
        if !self.ring.submission().is_empty() {
            self.ring.submit()?;
        }
        let began = std::time::Instant::now();
        loop {
            if !self.ring.completion().is_empty() {
                return Ok(true);
            }
            if began.elapsed() >= window {
                return Ok(false);
            }
            std::thread::yield_now();
        }
    }

    /// Submits what is queued and waits for at least one completion, or
    /// until `timeout` has passed (forever without).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let r = match timeout {
            None => self.ring.submit_and_wait(1),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Moves every completion there is to `into`, each with what its
    /// operation kept.
    pub fn reap(&mut self, into: &mut Vec<Done<T>>) {
        for cqe in self.ring.completion() {
            let i = cqe.user_data() as usize;
            let Some(slot) = self.slots.get_mut(i).and_then(Option::take) else {
                continue;
            };
            self.free.push(i);
            self.under_way -= 1;
            let mut kept = slot.kept;
            if let (Kept::Filling(buf), Ok(n)) = (&mut kept, usize::try_from(cqe.result())) {
                let len = buf.len() + n;
                assert!(len <= buf.capacity(), "a read within the room it was given");
                // SAFETY: the read or receive was given the spare
                // capacity behind `buf.len()` (`spare_room`), and the
                // kernel reports that it wrote its first `n` bytes, within
                // the capacity (checked).
                unsafe { buf.set_len(len) };
            }
            into.push(Done {
                tag: slot.tag,
                result: cqe.result(),
                kept,
                buffer: cqueue::buffer_select(cqe.flags()),
            });
        }
    }
}

/// Where an operation may write `len` bytes behind what `buf` holds: its
/// spare capacity, never zeroed first (1 MiB of zeroes per read was 16 %
/// of a loop's time). The kernel writes it; `reap` counts in what it
/// wrote (`Kept::Filling`).
fn spare_room(buf: &mut Vec<u8>, len: usize) -> *mut u8 {
    super::room::make_room(buf, len);
    buf.spare_capacity_mut()[..len].as_mut_ptr().cast()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    fn all<T>(ops: &mut Ops<T>, n: usize) -> Vec<Done<T>> {
        let mut done = Vec::new();
        while done.len() < n {
            ops.wait(Some(Duration::from_secs(5))).unwrap();
            ops.reap(&mut done);
        }
        done
    }

    #[test]
    fn this_kernel_has_what_the_engine_uses() {
        let ops = Ops::<()>::new(8).unwrap();
        ops.check_kernel().expect("Linux 6.x has every operation");
        let e = unsupported("the SPLICE operation");
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert_eq!(
            e.to_string(),
            "this kernel's io_uring lacks the SPLICE operation"
        );
    }

    #[test]
    fn receives_land_behind_what_the_buffer_holds_and_writes_go_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let a: Fd = Arc::new(a);
        let mut ops = Ops::new(8).unwrap();
        b.write_all(b"world").unwrap();
        ops.recv(a.clone(), b"hello ".to_vec(), 58, 'r').unwrap();
        let done = all(&mut ops, 1);
        assert_eq!((done[0].tag, done[0].result), ('r', 5));
        let Kept::Filling(buf) = &done[0].kept else {
            panic!("the buffer comes back");
        };
        assert_eq!(&buf[..], b"hello world");
        ops.send(a, vec![b"xxab".to_vec(), b"cd".to_vec()], 2, 'w')
            .unwrap();
        let done = all(&mut ops, 1);
        assert_eq!((done[0].tag, done[0].result), ('w', 4));
        let mut got = [0; 4];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"abcd");
        assert_eq!(ops.under_way(), 0);
    }

    #[test]
    fn a_file_is_written_and_read_at_offsets() {
        let file: Fd = Arc::new(tempfile::tempfile().unwrap());
        let mut ops = Ops::new(8).unwrap();
        let data: Rc<dyn AsRef<[u8]>> = Rc::new(b"--abc".to_vec());
        ops.write_shared(file.clone(), 3, data, 2..5, 1).unwrap();
        assert_eq!(all(&mut ops, 1)[0].result, 3);
        ops.fdatasync(file.clone(), 2).unwrap();
        assert_eq!(all(&mut ops, 1)[0].result, 0);
        // Four bytes asked behind two: all the file has from offset 2.
        ops.read_at(file.clone(), 2, vec![9; 2], 4, 3).unwrap();
        let done = all(&mut ops, 1);
        assert_eq!(done[0].result, 4);
        let Kept::Filling(buf) = &done[0].kept else {
            panic!("the buffer comes back");
        };
        assert_eq!(&buf[..], b"\x09\x09\0abc");
        ops.read_at(file, 5, b"h".to_vec(), 4, 4).unwrap();
        let done = all(&mut ops, 1);
        assert_eq!(done[0].result, 1, "short at the end of the file");
        let Kept::Filling(buf) = &done[0].kept else {
            panic!("the buffer comes back");
        };
        assert_eq!(&buf[..], b"hc", "only what was read counts");
    }

    #[test]
    fn a_wait_ends_at_its_timeout_and_a_receive_can_be_cancelled() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut ops = Ops::new(8).unwrap();
        let key = ops.recv(Arc::new(a), Vec::new(), 16, "recv").unwrap();
        let start = std::time::Instant::now();
        ops.wait(Some(Duration::from_millis(20))).unwrap();
        let mut done = Vec::new();
        ops.reap(&mut done);
        assert!(done.is_empty(), "nothing came");
        assert!(start.elapsed() >= Duration::from_millis(15));
        ops.cancel(key, "cancel").unwrap();
        let mut done = all(&mut ops, 2);
        done.sort_by_key(|d| d.tag);
        assert_eq!(done[0].tag, "cancel");
        assert_eq!((done[1].tag, done[1].result), ("recv", -libc::ECANCELED));
        assert_eq!(ops.under_way(), 0);
    }

    #[test]
    fn pooled_receives_take_buffers_that_come_back() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let a: Fd = Arc::new(a);
        let mut ops = Ops::new(8).unwrap().with_recv_pool(2, 16).unwrap();
        for round in 0..5u8 {
            b.write_all(&[round; 3]).unwrap();
            ops.recv_pooled(a.clone(), round).unwrap();
            let done = all(&mut ops, 1);
            assert_eq!(done[0].result, 3);
            let bid = done[0].buffer.expect("a buffer of the pool");
            let pool = ops.recv_pool().unwrap();
            assert_eq!(pool.bytes(bid, 3), [round; 3]);
            pool.give_back(bid);
        }
        // Both buffers out: the next receive finds none.
        b.write_all(b"x").unwrap();
        ops.recv_pooled(a.clone(), 9).unwrap();
        let first = all(&mut ops, 1);
        b.write_all(b"y").unwrap();
        ops.recv_pooled(a.clone(), 9).unwrap();
        let second = all(&mut ops, 1);
        b.write_all(b"z").unwrap();
        ops.recv_pooled(a, 9).unwrap();
        let third = all(&mut ops, 1);
        assert!(first[0].buffer.is_some() && second[0].buffer.is_some());
        assert_eq!(third[0].result, -libc::ENOBUFS);
    }

    #[test]
    fn a_file_is_spliced_into_a_pipe_and_a_socket_polled_for_room() {
        use std::os::fd::AsFd;
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let (read, write) = rustix::pipe::pipe().unwrap();
        let file: Fd = Arc::new(file);
        let write: Fd = Arc::new(write);
        let mut ops = Ops::new(8).unwrap();
        ops.splice_in(file.clone(), 2, write.clone(), 100, 's')
            .unwrap();
        assert_eq!(all(&mut ops, 1)[0].result, 8, "to the end of the file");
        let mut got = [0; 8];
        assert_eq!(rustix::io::read(read.as_fd(), &mut got).unwrap(), 8);
        assert_eq!(&got, b"23456789");
        assert!(ops.splice_in(file, u64::MAX, write, 1, 'x').is_err());
        let (a, _b) = UnixStream::pair().unwrap();
        ops.poll_writable(Arc::new(a), 'p').unwrap();
        let done = all(&mut ops, 1);
        assert!(done[0].result & libc::POLLOUT as i32 != 0);
        assert_eq!(ops.under_way(), 0);
    }

    #[test]
    fn an_eventfd_counter_is_read() {
        // SAFETY: a plain system call; the descriptor is owned below.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        // SAFETY: just made, owned only here.
        let bell: Fd =
            Arc::new(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(efd) });
        let mut ops = Ops::new(8).unwrap();
        ops.read_counter(bell.clone(), ()).unwrap();
        // SAFETY: writes 8 bytes from a live array.
        unsafe { libc::write(bell.as_raw_fd(), 3u64.to_ne_bytes().as_ptr().cast(), 8) };
        let done = all(&mut ops, 1);
        let Kept::Counter(c) = &done[0].kept else {
            panic!("the counter comes back");
        };
        assert_eq!(u64::from_ne_bytes(**c), 3);
    }
}
