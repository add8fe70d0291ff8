//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19, MS-FSA 2.1.5.10): an open of a
//! directory watches it from its first request on, with that request's
//! filter, depth and buffer size for as long as it lives (MS-SMB2
//! 3.3.1.3). Changes made through the server are reported to every
//! watcher whose filter takes them: at once to the oldest request that
//! waits, or kept on the open for the next one. More than the buffer holds
//! is reported as STATUS_NOTIFY_ENUM_DIR: the client lists the folder
//! again.

use copyless_fscc::notify::{self, filter};
use copyless_proto::messages::{self, ChangeNotifyRequest, WATCH_TREE};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{Writer, HEADER_LEN};

use crate::access;
use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::pending::Awaits;
use crate::conn::post::Kind;
use crate::conn::waiting::Wait;
use crate::file_table::{Seen, Watcher, DIRECTORY_DELETED, OVERFLOWED};
use crate::handlers::Then;
use crate::intent::{CallOp, WatchCall};
use crate::open::OpenKind;

/// What an open that watches its directory keeps between requests.
#[derive(Debug)]
pub struct Watch {
    /// Changes not yet reported: action and name.
    changes: Vec<(u32, String)>,
    /// Bytes they take as FILE_NOTIFY_INFORMATION entries.
    bytes: usize,
    /// More came than `capacity`: the next answer is NOTIFY_ENUM_DIR.
    overflowed: bool,
    /// The output buffer length of the first request.
    capacity: usize,
}

impl Watch {
    /// Keeps a change for the next answer, or notes that too many came.
    /// A change just like the one before it says nothing new (a file
    /// written several times before it is closed).
    fn keep(&mut self, action: u32, name: String) {
        if action == OVERFLOWED {
            self.overflowed = true;
            self.changes.clear();
            self.bytes = 0;
            return;
        }
        if self.overflowed || self.changes.last() == Some(&(action, name.clone())) {
            return;
        }
        let size = notify::entry_size(&name);
        if self.bytes + size > self.capacity {
            self.overflowed = true;
            self.changes.clear();
            self.bytes = 0;
            return;
        }
        self.bytes += size;
        self.changes.push((action, name));
    }

    /// Changes went missing: the next answer is NOTIFY_ENUM_DIR.
    fn overflow(&mut self) {
        self.overflowed = true;
        self.changes.clear();
        self.bytes = 0;
    }

    fn has_news(&self) -> bool {
        self.overflowed || !self.changes.is_empty()
    }

    /// The answer for a request of `room` bytes: the changes kept, or
    /// ENUM_DIR when they overflowed or do not fit. Either way they are
    /// reported.
    fn take(&mut self, room: usize) -> (NtStatus, Vec<u8>) {
        let overflowed = std::mem::take(&mut self.overflowed);
        let changes = std::mem::take(&mut self.changes);
        let bytes = std::mem::take(&mut self.bytes);
        if overflowed || bytes > room.min(self.capacity) {
            return (status::NOTIFY_ENUM_DIR, Vec::new());
        }
        let encoded = notify::encode_changes(changes.iter().map(|(a, n)| (*a, n.as_str())));
        (status::SUCCESS, encoded)
    }
}

/// A CHANGE_NOTIFY response body behind room for its header.
pub(crate) fn response_body(changes: &[u8]) -> Writer {
    let mut w = Writer::with_capacity(HEADER_LEN + 8 + changes.len());
    w.zeros(HEADER_LEN);
    messages::write_change_notify_response(&mut w, changes);
    w
}

impl Connection {
    /// CHANGE_NOTIFY: answered at once when changes are waiting on the
    /// open, else pending until one comes (or cancel, close, tree
    /// disconnect or logoff end it).
    pub(crate) fn change_notify(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let n = ChangeNotifyRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if !self.server.config.change_notify {
            return Err(status::NOT_IMPLEMENTED);
        }
        if n.output_buffer_length > self.max_io {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, n.output_buffer_length)?;
        let connection = self.id();
        let async_id = self.next_async_id();
        let may_pend = self.may_pend();
        let server = self.server.clone();
        let open = self.open_mut(req, compound, n.file_id)?;
        let volatile = open.file_id.volatile;
        let access = open.access;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        if !f.is_dir {
            return Err(status::INVALID_PARAMETER);
        }
        if access & access::FILE_LIST_DIRECTORY == 0 {
            return Err(status::ACCESS_DENIED);
        }
        // MS-FSA 2.1.5.10: a directory whose deletion is pending is
        // watched no more (its watchers were told when it became so).
        if server.files().get(&f.key).is_some_and(|s| s.delete_pending) {
            return Err(status::DELETE_PENDING);
        }
        // A request with no changes to take goes asynchronous; inside a
        // compound, short of the last request, Windows fails one that
        // would with STATUS_INTERNAL_ERROR (MS-SMB2 <159>), but only once
        // the open it names is found: a related one after a CREATE that
        // failed fails with the CREATE's status (smb2.compound.related7).
        if compound.more_follow && !f.watch.as_ref().is_some_and(|w| w.has_news()) {
            return Err(status::INTERNAL_ERROR);
        }
        let room = n.output_buffer_length;
        // The first request sets the watch up; later ones' filter and
        // depth are ignored.
        let mut watched_changed = false;
        let watch = f.watch.get_or_insert_with(|| {
            let tree = n.flags & WATCH_TREE != 0;
            watched_changed = server.files().watch(
                &f.key,
                Watcher {
                    connection,
                    open: volatile,
                    filter: n.completion_filter,
                    recursive: tree,
                },
            );
            Box::new(Watch {
                changes: Vec::new(),
                bytes: 0,
                overflowed: false,
                capacity: room as usize,
            })
        });
        if watched_changed && server.sees_local_changes() {
            // Local changes are watched for before the client hears its
            // request is pending: the engine's watcher sets its kernel
            // watches up (a tree's walks every folder beneath), as a
            // call; the request then runs again on the watch set up.
            reply.wait = Some(Wait::Call {
                vfs: f.vfs.clone(),
                op: CallOp::Watch(WatchCall { server }),
                then: Then::Notify {
                    msg: req.msg.to_vec(),
                },
                mark: None,
            });
            return Ok(status::SUCCESS);
        }
        if watch.has_news() {
            let (st, changes) = watch.take(room as usize);
            messages::write_change_notify_response(w, &changes);
            return Ok(st);
        }
        if !may_pend {
            return Err(status::INSUFFICIENT_RESOURCES);
        }
        reply.pend = Some((
            async_id,
            Awaits::Notify {
                open: volatile,
                room,
            },
        ));
        Ok(status::PENDING)
    }

    /// An entry at `path` of share `share` changed (`action`, of the kind
    /// filter bit `class`): its watchers are told at the next output.
    pub(crate) fn report_change(&mut self, share: usize, path: &str, action: u32, class: u32) {
        if !self.server.has_watchers() {
            return;
        }
        let seen = self
            .server
            .files()
            .watchers_of(share, path, action, class, 0);
        self.seen.extend(seen);
    }

    /// After a file is renamed, Windows also reports it as modified under
    /// its new name, to watchers that look at attributes or times but not
    /// at creation (smbtorture smb2.notify.mask-change has it, and
    /// smb2.notify.rec has a CREATION watcher see nothing of it).
    pub(crate) fn report_renamed_file(&mut self, share: usize, path: &str) {
        if !self.server.has_watchers() {
            return;
        }
        let class = filter::ATTRIBUTES
            | filter::LAST_WRITE
            | filter::LAST_ACCESS
            | filter::EA
            | filter::SECURITY;
        let seen = self.server.files().watchers_of(
            share,
            path,
            notify::action::MODIFIED,
            class,
            filter::CREATION,
        );
        self.seen.extend(seen);
    }

    /// A new name in a directory, or one gone: a file's or a directory's.
    pub(crate) fn report_name(&mut self, share: usize, path: &str, action: u32, is_dir: bool) {
        let class = if is_dir {
            filter::DIR_NAME
        } else {
            filter::FILE_NAME
        };
        self.report_change(share, path, action, class);
    }

    /// Hands the changes seen since the last output to their watchers:
    /// other connections' by one letter each, so that what one request
    /// changed (a rename's old and new name) is reported together; this
    /// connection's to their opens, where the oldest request that waits
    /// is answered, or they are kept.
    pub(crate) fn take_changes(&mut self) {
        let me = self.id();
        let (mine, mut theirs): (Vec<Seen>, Vec<Seen>) = std::mem::take(&mut self.seen)
            .into_iter()
            .partition(|s| s.connection == me);
        theirs.sort_by_key(|s| s.connection);
        for batch in theirs.chunk_by(|a, b| a.connection == b.connection) {
            self.post(batch[0].connection, Kind::Changed(batch.to_vec()));
        }
        self.sight(mine);
    }

    /// Changes that one request made (here or on another connection, whose
    /// letter brought them), those each watcher may see
    /// ([`Connection::sight`]), reach their watches on this connection, and
    /// each watch with news answers its oldest waiting request. One
    /// request's changes at a time: two requests' changes that arrive
    /// together still answer two waiting requests, one each, as Windows
    /// completes a pending CHANGE_NOTIFY per change (smb2.notify.mask-
    /// change waits with two).
    pub(crate) fn changed_here(&mut self, seen: Vec<Seen>) {
        let mut touched = Vec::new();
        for s in seen {
            if s.action == DIRECTORY_DELETED {
                self.end_notifies(s.open, status::DELETE_PENDING);
                continue;
            }
            if let Some(watch) = self.watch_of(s.open) {
                watch.keep(s.action, s.name);
                if !touched.contains(&s.open) {
                    touched.push(s.open);
                }
            }
        }
        self.answer_watchers(touched);
    }

    /// Reports of changes for this connection were dropped on the way
    /// (it fell behind taking its letters): every watch here answers
    /// NOTIFY_ENUM_DIR, so that its client lists the folder again.
    pub(crate) fn changes_lost(&mut self) {
        let mut touched = Vec::new();
        for s in self.sessions.values_mut() {
            for (id, open) in s.opens.iter_mut() {
                if let OpenKind::File(f) = &mut open.kind {
                    if let Some(watch) = f.watch.as_deref_mut() {
                        watch.overflow();
                        touched.push(*id);
                    }
                }
            }
        }
        self.answer_watchers(touched);
    }

    /// Answers the oldest waiting request of each open whose watch has
    /// news.
    fn answer_watchers(&mut self, touched: Vec<u64>) {
        for open in touched {
            let Some((async_id, room)) = self.pending_notify(open) else {
                continue;
            };
            if let Some((st, changes)) = self.watch_of(open).map(|w| w.take(room as usize)) {
                self.answer(async_id, Ok(st), response_body(&changes));
            }
        }
    }

    /// Ends every request waiting on `open` with `st`.
    fn end_notifies(&mut self, open: u64, st: NtStatus) {
        while let Some((async_id, _)) = self.pending_notify(open) {
            self.answer(async_id, Err(st), response_body(&[]));
        }
    }

    /// The watch of open `open`, on whichever session holds it.
    fn watch_of(&mut self, open: u64) -> Option<&mut Watch> {
        self.sessions
            .values_mut()
            .find_map(|s| s.opens.get_mut(&open))
            .and_then(|o| match &mut o.kind {
                OpenKind::File(f) => f.watch.as_deref_mut(),
                OpenKind::Pipe(_) => None,
            })
    }
}
