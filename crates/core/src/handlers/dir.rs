//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): enumeration with DOS wildcards,
//! restart/reopen/single-entry, and buffer limits.

use copyless_fscc::DirWriter;
use copyless_proto::messages::{self, QueryDirectoryRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{utf16, Writer};
use copyless_vfs::{Disposition, Kind, OpenRequest};

use crate::access;
use crate::connection::{Compound, Connection, Req};
use crate::enumeration::{Entry, Enumeration};
use crate::handlers::{file_info, vfs_status};
use crate::open::{current_path, OpenKind};
use crate::wildcard::{self, Pattern};

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
        let listed = first_call || f.dir.as_ref().is_some_and(|d| !d.has_listing());
        if first_call {
            let path = current_path(&server, &f.key).unwrap_or_default();
            let own = f.vfs.stat(&f.handle).map_err(|e| vfs_status(&e))?;
            let parent = if path.is_empty() {
                own.clone()
            } else {
                let parent_path = crate::path::parent(&path);
                let po = f
                    .vfs
                    .open(&OpenRequest {
                        who: f.handle.who(),
                        path: parent_path,
                        disposition: Disposition::Open,
                        kind: Kind::Directory,
                        read: false,
                        write: false,
                        attributes: 0,
                        allocation_size: 0,
                    })
                    .map_err(|e| vfs_status(&e))?;
                po.stat
            };
            let names = f.vfs.list_names(&f.handle).map_err(|e| vfs_status(&e))?;
            // A restart keeps the pattern of the enumeration; a reopen (or
            // the first query) takes the one given now.
            let pattern = match (f.dir.take(), q.flags & messages::QD_REOPEN != 0) {
                (Some(d), false) => d.pattern,
                _ => pattern,
            };
            f.dir = Some(Enumeration::new(pattern, own, parent, names));
        } else if listed {
            let names = f.vfs.list_names(&f.handle).map_err(|e| vfs_status(&e))?;
            f.dir.as_mut().expect("checked above").restore(names);
        }
        if listed {
            self.bound_listings(req.session_id, id);
        }
        let open = self.open_mut(req, compound, q.file_id)?;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_PARAMETER);
        };
        let en = f.dir.as_ref().expect("set above");
        let single = q.flags & messages::QD_RETURN_SINGLE_ENTRY != 0;
        let hide_unreadable = server
            .shares
            .get(f.key.0)
            .is_some_and(|s| s.access.access_based_enumeration);
        let mut next = en.next;
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
                    Err(_) if !writer.is_empty() => break,
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
            let short = matches!(entry, Entry::Name(_)).then(|| crate::shortname::short_name(name));
            if !writer.push_with_short_name(name, short.as_deref(), &info, next as u32) {
                if writer.is_empty() {
                    return Err(status::INFO_LENGTH_MISMATCH);
                }
                break;
            }
            next += 1;
            if single {
                break;
            }
        }
        f.dir.as_mut().expect("set above").next = next;
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

    /// Keeps the directory listings this connection holds within
    /// `max_listing_bytes`: when they pass it, every listing but that of
    /// open `keep` is dropped (each is taken again if its enumeration goes
    /// on). One listing larger than the bound is kept alone.
    fn bound_listings(&mut self, session_id: u64, keep: u64) {
        let limit = self.server.limits().max_listing_bytes;
        let held: usize = self
            .sessions
            .values()
            .flat_map(|s| s.opens.values())
            .filter_map(|o| o.file()?.dir.as_ref())
            .map(Enumeration::listing_bytes)
            .sum();
        if held <= limit {
            return;
        }
        for (sid, session) in self.sessions.iter_mut() {
            for (oid, open) in session.opens.iter_mut() {
                if (*sid, *oid) == (session_id, keep) {
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
