//! Carries letters between connections (`copyless_core::Letter`): each
//! connection has an inbox while it lives; a letter for a connection that
//! has ended is dropped, as the core expects.
//!
//! A letter is handled in the order of the client's bytes: after every
//! frame that had arrived on its connection's socket when it was posted,
//! before every frame that arrived later. Each letter carries that place
//! in the byte stream, its mark: the bytes the engine had taken from the
//! socket, and those still queued in it (FIONREAD), when it was posted.
//! So what a client does after one connection's reply sees the effect of
//! that reply on its other connections, and requests a client sent before
//! another connection changed something are in place to hear of it (two
//! CHANGE_NOTIFYs sent at once are both waiting before the renames made
//! next on another connection are reported, each to one of them).

use std::collections::HashMap;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use copyless_core::{ConnectionId, Letter, Message};
use futures_channel::mpsc;
use futures_util::StreamExt;
use rustix::event::{eventfd, EventfdFlags};

#[derive(Default)]
pub(crate) struct PostOffice {
    boxes: Mutex<HashMap<ConnectionId, Mailbox>>,
}

/// How many change reports may wait in one inbox. A connection that
/// falls further behind (its client does not read, so it cannot send)
/// loses the rest, and is told so (`Letter::changes_lost`): its watchers
/// answer STATUS_NOTIFY_ENUM_DIR, and memory stays bounded whatever the
/// other clients change meanwhile. Every other letter is one a request
/// of another client made, bounded by those requests.
const MAX_QUEUED_REPORTS: usize = 1024;

struct Mailbox {
    letters: mpsc::UnboundedSender<Posted>,
    bell: Option<Arc<OwnedFd>>,
    reports: Arc<Reports>,
    arrivals: Option<Arc<Arrivals>>,
}

/// A letter, and its mark: how many of its connection's bytes had arrived
/// when it was posted. It is handled once the frames that began before
/// the mark are.
pub(crate) struct Posted {
    pub letter: Letter,
    pub mark: u64,
}

/// What has arrived on a connection's socket: the bytes its engine has
/// taken, and the socket that holds the rest.
pub(crate) struct Arrivals {
    taken: AtomicU64,
    socket: Arc<TcpStream>,
}

impl Arrivals {
    pub fn new(socket: Arc<TcpStream>) -> Arc<Arrivals> {
        Arc::new(Arrivals {
            taken: AtomicU64::new(0),
            socket,
        })
    }

    /// The engine took `n` more bytes from the socket.
    pub fn took(&self, n: usize) {
        self.taken.fetch_add(n as u64, Ordering::Release);
    }

    /// Bytes arrived so far, never more: a mark beyond the bytes that
    /// will come would hold its letter back for good. Bytes the engine
    /// took while the queue was asked would count twice, so the question
    /// is asked again. A count that misses bytes an engine has taken but
    /// not yet counted only lets the letter go before their frames.
    fn arrived(&self) -> u64 {
        let mut taken = self.taken.load(Ordering::Acquire);
        for _ in 0..4 {
            let queued = rustix::io::ioctl_fionread(self.socket.as_fd()).unwrap_or(0);
            let after = self.taken.load(Ordering::Acquire);
            if after == taken {
                return taken + queued;
            }
            taken = after;
        }
        taken
    }
}

/// Change reports waiting in an inbox, and whether any were dropped.
#[derive(Default)]
struct Reports {
    queued: AtomicUsize,
    lost: AtomicBool,
}

/// A connection's letters, received until it is dropped.
pub(crate) struct Inbox {
    office: Arc<PostOffice>,
    id: ConnectionId,
    letters: mpsc::UnboundedReceiver<Posted>,
    bell: Option<Arc<OwnedFd>>,
    reports: Arc<Reports>,
}

impl PostOffice {
    fn boxes(&self) -> MutexGuard<'_, HashMap<ConnectionId, Mailbox>> {
        self.boxes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the inbox of connection `id`, whose letters are marked by
    /// `arrivals` (all with mark 0 without). With `bell`, each letter also
    /// makes an eventfd readable, for a thread that waits in `poll`; a
    /// task is woken through the receiver itself.
    pub fn open(
        self: &Arc<Self>,
        id: ConnectionId,
        bell: bool,
        arrivals: Option<Arc<Arrivals>>,
    ) -> io::Result<Inbox> {
        let bell = if bell {
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            Some(Arc::new(fd))
        } else {
            None
        };
        let (tx, rx) = mpsc::unbounded();
        let reports = Arc::new(Reports::default());
        self.boxes().insert(
            id,
            Mailbox {
                letters: tx,
                bell: bell.clone(),
                reports: reports.clone(),
                arrivals,
            },
        );
        Ok(Inbox {
            office: self.clone(),
            id,
            letters: rx,
            bell,
            reports,
        })
    }

    /// Delivers each letter to its connection's inbox. Each letter comes
    /// of a request another connection made (a session ended, locks given
    /// back, an oplock or lease broken, a directory changed), so a
    /// connection receives no more than the others' requests make.
    pub fn send(&self, messages: Vec<Message>) {
        if messages.is_empty() {
            return;
        }
        let boxes = self.boxes();
        for m in messages {
            let Some(mailbox) = boxes.get(&m.to) else {
                continue;
            };
            if m.letter.is_change_report() {
                let queued = mailbox.reports.queued.fetch_add(1, Ordering::AcqRel);
                if queued >= MAX_QUEUED_REPORTS {
                    mailbox.reports.queued.fetch_sub(1, Ordering::AcqRel);
                    mailbox.reports.lost.store(true, Ordering::Release);
                    continue;
                }
            }
            let mark = mailbox.arrivals.as_ref().map_or(0, |a| a.arrived());
            let posted = Posted {
                letter: m.letter,
                mark,
            };
            if mailbox.letters.unbounded_send(posted).is_ok() {
                if let Some(bell) = &mailbox.bell {
                    // A full counter is still readable: nothing is lost.
                    let _ = rustix::io::write(bell.as_fd(), &1u64.to_ne_bytes());
                }
            }
        }
    }
}

impl Inbox {
    /// The eventfd that becomes readable when a letter arrives.
    pub fn bell(&self) -> Option<BorrowedFd<'_>> {
        self.bell.as_ref().map(|b| b.as_fd())
    }

    /// Every letter that has arrived, in order. The bell is silenced
    /// first, so a letter posted meanwhile rings it again.
    pub fn take(&mut self) -> Vec<Posted> {
        if let Some(bell) = &self.bell {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(bell.as_fd(), &mut count);
        }
        let mut letters = Vec::new();
        while let Ok(posted) = self.letters.try_recv() {
            self.taken(&posted);
            letters.push(posted);
        }
        if let Some(lost) = self.lost() {
            letters.push(lost);
        }
        letters
    }

    /// The next letter, for a task: as [`Inbox::take`] gives them.
    pub fn poll_letter(&mut self, cx: &mut Context<'_>) -> Poll<Option<Posted>> {
        match self.letters.poll_next_unpin(cx) {
            Poll::Ready(Some(posted)) => {
                self.taken(&posted);
                Poll::Ready(Some(posted))
            }
            Poll::Pending => match self.lost() {
                Some(lost) => Poll::Ready(Some(lost)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    /// Word that change reports were dropped, if they were: it comes after
    /// every report still queued, and waits for no frame.
    fn lost(&self) -> Option<Posted> {
        self.reports
            .lost
            .swap(false, Ordering::AcqRel)
            .then(|| Posted {
                letter: Letter::changes_lost(),
                mark: 0,
            })
    }

    fn taken(&self, Posted { letter, .. }: &Posted) {
        if letter.is_change_report() {
            self.reports.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.office.boxes().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_proto::messages::FileId;
    use copyless_proto::status;
    use copyless_scripted::{config, memory_server, notify_request, Client, Request, Users};

    /// CHANGE_NOTIFY for FILE_NAME changes of the directory, with a
    /// 64 KiB buffer.
    fn notify(id: FileId) -> Request {
        notify_request(id, 1, false, 65536)
    }

    #[test]
    fn a_connection_that_falls_behind_loses_change_reports_and_hears_so() {
        let users = Arc::new(Users::default());
        users.add("u", "pw");
        let (server, _vfs) = memory_server(config(), users);
        let mut watcher = Client::login(server.clone(), "u", "pw");
        let mut writer = Client::login(server, "u", "pw");
        let dir = watcher.create("docs", true).unwrap();
        assert_eq!(watcher.call(notify(dir)).status(), status::PENDING);

        let office = Arc::new(PostOffice::default());
        let mut inbox = office.open(watcher.conn.id(), false, None).unwrap();
        // The watcher takes nothing while the other client makes more
        // files than its inbox holds reports of.
        for i in 0..MAX_QUEUED_REPORTS + 10 {
            let id = writer.create(&format!("docs\\{i}"), false).unwrap();
            writer.close(id);
            office.send(std::mem::take(&mut writer.posted));
        }
        let letters: Vec<Letter> = inbox.take().into_iter().map(|p| p.letter).collect();
        assert_eq!(letters.len(), MAX_QUEUED_REPORTS + 1);
        assert!(letters[..MAX_QUEUED_REPORTS]
            .iter()
            .all(|l| l.is_change_report()));
        assert!(!letters[MAX_QUEUED_REPORTS].is_change_report());

        // The waiting request hears of the first file; the next one is
        // told to list the folder again, reports having gone missing.
        let mut answered = Vec::new();
        for letter in letters {
            answered.extend(watcher.receive(letter));
        }
        assert_eq!(answered.len(), 1);
        assert_eq!(answered[0].status(), status::SUCCESS);
        assert_eq!(watcher.call(notify(dir)).status(), status::NOTIFY_ENUM_DIR);
        // Taken, the inbox holds reports again.
        writer.create("docs\\later", false).unwrap();
        office.send(std::mem::take(&mut writer.posted));
        assert_eq!(inbox.take().len(), 1);
    }

    /// A letter's mark counts the bytes the engine took and those still
    /// queued on the socket when it was posted.
    #[test]
    fn a_letter_is_marked_with_the_bytes_arrived_when_posted() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let server = Arc::new(listener.accept().unwrap().0);
        let users = Arc::new(Users::default());
        users.add("u", "pw");
        let (core, _vfs) = memory_server(config(), users);
        let watcher = Client::login(core.clone(), "u", "pw");
        let office = Arc::new(PostOffice::default());
        let arrivals = Arrivals::new(server.clone());
        let mut inbox = office
            .open(watcher.conn.id(), false, Some(arrivals.clone()))
            .unwrap();
        let post = |office: &PostOffice| {
            office.send(vec![Message {
                to: watcher.conn.id(),
                letter: Letter::changes_lost(),
            }])
        };

        post(&office);
        client.write_all(&[1; 100]).unwrap();
        // Until the kernel has queued them, the bytes do not count.
        while rustix::io::ioctl_fionread(server.as_fd()).unwrap() < 100 {
            std::thread::yield_now();
        }
        post(&office);
        let mut buf = [0; 40];
        (&*server).read_exact(&mut buf).unwrap();
        arrivals.took(40);
        post(&office);
        let marks: Vec<u64> = inbox.take().iter().map(|p| p.mark).collect();
        assert_eq!(marks, [0, 100, 100]);
    }
}
