//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): enumeration with DOS wildcards,
//! restart/reopen/single-entry, and buffer limits.

use copyless_fscc::DirWriter;
use copyless_proto::messages::{self, FileId, QueryDirectoryRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{utf16, Writer};
use copyless_vfs::{Kind, OpenRequest};

use crate::access;
use crate::conn::connection::{Compound, Connection, Req};
use crate::handlers::{file_info, vfs_status};
use crate::listing_ledger::Caps;
use crate::names::enumeration::{Entry, Enumeration};
use crate::names::wildcard::{self, Pattern};
use crate::open::{current_path, OpenKind};

/// The least room worth keeping a window of a directory in: below it a
/// listing serves one request and goes.
const MIN_WINDOW: usize = 64 * 1024;

impl Connection {
    pub(crate) fn query_directory(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let q = QueryDirectoryRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        let max_io = self.max_io;
        if q.output_buffer_length > max_io {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, q.output_buffer_length)?;
        let server = self.server.clone();
        let open = self.open_mut(req, compound, q.file_id)?;
        let id = open.file_id.volatile;
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
        let mut writer = DirWriter::new(q.class, q.output_buffer_length as usize)
            .ok_or(status::INVALID_INFO_CLASS)?;
        if q.pattern.len() / 2 > wildcard::MAX_PATTERN_UNITS {
            return Err(status::OBJECT_NAME_INVALID);
        }
        let pattern = utf16::decode(q.pattern).map_err(|_| status::OBJECT_NAME_INVALID)?;
        let pattern = Pattern::new(&pattern).ok_or(status::OBJECT_NAME_INVALID)?;
        let restart = q.flags & (messages::QD_RESTART_SCANS | messages::QD_REOPEN) != 0;
        let first_call = f.dir.is_none() || restart;
        if first_call {
            let path = current_path(&server, &f.key).unwrap_or_default();
            let own = f.vfs.stat(&f.handle).map_err(|e| vfs_status(&e))?;
            let parent = if path.is_empty() {
                own.clone()
            } else {
                let parent_path = crate::names::path::parent(&path);
                let po = f
                    .vfs
                    .open(&OpenRequest::look(
                        f.handle.who(),
                        parent_path,
                        Kind::Directory,
                    ))
                    .map_err(|e| vfs_status(&e))?;
                po.stat
            };
            // A restart keeps the pattern of the enumeration; a reopen (or
            // the first query) takes the one given now. The old listing
            // goes back to the ledger here.
            let pattern = match (f.dir.take(), q.flags & messages::QD_REOPEN != 0) {
                (Some(d), false) => d.pattern,
                _ => pattern,
            };
            f.dir = Some(Box::new(Enumeration::new(pattern, own, parent)));
        }
        let single = q.flags & messages::QD_RETURN_SINGLE_ENTRY != 0;
        let hide_unreadable = server
            .shares
            .get(f.key.0)
            .is_some_and(|s| s.access.access_based_enumeration);
        // One reading of the directory per request once something is on its
        // way out: a client that makes the server list a large folder again
        // and again (its listings dropped for want of room) pays with
        // shorter replies, never with more work per request.
        let mut listed = false;
        let mut transient = false;
        loop {
            let open = self.open_mut(req, compound, q.file_id)?;
            let OpenKind::File(f) = &mut open.kind else {
                return Err(status::INVALID_PARAMETER);
            };
            let en = f.dir.as_mut().expect("set above");
            if en.window_done() {
                en.drop_listing();
            }
            if en.needs_listing() {
                if listed && !writer.is_empty() {
                    break;
                }
                transient = self.take_listing(req, compound, q.file_id, id)?;
                listed = true;
            }
            let open = self.open_mut(req, compound, q.file_id)?;
            let OpenKind::File(f) = &mut open.kind else {
                return Err(status::INVALID_PARAMETER);
            };
            let en = f.dir.as_ref().expect("set above");
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
                    Entry::Name(_) => match f.vfs.entry(&f.handle, name) {
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
                if hide_unreadable
                    && matches!(entry, Entry::Name(_))
                    && !f.vfs.may_read_entry(&f.handle, name).unwrap_or(false)
                {
                    next += 1;
                    continue;
                }
                let info = file_info(&stat, false);
                let short = matches!(entry, Entry::Name(_))
                    .then(|| crate::names::shortname::short_name(name));
                if !writer.push_with_short_name(name, short.as_deref(), &info, next as u32) {
                    if writer.is_empty() {
                        return Err(status::INFO_LENGTH_MISMATCH);
                    }
                    stop = true;
                    break;
                }
                next += 1;
                if single {
                    stop = true;
                    break;
                }
            }
            let en = f.dir.as_mut().expect("set above");
            en.next = next;
            if stop || !en.window_done() {
                break;
            }
        }
        let open = self.open_mut(req, compound, q.file_id)?;
        if let OpenKind::File(f) = &mut open.kind {
            if let Some(en) = f.dir.as_mut() {
                // A window that has run out, or one there was no room to
                // keep, goes back to the ledger now, not when the client
                // next asks.
                if transient || en.window_done() {
                    en.drop_listing();
                }
                en.end_if_done();
            }
        }
        if writer.is_empty() {
            return Err(if first_call {
                status::NO_SUCH_FILE
            } else {
                status::NO_MORE_FILES
            });
        }
        messages::write_buffer_response(w, &writer.finish());
        Ok(status::SUCCESS)
    }

    /// Lists the directory of the enumeration on open `id` (which holds no
    /// listing) within the room the caps leave: this connection's
    /// (`max_listing_bytes_per_connection`), its user's and the server's
    /// (the ledger). When the connection's own listings stand in the way,
    /// they are dropped first, as each is taken again where it was if its
    /// enumeration goes on. Returns whether the listing is only for this
    /// request, there being no room to keep even a small window.
    fn take_listing(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        file_id: FileId,
        id: u64,
    ) -> Result<bool, NtStatus> {
        let limits = self.server.limits();
        let caps = Caps {
            per_user: limits.max_listing_bytes_per_user,
            total: limits.max_listing_bytes_total,
        };
        let user = self
            .sessions
            .get(&req.session_id)
            .map(|s| s.user.clone())
            .unwrap_or_default();
        // The least a kept window holds; smaller caps make smaller windows.
        let floor = MIN_WINDOW
            .min(limits.max_listing_bytes)
            .min(caps.per_user)
            .min(caps.total);
        let (mut room, freed) = self.listing_room(&user, caps, (req.session_id, id));
        if room < floor && freed >= floor {
            self.drop_listings_besides((req.session_id, id));
            room = freed;
        }
        // The room is taken before the directory is read, so that
        // connections listing at once do not each count on all of it; what
        // the listing leaves of it goes back after.
        let reserved = (room >= floor)
            .then(|| self.server.listing_ledger.try_charge(&user, room, caps))
            .flatten();
        let ledger = self.server.listing_ledger.clone();
        let open = self.open_mut(req, compound, file_id)?;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        let en = f.dir.as_mut().expect("the caller made it");
        let mut window = en.window(if reserved.is_some() { room } else { floor });
        f.vfs
            .each_name(&f.handle, &mut |name| window.offer(name))
            .map_err(|e| vfs_status(&e))?;
        let bytes = window.bytes();
        // Without room to keep even a small window, the listing serves
        // this request and goes; it is in the ledger while it lives.
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
