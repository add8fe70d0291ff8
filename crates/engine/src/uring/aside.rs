//! Reads sent without entering the server's memory: an unsigned READ
//! alone in its frame (a "bare" read, see `copyless_core::Op::Read`) has
//! its data spliced from the file into a pipe, and from the pipe into the
//! socket right behind the reply's header. The page cache's pages travel
//! by reference; no byte is copied by the server.
//!
//! Pipes come from a small pool per worker thread: a pipe per connection
//! would cost a thousand connections their per-user pipe allowance
//! (`pipe-user-pages-soft`). When no pipe of the size needed can be had,
//! the read is copied as any other.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::io::Errno;
use rustix::pipe::{fcntl_setpipe_size, pipe_with, splice, PipeFlags, SpliceFlags};

/// Reads smaller than this are copied: two splices cost more than
/// copying a few pages.
pub const MIN: usize = 128 * 1024;

/// The capacity of each pipe: the pipe holds a whole read before its
/// reply is sent, because the reply announces its length. Beyond
/// `pipe-max-size` (1 MiB by default) a pipe needs CAP_SYS_RESOURCE.
const CAPACITY: usize = 1024 * 1024;

/// The pipe holds whole pages: a read takes one slot per page it
/// touches, so one that does not start on a page takes one more.
const PAGE: u64 = 4096;

/// Whether a read of `len` bytes at `offset` is worth sending from aside
/// and fits in a pipe.
pub fn fits(offset: u64, len: usize) -> bool {
    let pages = (offset % PAGE + len as u64).div_ceil(PAGE);
    len >= MIN && pages <= CAPACITY as u64 / PAGE
}

/// Pipes a worker has in use at most; reads beyond go the copying way.
/// Each splice runs on one of the kernel's io-wq threads: many at once
/// crowd out the splices into sockets that replies wait for.
const IN_USE: usize = 4;

/// Idle pipes a worker keeps.
const KEEP: usize = IN_USE;

/// A pipe holding (or ready to hold) one read's data; it counts as in use
/// until dropped.
pub struct Pipe {
    read: Arc<OwnedFd>,
    /// Where the file's pages go in (a splice on the ring).
    pub write: Arc<OwnedFd>,
}

/// An empty pipe kept for the next read.
struct Idle {
    read: Arc<OwnedFd>,
    write: Arc<OwnedFd>,
}

thread_local! {
    static IDLE: RefCell<Vec<Idle>> = const { RefCell::new(Vec::new()) };
    static USED: Cell<usize> = const { Cell::new(0) };
}

impl Pipe {
    /// An empty pipe of [`CAPACITY`] bytes; None when none can be made now
    /// (descriptors or the per-user pipe allowance ran out).
    pub fn take() -> Option<Pipe> {
        if USED.get() >= IN_USE {
            return None;
        }
        let Idle { read, write } = match IDLE.with(|idle| idle.borrow_mut().pop()) {
            Some(idle) => idle,
            None => {
                // A pipe is charged to the user its thread acts as
                // (pipe-user-pages-soft), and a ring thread acts as a
                // client's user after handling an open in place: the
                // pipes every client's reads share are the server's.
                copyless_vfs::posix::act_as_server().ok()?;
                let (read, write) = pipe_with(PipeFlags::CLOEXEC).ok()?;
                match fcntl_setpipe_size(&write, CAPACITY) {
                    Ok(size) if size >= CAPACITY => Idle {
                        read: Arc::new(read),
                        write: Arc::new(write),
                    },
                    _ => return None,
                }
            }
        };
        USED.set(USED.get() + 1);
        Some(Pipe { read, write })
    }

    /// Keeps an emptied pipe for the next read. A pipe that may still
    /// hold data is dropped instead, never reused.
    pub fn give_back(self) {
        IDLE.with(|idle| {
            let mut idle = idle.borrow_mut();
            if idle.len() < KEEP {
                idle.push(Idle {
                    read: self.read.clone(),
                    write: self.write.clone(),
                });
            }
        });
    }

    /// Sends up to `len` bytes the pipe holds into `socket`, which must
    /// be non-blocking: how many went, None when the socket has no room
    /// (the caller waits for it on the ring and calls again). Made here,
    /// not on the ring: the ring would hand it to a kernel thread, while
    /// the pages are in the pipe already and moving them waits for
    /// nothing but room in the socket.
    pub fn drain(&self, socket: impl AsFd, len: usize) -> io::Result<Option<usize>> {
        loop {
            match splice(&*self.read, None, &socket, None, len, SpliceFlags::NONBLOCK) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => return Ok(Some(n)),
                Err(Errno::AGAIN) => return Ok(None),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        USED.set(USED.get() - 1);
    }
}
