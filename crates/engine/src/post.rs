//! Carries letters between connections (`copyless_core::post`): each
//! connection has an inbox while it lives; a letter for a connection that
//! has ended is dropped, as the core expects. A connection takes the
//! letters in its inbox before any frame it receives after they were
//! posted, so what a client does after one connection's reply sees the
//! effect of that reply on its other connections.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};

use copyless_core::{ConnectionId, Letter, Message};
use futures_channel::mpsc;
use rustix::event::{eventfd, EventfdFlags};

#[derive(Default)]
pub(crate) struct PostOffice {
    boxes: Mutex<HashMap<ConnectionId, Mailbox>>,
}

struct Mailbox {
    letters: mpsc::UnboundedSender<Letter>,
    bell: Option<Arc<OwnedFd>>,
}

/// A connection's letters, received until it is dropped.
pub(crate) struct Inbox {
    office: Arc<PostOffice>,
    id: ConnectionId,
    pub letters: mpsc::UnboundedReceiver<Letter>,
    bell: Option<Arc<OwnedFd>>,
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
        self.boxes().insert(
            id,
            Mailbox {
                letters: tx,
                bell: bell.clone(),
            },
        );
        Ok(Inbox {
            office: self.clone(),
            id,
            letters: rx,
            bell,
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
            letters.push(letter);
        }
        letters
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.office.boxes().remove(&self.id);
    }
}
