//! Carries letters between connections (`copyless_core::post`): each
//! connection has an inbox while it lives; a letter for a connection that
//! has ended is dropped, as the core expects. A connection takes the
//! letters in its inbox before any frame it receives after they were
//! posted, so what a client does after one connection's reply sees the
//! effect of that reply on its other connections.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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
    letters: mpsc::UnboundedSender<Letter>,
    bell: Option<Arc<OwnedFd>>,
    reports: Arc<Reports>,
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
    letters: mpsc::UnboundedReceiver<Letter>,
    bell: Option<Arc<OwnedFd>>,
    reports: Arc<Reports>,
}

impl PostOffice {
    fn boxes(&self) -> MutexGuard<'_, HashMap<ConnectionId, Mailbox>> {
        self.boxes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens the inbox of connection `id`. With `bell`, each letter also
    /// makes an eventfd readable, for a thread that waits in `poll`; a
    /// task is woken through the receiver itself.
    pub fn open(self: &Arc<Self>, id: ConnectionId, bell: bool) -> io::Result<Inbox> {
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
            if mailbox.letters.unbounded_send(m.letter).is_ok() {
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
    pub fn take(&mut self) -> Vec<Letter> {
        if let Some(bell) = &self.bell {
            let mut count = [0u8; 8];
            let _ = rustix::io::read(bell.as_fd(), &mut count);
        }
        let mut letters = Vec::new();
        while let Ok(letter) = self.letters.try_recv() {
            self.taken(&letter);
            letters.push(letter);
        }
        if self.reports.lost.swap(false, Ordering::AcqRel) {
            letters.push(Letter::changes_lost());
        }
        letters
    }

    /// The next letter, for a task: as [`Inbox::take`] gives them.
    pub fn poll_letter(&mut self, cx: &mut Context<'_>) -> Poll<Option<Letter>> {
        match self.letters.poll_next_unpin(cx) {
            Poll::Ready(Some(letter)) => {
                self.taken(&letter);
                Poll::Ready(Some(letter))
            }
            Poll::Pending if self.reports.lost.swap(false, Ordering::AcqRel) => {
                Poll::Ready(Some(Letter::changes_lost()))
            }
            other => other,
        }
    }

    fn taken(&self, letter: &Letter) {
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
        let mut inbox = office.open(watcher.conn.id(), false).unwrap();
        // The watcher takes nothing while the other client makes more
        // files than its inbox holds reports of.
        for i in 0..MAX_QUEUED_REPORTS + 10 {
            let id = writer.create(&format!("docs\\{i}"), false).unwrap();
            writer.close(id);
            office.send(std::mem::take(&mut writer.posted));
        }
        let letters = inbox.take();
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
}
