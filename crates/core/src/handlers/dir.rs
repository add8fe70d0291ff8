//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): enumeration with DOS wildcards,
//! restart/reopen/single-entry, and buffer limits.
//!
//! What reaches the filesystem (the folder's stat and its parent's when
//! an enumeration begins, reading the folder, each entry's stat as it
//! goes out) is one call, a [`DirStep`]: it takes the open's enumeration
//! with it and brings it back, and the reply is made in memory. Another
//! query of the same open waits meanwhile.

use std::sync::Arc;

use copyless_fscc::DirWriter;
use copyless_proto::messages::{self, FileId, QueryDirectoryRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{utf16, Writer};
use copyless_vfs::{FileHandle, Kind, OpenRequest, Vfs};

use crate::access;
use crate::conn::connection::{Begun, Chain, Compound, Connection, Reply, Req};
use crate::conn::waiting::{Awaited, Hold, Wait};
use crate::handlers::{file_info, vfs_status, Then};
use crate::intent::CallOp;
use crate::listing_ledger::{Caps, ListingCharge, ListingLedger};
use crate::names::enumeration::{Entry, Enumeration};
use crate::names::hiding::NameRules;
use crate::names::wildcard::{self, Pattern};
use crate::open::{current_path, Open, OpenKind};
use crate::security::{self, OwnedCaller};

/// The least room worth keeping a window of a directory in: below it a
/// listing serves one request and goes.
const MIN_WINDOW: usize = 64 * 1024;

/// A QUERY_DIRECTORY whose step is with the engine.
pub(crate) struct Querying {
    msg: Vec<u8>,
    /// The open, as the request named it (or the compound did).
    file_id: FileId,
    /// The enumeration began with this query: with nothing found, the
    /// reply is NO_SUCH_FILE rather than NO_MORE_FILES.
    first: bool,
}

/// The filesystem work of one QUERY_DIRECTORY, made by the engine as a
/// call ([`CallOp::List`]): it begins the enumeration if asked, reads
/// the folder when the enumeration needs a listing and room was found
/// for one, and looks at each entry that goes into the reply.
pub struct DirStep {
    dir: Arc<FileHandle>,
    /// Begin the enumeration with this pattern; the parent folder's path
    /// when the folder is not the share's root.
    begin: Option<(Pattern, Option<String>)>,
    en: Option<Box<Enumeration>>,
    writer: DirWriter,
    room: Option<Room>,
    /// Access-based enumeration: who reads the folder, and its path, when
    /// the listing leaves out what they may not read.
    hide_unreadable: Option<(OwnedCaller, String)>,
    /// What the share hides (shown hidden) and vetoes (left out).
    names: Arc<NameRules>,
    single: bool,
    /// It stopped, with nothing written, for want of a listing there was
    /// no room reserved for.
    wants_listing: bool,
    error: Option<NtStatus>,
}

/// Room in the listing ledger for one listing, found before the call so
/// that connections listing at once do not each count on all of it.
struct Room {
    room: usize,
    floor: usize,
    reserved: Option<ListingCharge>,
    ledger: Arc<ListingLedger>,
    user: String,
}

impl std::fmt::Debug for DirStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirStep")
            .field("dir", &self.dir)
            .field("begins", &self.begin.is_some())
            .field("lists", &self.room.is_some())
            .finish()
    }
}

impl DirStep {
    /// Makes the step through `vfs`, blocking.
    pub(crate) fn perform(mut self, vfs: &dyn Vfs) -> DirStep {
        if let Err(e) = self.walk(vfs) {
            self.error = Some(e);
        }
        self
    }

    fn walk(&mut self, vfs: &dyn Vfs) -> Result<(), NtStatus> {
        if let Some((pattern, parent)) = self.begin.take() {
            let own = vfs.stat(&self.dir).map_err(|e| vfs_status(&e))?;
            let parent = match parent {
                None => own.clone(),
                Some(path) => {
                    let look = OpenRequest::look(self.dir.who(), &path, Kind::Directory);
                    vfs.open(&look).map_err(|e| vfs_status(&e))?.stat
                }
            };
            self.en = Some(Box::new(Enumeration::new(pattern, own, parent)));
        }
        let Some(en) = self.en.as_mut() else {
            return Err(status::INTERNAL_ERROR);
        };
        let writer = &mut self.writer;
        // One reading of the directory per request once something is on
        // its way out: a client that makes the server list a large folder
        // again and again (its listings dropped for want of room) pays
        // with shorter replies, never with more work per request.
        let mut transient = false;
        loop {
            if en.window_done() {
                en.drop_listing();
            }
            if en.needs_listing() {
                if !writer.is_empty() {
                    break;
                }
                let Some(room) = self.room.take() else {
                    self.wants_listing = true;
                    break;
                };
                transient = take_listing(vfs, &self.dir, en, room, &self.names)?;
            }
            let mut next = en.next;
            let mut stop = false;
            while next < en.len() {
                let entry = en.at(next);
                let name = entry.name();
                if !en.pattern.matches(name) {
                    next += 1;
                    continue;
                }
                let stat = match entry {
                    Entry::Dot => en.dot.clone(),
                    Entry::DotDot => en.dotdot.clone(),
                    // Each entry is looked at as it goes out: one removed
                    // since the listing is not shown, as Windows enumerates
                    // the live directory.
                    Entry::Name(_) => match vfs.entry(&self.dir, name) {
                        Ok(Some(stat)) => stat,
                        Ok(None) => {
                            next += 1;
                            continue;
                        }
                        // What fits goes out; the next query meets the error
                        // again and reports it.
                        Err(_) if !writer.is_empty() => {
                            stop = true;
                            break;
                        }
                        Err(e) => return Err(vfs_status(&e)),
                    },
                };
                // Access-based enumeration: what the reader may not read is not
                // there for them.
                let listed = matches!(entry, Entry::Name(_));
                if let (Some((caller, dir_path)), true) = (&self.hide_unreadable, listed) {
                    let caller = caller.caller(self.dir.who());
                    let path = match dir_path.as_str() {
                        "" => name.to_owned(),
                        dir => format!("{dir}/{name}"),
                    };
                    if !security::may_see(vfs, &caller, &self.dir, name, &path) {
                        next += 1;
                        continue;
                    }
                }
                let mut info = file_info(&stat, false);
                if listed {
                    info.attributes = self.names.shown(name, info.attributes);
                }
                let short = listed.then(|| copyless_vfs::shortname::short_name(name));
                if !writer.push_with_short_name(name, short.as_deref(), &info, next as u32) {
                    if writer.is_empty() {
                        return Err(status::INFO_LENGTH_MISMATCH);
                    }
                    stop = true;
                    break;
                }
                next += 1;
                if self.single {
                    stop = true;
                    break;
                }
            }
            en.next = next;
            if stop || !en.window_done() {
                break;
            }
        }
        // A window that has run out, or one there was no room to keep,
        // goes back to the ledger now, not when the client next asks.
        if transient || en.window_done() {
            en.drop_listing();
        }
        en.end_if_done();
        Ok(())
    }
}

/// Lists the directory of `en` (which holds no listing) within `room`.
/// Returns whether the listing is only for this request, there being no
/// room to keep even a small window.
fn take_listing(
    vfs: &dyn Vfs,
    dir: &FileHandle,
    en: &mut Enumeration,
    room: Room,
    names: &NameRules,
) -> Result<bool, NtStatus> {
    let Room {
        room,
        floor,
        reserved,
        ledger,
        user,
    } = room;
    let mut window = en.window(if reserved.is_some() { room } else { floor });
    vfs.each_name(dir, &mut |name| {
        if !names.vetoes(name) {
            window.offer(name);
        }
    })
    .map_err(|e| vfs_status(&e))?;
    let bytes = window.bytes();
    // Without room to keep even a small window, the listing serves this
    // request and goes; it is in the ledger while it lives.
    let (charge, transient) = match reserved {
        Some(mut charge) if bytes <= charge.bytes() => {
            charge.shrink_to(bytes);
            (charge, false)
        }
        _ => (ledger.charge(&user, bytes), true),
    };
    en.take(window.finish(), charge);
    Ok(transient)
}

impl Connection {
    pub(crate) fn query_directory(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
    ) -> Result<NtStatus, NtStatus> {
        let result = self.query_directory_now(req, compound, reply);
        if reply.wait.is_none() && reply.hold.is_none() {
            // Answered without its enumeration going away (a query woken
            // for it that failed, its open closed): the next query held
            // for it goes on.
            let key = QueryDirectoryRequest::parse(req.msg)
                .ok()
                .and_then(|q| self.open_mut(req, compound, q.file_id).ok())
                .and_then(|o| o.file().map(|f| f.key));
            self.wake_held_query(key);
        }
        result
    }

    fn query_directory_now(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
    ) -> Result<NtStatus, NtStatus> {
        let q = QueryDirectoryRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let max_io = self.max_io;
        if q.output_buffer_length > max_io {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, q.output_buffer_length)?;
        let server = self.server.clone();
        let file_id = self.file_id(q.file_id, compound)?;
        let open = self.open_mut(req, compound, file_id)?;
        let access = open.access;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        if !f.is_dir {
            return Err(status::INVALID_PARAMETER);
        }
        if access & access::FILE_READ_DATA == 0 {
            return Err(status::ACCESS_DENIED);
        }
        let writer = DirWriter::new(q.class, q.output_buffer_length as usize)
            .ok_or(status::INVALID_INFO_CLASS)?;
        if q.pattern.len() / 2 > wildcard::MAX_PATTERN_UNITS {
            return Err(status::OBJECT_NAME_INVALID);
        }
        let pattern = utf16::decode(q.pattern).map_err(|_| status::OBJECT_NAME_INVALID)?;
        let pattern = Pattern::new(&pattern).ok_or(status::OBJECT_NAME_INVALID)?;
        if f.dir_away {
            // Queries of one open go one after another, as on Windows.
            let key = f.key;
            reply.hold = Some(Hold {
                token: self.next_hold_token(),
                key,
                awaited: Awaited::Listing,
            });
            return Ok(status::PENDING);
        }
        let restart = q.flags & (messages::QD_RESTART_SCANS | messages::QD_REOPEN) != 0;
        let first = f.dir.is_none() || restart;
        let begin = first.then(|| {
            let path = current_path(&server, &f.key).unwrap_or_default();
            let parent = (!path.is_empty()).then(|| crate::names::path::parent(&path).to_owned());
            // A restart keeps the pattern of the enumeration; a reopen (or
            // the first query) takes the one given now. The old listing
            // goes back to the ledger here.
            let pattern = match (f.dir.take(), q.flags & messages::QD_REOPEN != 0) {
                (Some(d), false) => d.pattern,
                _ => pattern,
            };
            (pattern, parent)
        });
        let querying = Querying {
            msg: req.msg.to_vec(),
            file_id,
            first,
        };
        let single = q.flags & messages::QD_RETURN_SINGLE_ENTRY != 0;
        self.dir_step(req, compound, reply, querying, writer, begin, single)
    }

    /// Sends the next step of the query `q` out as a call, with room for
    /// a listing when its enumeration needs one.
    #[allow(clippy::too_many_arguments)]
    fn dir_step(
        &mut self,
        req: &Req<'_>,
        compound: &Compound,
        reply: &mut Reply,
        q: Querying,
        writer: DirWriter,
        begin: Option<(Pattern, Option<String>)>,
        single: bool,
    ) -> Result<NtStatus, NtStatus> {
        let open = self.open_mut(req, compound, q.file_id)?;
        let id = open.file_id.volatile;
        let OpenKind::File(f) = &open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        let key = f.key;
        let share = key.0;
        let lists = begin.is_some()
            || f.dir
                .as_ref()
                .is_some_and(|en| en.needs_listing() || en.window_done());
        let room = lists.then(|| self.listing_room_for(req.session_id, id));
        let anonymous = self
            .sessions
            .get(&req.session_id)
            .is_some_and(|s| s.anonymous);
        let hide_unreadable = self
            .server
            .shares
            .get(share)
            .is_some_and(|s| s.access.access_based_enumeration)
            .then(|| {
                let caller = OwnedCaller::from_session(&self.server, anonymous);
                (caller, current_path(&self.server, &key).unwrap_or_default())
            });
        let open = self.open_mut(req, compound, q.file_id)?;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        let step = DirStep {
            dir: f.handle.clone(),
            begin,
            en: f.dir.take(),
            writer,
            room,
            hide_unreadable,
            names: f.names.clone(),
            single,
            wants_listing: false,
            error: None,
        };
        f.dir_away = true;
        reply.wait = Some(Wait::Call {
            vfs: f.vfs.clone(),
            op: CallOp::List(Box::new(step)),
            then: Then::List(Box::new(q)),
            mark: None,
        });
        Ok(status::SUCCESS)
    }

    /// Goes on with the query `q` once its step is made: the enumeration
    /// goes back to its open, and the reply is made, or another step
    /// (with a listing) goes out.
    pub(crate) fn listed(
        &mut self,
        q: Querying,
        step: DirStep,
        begun: &mut Begun,
        chain: &mut Chain,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let DirStep {
            en,
            writer,
            single,
            wants_listing,
            error,
            ..
        } = step;
        let req = Req::kept(&q.msg, begun, chain);
        let compound = &chain.compound;
        let Ok(Open {
            kind: OpenKind::File(f),
            ..
        }) = self.open_mut(&req, compound, q.file_id)
        else {
            self.wake_held_query(None);
            return Err(status::FILE_CLOSED);
        };
        f.dir = en;
        f.dir_away = false;
        let key = f.key;
        let result = match error {
            Some(e) if writer.is_empty() => Err(e),
            None if wants_listing => {
                let again = Querying {
                    msg: q.msg.clone(),
                    ..q
                };
                let reply = &mut begun.reply;
                self.dir_step(&req, compound, reply, again, writer, None, single)
            }
            _ if writer.is_empty() => Err(if q.first {
                status::NO_SUCH_FILE
            } else {
                status::NO_MORE_FILES
            }),
            _ => {
                messages::write_buffer_response(w, &writer.finish());
                Ok(status::SUCCESS)
            }
        };
        // The enumeration stays: the query held longest for it goes on.
        if begun.reply.wait.is_none() {
            self.wake_held_query(Some(key));
        }
        result
    }

    /// The room a new listing of open `id` of session `session_id` has:
    /// this connection's (`max_listing_bytes_per_connection`), its user's
    /// and the server's (the ledger). When the connection's own listings
    /// stand in the way, they are dropped first, as each is taken again
    /// where it was if its enumeration goes on.
    fn listing_room_for(&mut self, session_id: u64, id: u64) -> Room {
        let limits = self.server.limits();
        let caps = Caps {
            per_user: limits.max_listing_bytes_per_user,
            total: limits.max_listing_bytes_total,
        };
        let user = self
            .sessions
            .get(&session_id)
            .map(|s| s.user.clone())
            .unwrap_or_default();
        // The least a kept window holds; smaller caps make smaller windows.
        let floor = MIN_WINDOW
            .min(limits.max_listing_bytes)
            .min(caps.per_user)
            .min(caps.total);
        let (mut room, freed) = self.listing_room(&user, caps, (session_id, id));
        if room < floor && freed >= floor {
            self.drop_listings_besides((session_id, id));
            room = freed;
        }
        // The room is taken before the directory is read; what the
        // listing leaves of it goes back after.
        let reserved = (room >= floor)
            .then(|| self.server.listing_ledger.try_charge(&user, room, caps))
            .flatten();
        Room {
            room,
            floor,
            reserved,
            ledger: self.server.listing_ledger.clone(),
            user,
        }
    }
    /// The room a new listing of `user` has: what this connection's bound
    /// leaves beside its other listings, and what the ledger leaves the
    /// user and the server; and the room it would have were this
    /// connection's other listings dropped.
    fn listing_room(&self, user: &str, caps: Caps, except: (u64, u64)) -> (usize, usize) {
        let folded = user.to_lowercase();
        let (mut here, mut mine) = (0, 0);
        for (_, en) in self.listings().filter(|(at, _)| *at != except) {
            here += en.listing_bytes();
            if en.listing_user() == Some(folded.as_str()) {
                mine += en.listing_bytes();
            }
        }
        let ledger = &self.server.listing_ledger;
        let limit = self.server.limits().max_listing_bytes;
        let now = limit.saturating_sub(here).min(ledger.room(user, caps));
        let freed = limit.min(ledger.room_beside(user, caps, mine, here));
        (now, freed)
    }

    /// Every enumeration of this connection, by session and open.
    fn listings(&self) -> impl Iterator<Item = ((u64, u64), &Enumeration)> {
        self.sessions.iter().flat_map(|(sid, s)| {
            s.opens
                .iter()
                .filter_map(move |(oid, o)| Some(((*sid, *oid), o.file()?.dir.as_deref()?)))
        })
    }

    /// Drops every listing of this connection but that of `keep`.
    fn drop_listings_besides(&mut self, keep: (u64, u64)) {
        for (sid, session) in self.sessions.iter_mut() {
            for (oid, open) in session.opens.iter_mut() {
                if (*sid, *oid) == keep {
                    continue;
                }
                if let OpenKind::File(f) = &mut open.kind {
                    if let Some(en) = f.dir.as_mut() {
                        en.drop_listing();
                    }
                }
            }
        }
    }
}
