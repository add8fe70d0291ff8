//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): enumeration with DOS wildcards,
//! restart/reopen/single-entry, and buffer limits.

use copyless_fscc::DirWriter;
use copyless_proto::messages::{self, QueryDirectoryRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::{utf16, Writer};
use copyless_vfs::{DirEntry, Disposition, Kind, OpenRequest};

use crate::access;
use crate::connection::{Compound, Connection, Req};
use crate::handlers::{file_info, vfs_status};
use crate::open::{current_path, DirCursor, OpenKind};
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
            let mut entries = Vec::new();
            let own = f.vfs.stat(&f.handle).map_err(|e| vfs_status(&e))?;
            let parent = if path.is_empty() {
                own.clone()
            } else {
                let parent_path = path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
                let po = f
                    .vfs
                    .open(&OpenRequest {
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
            entries.push(DirEntry {
                name: ".".into(),
                stat: own,
            });
            entries.push(DirEntry {
                name: "..".into(),
                stat: parent,
            });
            entries.extend(f.vfs.read_dir(&f.handle).map_err(|e| vfs_status(&e))?);
            // A restart keeps the pattern of the enumeration; a reopen (or
            // the first query) takes the one given now.
            let pattern = match (&f.dir, q.flags & messages::QD_REOPEN != 0) {
                (Some(d), false) => d.pattern.clone(),
                _ => pattern,
            };
            f.dir = Some(DirCursor {
                pattern,
                entries,
                next: 0,
            });
        }
        let dir_path = if first_call {
            None
        } else {
            Some(current_path(&server, &f.key).unwrap_or_default())
        };
        let cursor = f.dir.as_mut().expect("set above");
        let single = q.flags & messages::QD_RETURN_SINGLE_ENTRY != 0;
        while cursor.next < cursor.entries.len() {
            let e = &cursor.entries[cursor.next];
            if !cursor.pattern.matches(&e.name) {
                cursor.next += 1;
                continue;
            }
            // The listing was taken by an earlier query: entries removed
            // since are not shown, as Windows enumerates the live
            // directory.
            if let Some(dir) = &dir_path {
                if e.name != "." && e.name != ".." {
                    let child = if dir.is_empty() {
                        e.name.clone()
                    } else {
                        format!("{dir}/{}", e.name)
                    };
                    if f.vfs.resolve(&child).is_err() {
                        cursor.next += 1;
                        continue;
                    }
                }
            }
            let info = file_info(&e.stat, false);
            let short =
                (e.name != "." && e.name != "..").then(|| crate::shortname::short_name(&e.name));
            if !writer.push_with_short_name(&e.name, short.as_deref(), &info, cursor.next as u32) {
                if writer.is_empty() {
                    return Err(status::INFO_LENGTH_MISMATCH);
                }
                break;
            }
            cursor.next += 1;
            if single {
                break;
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
}
