//! QUERY_INFO and SET_INFO (MS-SMB2 3.3.5.20, 3.3.5.21) for files, file
//! systems and security descriptors.

use std::sync::Arc;

use copyless_fscc::notify::{action, filter};
use copyless_fscc::{self as fscc, class, ea, FsInfo, QueryContext};
use copyless_proto::messages::{self, QueryInfoRequest, SetInfoRequest};
use copyless_proto::negotiate::DIALECT_311;
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;
use copyless_vfs::{
    attr, Disposition, Ea, FileHandle, Identity, Kind, OpenRequest, SetTimes, Vfs, VfsError,
};

use crate::access;
use crate::audit::{AuditKind, Audited};
use crate::breaks::handles_cached;
use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::waiting::Wait;
use crate::file_table::{stream_id, FileKey};
use crate::handlers::change::{self, Alter, Change};
use crate::handlers::look::{self, Looked, Part};
use crate::handlers::quota;
use crate::handlers::{file_info, vfs_status, Then};
use crate::intent::CallOp;
use crate::leases::LeaseId;
use crate::names::path;
use crate::open::{current_path, FileOpen, OpenKind};
use crate::rights;
use crate::security::{self, Caller, OwnedCaller};
use crate::server::Server;
use copyless_fscc::descriptor::{Descriptor, ALL_PARTS};

/// Makes `alter` on open `f`: where it is in place, now; else, on the
/// first run of the request, as a call (Some: the status to return
/// while the reply waits for it); on the run after the call, from its
/// result `made`.
fn change(
    f: &FileOpen,
    alter: Alter,
    made: &mut Option<Result<(), NtStatus>>,
    req: &Req<'_>,
    reply: &mut Reply,
) -> Result<Option<NtStatus>, NtStatus> {
    if let Some(result) = made.take() {
        return result.map(|()| None);
    }
    let vfs = f.vfs.as_ref();
    if change::in_place(vfs, &f.handle, &alter) {
        return change::make(vfs, &f.handle, &alter, &f.names).map(|()| None);
    }
    reply.wait = Some(Wait::Call {
        vfs: f.vfs.clone(),
        op: CallOp::Change(Change {
            handle: f.handle.clone(),
            alter,
            names: f.names.clone(),
        }),
        then: Then::Set {
            msg: req.msg.to_vec(),
        },
        mark: None,
    });
    Ok(Some(status::SUCCESS))
}

/// FileModeInformation bits a client may set (MS-FSCC 2.4.26).
const MODE_SETTABLE: u32 = 0x0000_0002 | 0x0000_0004 | 0x0000_0010 | 0x0000_0020;

impl Connection {
    /// QUERY_INFO. What it needs of the filesystem is read here where
    /// that is in memory (the stat of an open file of a local
    /// filesystem), else gathered by a call, after which the query runs
    /// again with `looked`.
    pub(crate) fn query_info(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        looked: Option<Result<Box<Looked>, NtStatus>>,
    ) -> Result<NtStatus, NtStatus> {
        let q = QueryInfoRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if q.output_buffer_length > self.max_io || q.input.len() as u64 > u64::from(self.max_io) {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, q.output_buffer_length.max(q.input.len() as u32))?;
        if q.info_type == messages::INFO_QUOTA {
            return self.query_quota(req, compound, reply, w, &q, looked);
        }
        let server = self.server.clone();
        let share_name = self.share_name(req);
        let dialect = self.dialect;
        let open = self.open_mut(req, compound, q.file_id)?;
        let granted = open.access;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::NOT_SUPPORTED);
        };
        let out_len = q.output_buffer_length as usize;
        let part = match q.info_type {
            // Served from SMB 3.1.1 on, as Windows does (MS-SMB2
            // 3.3.5.20.1).
            messages::INFO_FILE
                if q.class == class::FILE_NORMALIZED_NAME_INFORMATION && dialect < DIALECT_311 =>
            {
                return Err(status::NOT_SUPPORTED);
            }
            messages::INFO_FILE => {
                if needs_read_attributes(q.class) && granted & access::FILE_READ_ATTRIBUTES == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                if q.class == class::FILE_FULL_EA_INFORMATION && granted & access::FILE_READ_EA == 0
                {
                    return Err(status::ACCESS_DENIED);
                }
                match q.class {
                    class::FILE_STREAM_INFORMATION => Part::Streams,
                    class::FILE_FULL_EA_INFORMATION => Part::Eas,
                    // EaSize included: the VFS keeps it with the stat.
                    _ => Part::Stat,
                }
            }
            messages::INFO_FILESYSTEM => Part::Fs,
            messages::INFO_SECURITY => {
                security_readable(q.additional_information, granted)?;
                Part::Security
            }
            _ => return Err(status::NOT_SUPPORTED),
        };
        let then = || Then::Query {
            msg: req.msg.to_vec(),
        };
        let Some(looked) = look::here_or_by_call(f, part.clone(), looked, reply, then) else {
            return Ok(status::SUCCESS);
        };
        let looked = looked?;
        let output = match part {
            Part::Eas => {
                let (data, status) = full_eas(f, &q, looked.eas, out_len)?;
                messages::write_buffer_response(w, &data);
                return Ok(status);
            }
            Part::Stat | Part::Streams => {
                let st = looked.stat.ok_or(status::INTERNAL_ERROR)?;
                let (path, delete_pending) = file_state(&server, f);
                let mut info = file_info(&st, delete_pending);
                info.attributes = f.names.shown(path::file_name(&path), info.attributes);
                if q.class == class::FILE_ALTERNATE_NAME_INFORMATION {
                    let short = copyless_vfs::shortname::short_name(path::file_name(&path));
                    let name = copyless_proto::utf16::encode(&short);
                    let mut data = (name.len() as u32).to_le_bytes().to_vec();
                    data.extend_from_slice(&name);
                    // sizeof(FILE_NAME_INFORMATION): the length and one
                    // character, padded (smb2.getinfo.qfile_buffercheck).
                    if out_len < 8 {
                        return Err(status::INFO_LENGTH_MISMATCH);
                    }
                    let overflow = data.len() > out_len;
                    data.truncate(out_len);
                    messages::write_buffer_response(w, &data);
                    return Ok(if overflow {
                        status::BUFFER_OVERFLOW
                    } else {
                        status::SUCCESS
                    });
                }
                let mut name = path::to_windows(&path);
                // The normalized name of a stream's open names the stream
                // too (`dir\file:stream`); the other classes name the file.
                if let (class::FILE_NORMALIZED_NAME_INFORMATION, Some(stream)) =
                    (q.class, &f.handle.stream)
                {
                    name = format!("{name}:{stream}");
                }
                let ctx = QueryContext {
                    name: &name,
                    access_mask: granted,
                    position: f.position,
                    mode: f.mode,
                    alignment: 0,
                    streams: &looked.streams,
                };
                fscc::query_file_info(q.class, &info, &ctx, out_len).map_err(|e| e.ntstatus())?
            }
            // Answered by query_quota.
            Part::Quotas(_) => return Err(status::INTERNAL_ERROR),
            Part::Fs => {
                let fs = looked.fs.ok_or(status::INTERNAL_ERROR)?;
                let info = fs_info(&share_name, &fs, looked.quota.as_ref());
                fscc::query_fs_info(q.class, &info, out_len).map_err(|e| e.ntstatus())?
            }
            Part::Security => {
                let sd = looked
                    .descriptor
                    .ok_or(status::INTERNAL_ERROR)?
                    .encode(q.additional_information);
                if sd.len() > out_len {
                    // The client retries with the size we tell it.
                    messages::write_error_response(w, &(sd.len() as u32).to_le_bytes());
                    return Ok(status::BUFFER_TOO_SMALL);
                }
                fscc::QueryOutput {
                    data: sd,
                    overflow: false,
                }
            }
        };
        messages::write_buffer_response(w, &output.data);
        Ok(if output.overflow {
            status::BUFFER_OVERFLOW
        } else {
            status::SUCCESS
        })
    }

    /// SET_INFO. A change the filesystem makes (or a check it answers)
    /// where that may wait for a disk is a call, after which the request
    /// runs again with its result, `changed`, and changes the server's
    /// tables and tells watchers.
    pub(crate) fn set_info(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        mut made: Option<Result<(), NtStatus>>,
    ) -> Result<NtStatus, NtStatus> {
        let s = SetInfoRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if s.buffer.len() as u64 > u64::from(self.max_io) {
            return Err(status::INVALID_PARAMETER);
        }
        self.check_charge(req, s.buffer.len() as u32)?;
        let server = self.server.clone();
        let read_only = self.tree_read_only(req);
        let anonymous = self
            .sessions
            .get(&req.session_id)
            .is_some_and(|s| s.anonymous);
        let quota_admin = self.quota_admin(req);
        let my_id = self.file_id(s.file_id, compound)?.volatile;
        // A rename or delete first takes handle caching from the other
        // clients' leases, and waits for them to let go, as `hold`.
        let hold = (self.id(), self.next_hold_token());
        let parent_lease = self
            .open_mut(req, compound, s.file_id)?
            .file()
            .map(|f| f.key)
            .and_then(|key| self.parent_lease_of(&key, my_id));
        let open = self.open_mut(req, compound, s.file_id)?;
        let granted = open.access;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::NOT_SUPPORTED);
        };
        // Nothing of a snapshot changes; what the handle keeps for itself
        // may (its position, its mode).
        let handle_only = s.info_type == messages::INFO_FILE
            && matches!(
                s.class,
                class::FILE_POSITION_INFORMATION | class::FILE_MODE_INFORMATION
            );
        if f.snapshot && !handle_only {
            return Err(status::MEDIA_WRITE_PROTECTED);
        }
        // A new size breaks level II oplocks (MS-FSA 2.1.5.14.4, .14.11).
        let mut breaks = (Vec::new(), Vec::new());
        // What watchers of the file's directory are told: the entries'
        // paths, the action, and the kind of change.
        let share = f.key.0;
        let here = current_path(&server, &f.key).unwrap_or_default();
        let name_class = if f.is_dir {
            filter::DIR_NAME
        } else {
            filter::FILE_NAME
        };
        let mut changed: Vec<(String, u32, u32)> = Vec::new();
        let mut seen = Vec::new();
        let mut renamed_file = None;
        let who = f.handle.who().clone();
        // What the share's audit trail may keep of this request.
        let audit_kept = !f.audit.is_empty();
        let audited = |kind| audit_kept.then(|| Audited::new(kind, here.clone()));
        let caller = Caller {
            config: &server.config,
            anonymous,
            who: &who,
        };
        if s.info_type == messages::INFO_SECURITY {
            reply.audit = audited(AuditKind::SetSecurity);
            if read_only {
                return Err(status::ACCESS_DENIED);
            }
            match made.take() {
                Some(result) => result?,
                None => {
                    // Checked in memory; what the object holds now is read,
                    // merged and written by a call.
                    let info = s.additional_information;
                    let new = security_to_set(granted, info, s.buffer)?;
                    reply.wait = Some(Wait::Call {
                        vfs: f.vfs.clone(),
                        op: CallOp::SetSecurity(Box::new(SecuritySet {
                            handle: f.handle.clone(),
                            caller: OwnedCaller::new(&server, &caller),
                            info,
                            new,
                        })),
                        then: Then::Set {
                            msg: req.msg.to_vec(),
                        },
                        mark: None,
                    });
                    return Ok(status::SUCCESS);
                }
            }
            self.report_change(share, &here, action::MODIFIED, filter::SECURITY);
            messages::write_set_info_response(w);
            return Ok(status::SUCCESS);
        }
        if s.info_type == messages::INFO_QUOTA {
            // MS-SMB2 3.3.5.21.4: only those who manage quotas.
            if read_only || !quota_admin {
                return Err(status::ACCESS_DENIED);
            }
            let limits = quota::limits_to_set(&server.config, s.buffer)?;
            if let Some(call) = change(f, Alter::Quotas(limits), &mut made, req, reply)? {
                return Ok(call);
            }
            messages::write_set_info_response(w);
            return Ok(status::SUCCESS);
        }
        if s.info_type != messages::INFO_FILE {
            return Err(if read_only {
                status::ACCESS_DENIED
            } else {
                status::NOT_SUPPORTED
            });
        }
        let need = |mask: u32| {
            if granted & mask == 0 {
                Err(status::ACCESS_DENIED)
            } else {
                Ok(())
            }
        };
        let bad = |e: fscc::InfoError| e.ntstatus();
        match s.class {
            class::FILE_BASIC_INFORMATION => {
                need(access::FILE_WRITE_ATTRIBUTES)?;
                let b = fscc::decode_basic(s.buffer).map_err(bad)?;
                let t = |v: u64| (v != 0 && v < u64::MAX - 1).then_some(v);
                let times = SetTimes {
                    creation_time: t(b.creation_time),
                    last_access_time: t(b.last_access_time),
                    last_write_time: t(b.last_write_time),
                    change_time: t(b.change_time),
                };
                // MS-FSA 2.1.5.15.2: a file cannot be made a directory,
                // nor a directory temporary.
                let kind_bit = if f.is_dir {
                    attr::TEMPORARY
                } else {
                    attr::DIRECTORY
                };
                if b.attributes & kind_bit != 0 {
                    return Err(status::INVALID_PARAMETER);
                }
                let attributes = (b.attributes != 0).then_some(b.attributes & attr::SETTABLE);
                let alter = Alter::Basic { attributes, times };
                if let Some(call) = change(f, alter, &mut made, req, reply)? {
                    return Ok(call);
                }
                let class = [
                    (b.attributes != 0, filter::ATTRIBUTES),
                    (times.creation_time.is_some(), filter::CREATION),
                    (times.last_access_time.is_some(), filter::LAST_ACCESS),
                    (times.last_write_time.is_some(), filter::LAST_WRITE),
                ]
                .iter()
                .filter(|(set, _)| *set)
                .fold(0, |c, (_, bit)| c | bit);
                if class != 0 {
                    changed.push((here.clone(), action::MODIFIED, class));
                }
            }
            class::FILE_FULL_EA_INFORMATION => {
                need(access::FILE_WRITE_EA)?;
                let eas = eas_to_set(s.buffer)?;
                if let Some(call) = change(f, Alter::Eas(eas), &mut made, req, reply)? {
                    return Ok(call);
                }
                changed.push((here.clone(), action::MODIFIED, filter::EA));
            }
            class::FILE_RENAME_INFORMATION => {
                reply.audit = audited(AuditKind::Rename);
                need(access::DELETE)?;
                let r = fscc::decode_rename(s.buffer).map_err(bad)?;
                if r.root_directory != 0 {
                    return Err(status::INVALID_PARAMETER);
                }
                if f.handle.stream.is_some() {
                    rename_stream(&server, f, my_id, &r.file_name, r.replace_if_exists)?;
                    messages::write_set_info_response(w);
                    return Ok(status::SUCCESS);
                }
                let target = rename_target(&r.file_name)?;
                if let Some(audited) = &mut reply.audit {
                    audited.to = Some(target.clone());
                }
                f.names.check_path(&target)?;
                if let Some(h) = handles_cached(&server, f, my_id, hold) {
                    return self.hold_for_leases(h, reply, hold.1);
                }
                let replace = r.replace_if_exists;
                if renames_by_call(f, &target, replace) {
                    let (op, from) = if f.vfs.descriptors_stored() {
                        // What stored descriptors allow is read by the call.
                        let (from, _) = file_state(&server, f);
                        let judging = RenameJudging {
                            caller: OwnedCaller::new(&server, &caller),
                            who: f.handle.who().clone(),
                            key: f.key,
                            is_dir: f.is_dir,
                            my_id,
                            from: from.clone(),
                            to: target.clone(),
                            replace,
                        };
                        (CallOp::RenameJudged(Box::new(judging)), from)
                    } else {
                        let from = may_rename(
                            &server,
                            &f.key,
                            f.is_dir,
                            f.vfs.as_ref(),
                            &caller,
                            my_id,
                            &target,
                            replace,
                        )?;
                        let op = CallOp::Rename {
                            who: f.handle.who().clone(),
                            from: from.clone(),
                            to: target.clone(),
                            replace,
                        };
                        (op, from)
                    };
                    let mark = server.own_changes().begin(share, &[&from, &target]);
                    reply.wait = Some(Wait::Call {
                        vfs: f.vfs.clone(),
                        op,
                        then: Then::Rename(Box::new(Renaming {
                            key: f.key,
                            is_dir: f.is_dir,
                            parent_lease,
                        })),
                        mark: Some(mark),
                    });
                    return Ok(status::SUCCESS);
                }
                let (from, to) = rename(&server, f, &caller, my_id, &target, replace)?;
                if !f.is_dir {
                    renamed_file = Some(to.clone());
                }
                changed.extend(rename_changes(from, to, name_class));
            }
            class::FILE_DISPOSITION_INFORMATION | class::FILE_DISPOSITION_INFORMATION_EX => {
                // Done, it is kept when the last close removes the file.
                reply.audit = audited(AuditKind::Delete).map(|a| Audited {
                    refusal_only: true,
                    ..a
                });
                need(access::DELETE)?;
                let delete = if s.class == class::FILE_DISPOSITION_INFORMATION {
                    fscc::decode_disposition(s.buffer).map_err(bad)?
                } else {
                    fscc::decode_u32(s.buffer).map_err(bad)? & 1 != 0
                };
                if delete {
                    if let Some(call) = change(f, Alter::Deletable, &mut made, req, reply)? {
                        return Ok(call);
                    }
                    if let Some(h) = handles_cached(&server, f, my_id, hold) {
                        return self.hold_for_leases(h, reply, hold.1);
                    }
                }
                let doomed = server.files().set_delete_pending(&f.key, delete);
                seen.extend(doomed);
            }
            class::FILE_END_OF_FILE_INFORMATION => {
                reply.audit = audited(AuditKind::Write);
                need(access::FILE_WRITE_DATA)?;
                let len = fscc::decode_u64(s.buffer).map_err(bad)?;
                if f.is_dir {
                    return Err(status::INVALID_PARAMETER);
                }
                if let Some(call) = change(f, Alter::Len(len), &mut made, req, reply)? {
                    return Ok(call);
                }
                breaks = server.files().break_level2(&f.key, my_id);
                changed.push((here.clone(), action::MODIFIED, filter::SIZE));
            }
            class::FILE_ALLOCATION_INFORMATION => {
                reply.audit = audited(AuditKind::Write);
                need(access::FILE_WRITE_DATA)?;
                let len = fscc::decode_u64(s.buffer).map_err(bad)?;
                if f.is_dir {
                    return Err(status::INVALID_PARAMETER);
                }
                if let Some(call) = change(f, Alter::Allocation(len), &mut made, req, reply)? {
                    return Ok(call);
                }
                breaks = server.files().break_level2(&f.key, my_id);
                changed.push((here.clone(), action::MODIFIED, filter::SIZE));
            }
            class::FILE_POSITION_INFORMATION => {
                f.position = fscc::decode_u64(s.buffer).map_err(bad)?;
            }
            class::FILE_MODE_INFORMATION => {
                let m = fscc::decode_u32(s.buffer).map_err(bad)?;
                if m & !MODE_SETTABLE != 0 {
                    return Err(status::INVALID_PARAMETER);
                }
                f.mode = m | (f.mode & crate::handlers::create::FILE_DELETE_ON_CLOSE);
            }
            _ => return Err(status::INVALID_INFO_CLASS),
        }
        self.send_breaks(breaks.0);
        self.send_lease_breaks(breaks.1);
        for (path, action, class) in changed {
            self.report_change(share, &path, action, class);
            self.break_parent_leases(share, &path, parent_lease);
        }
        if let Some(path) = renamed_file {
            self.report_renamed_file(share, &path);
        }
        self.seen.extend(seen);
        messages::write_set_info_response(w);
        Ok(status::SUCCESS)
    }

    fn share_name(&self, req: &Req<'_>) -> String {
        self.sessions
            .get(&req.session_id)
            .and_then(|s| s.trees.get(&req.tree_id))
            .map(|t| match &t.kind {
                crate::conn::tree::TreeKind::Disk { share, .. } => share.name.clone(),
                crate::conn::tree::TreeKind::Ipc => "IPC$".into(),
            })
            .unwrap_or_default()
    }

    fn tree_read_only(&self, req: &Req<'_>) -> bool {
        self.sessions
            .get(&req.session_id)
            .and_then(|s| s.trees.get(&req.tree_id))
            .is_some_and(|t| t.read_only)
    }
}

/// SL_RESTART_SCAN: a query of EAs starts from the first (MS-SMB2 2.2.37).
const SL_RESTART_SCAN: u32 = 0x0000_0001;
/// SL_RETURN_SINGLE_ENTRY: it returns one EA at most.
const SL_RETURN_SINGLE_ENTRY: u32 = 0x0000_0002;

/// The EAs a SET_INFO of FileFullEaInformation (or a CREATE's ExtA
/// context) gives in `buffer`, as the VFS keeps them: names in capitals,
/// as NTFS keeps them (smbtorture smb2.setinfo).
pub(crate) fn eas_to_set(buffer: &[u8]) -> Result<Vec<Ea>, NtStatus> {
    let mut list = ea::parse_full_ea_list(buffer).map_err(|e| e.ntstatus())?;
    for e in &mut list {
        e.name.make_ascii_uppercase();
    }
    Ok(list)
}

/// A query of FileFullEaInformation (MS-FSA 2.1.5.12.6) on open `f`
/// whose object has `eas`: the EAs the request's list names (one it
/// lacks with an empty value), else those after the ones the open
/// returned before (from the first with SL_RESTART_SCAN), as many as
/// fit whole, or one with SL_RETURN_SINGLE_ENTRY. The reply's data and
/// status: NO_EAS_ON_FILE without any, NO_MORE_EAS past the last,
/// BUFFER_TOO_SMALL when not one fits, BUFFER_OVERFLOW when some are
/// left out.
fn full_eas(
    f: &mut FileOpen,
    q: &QueryInfoRequest<'_>,
    eas: Vec<Ea>,
    out_len: usize,
) -> Result<(Vec<u8>, NtStatus), NtStatus> {
    let single = q.flags & SL_RETURN_SINGLE_ENTRY != 0;
    if !q.input.is_empty() {
        let asked = ea::parse_get_ea_list(q.input).map_err(|e| e.ntstatus())?;
        let named: Vec<Ea> = asked
            .into_iter()
            .map(|name| {
                let found = eas.iter().find(|e| e.name.eq_ignore_ascii_case(&name));
                found.cloned().unwrap_or(Ea {
                    flags: 0,
                    name,
                    value: Vec::new(),
                })
            })
            .collect();
        let (data, taken) = ea::fit_full_ea_list(&named, out_len, single);
        return Ok(match taken {
            0 => (Vec::new(), status::BUFFER_TOO_SMALL),
            n if n < named.len() && !single => (data, status::BUFFER_OVERFLOW),
            _ => (data, status::SUCCESS),
        });
    }
    if eas.is_empty() {
        return Err(status::NO_EAS_ON_FILE);
    }
    if q.flags & SL_RESTART_SCAN != 0 {
        f.ea_index = 0;
    }
    let rest = eas.get(f.ea_index..).unwrap_or_default();
    if rest.is_empty() {
        return Err(status::NO_MORE_EAS);
    }
    let (data, taken) = ea::fit_full_ea_list(rest, out_len, single);
    f.ea_index += taken;
    Ok(match taken {
        0 => (Vec::new(), status::BUFFER_TOO_SMALL),
        n if n < rest.len() && !single => (data, status::BUFFER_OVERFLOW),
        _ => (data, status::SUCCESS),
    })
}

fn needs_read_attributes(class: u8) -> bool {
    matches!(
        class,
        class::FILE_BASIC_INFORMATION
            | class::FILE_ALL_INFORMATION
            | class::FILE_NETWORK_OPEN_INFORMATION
            | class::FILE_ATTRIBUTE_TAG_INFORMATION
    )
}

fn file_state(server: &Server, f: &FileOpen) -> (String, bool) {
    server
        .files()
        .get(&f.key)
        .map(|s| (s.path().to_owned(), s.delete_pending))
        .unwrap_or_default()
}

/// What a share's volume looks like to a user, whose `quota` (where the
/// filesystem enforces one and it sets a limit) bounds the size and the
/// space left, as Windows shows a volume with quotas enforced; the
/// volume's own free space stays ActualAvailableAllocationUnits.
fn fs_info(
    share_name: &str,
    fs: &copyless_vfs::FsStat,
    quota: Option<&copyless_vfs::Quota>,
) -> FsInfo {
    let bytes_per_sector = 512u32;
    let unit = fs.block_size.max(bytes_per_sector);
    let (mut total_units, mut free_units) = (fs.total_blocks, fs.avail_blocks);
    if let Some((cap, used)) = quota.and_then(|q| Some((q.cap()?, q.used))) {
        let units = |bytes: u64| bytes / u64::from(unit);
        total_units = total_units.min(units(cap));
        free_units = free_units.min(units(cap.saturating_sub(used)));
    }
    let quota_flags = if fs.quotas.tracked {
        fscc::fs_attr::FILE_VC_QUOTA_TRACK
    } else {
        0
    } | if fs.quotas.enforced {
        fscc::fs_attr::FILE_VC_QUOTA_ENFORCE
    } else {
        0
    };
    FsInfo {
        volume_label: share_name.to_string(),
        serial: (fs.fs_id as u32) ^ ((fs.fs_id >> 32) as u32),
        volume_creation_time: 0,
        total_units,
        free_units,
        actual_free_units: fs.free_blocks,
        sectors_per_unit: unit / bytes_per_sector,
        bytes_per_sector,
        fs_name: "NTFS".into(),
        max_name_len: if fs.max_name_len == 0 {
            255
        } else {
            fs.max_name_len
        },
        fs_attributes: fscc::DEFAULT_FS_ATTRIBUTES
            | if fs.clones {
                fscc::fs_attr::FILE_SUPPORTS_BLOCK_REFCOUNTING
            } else {
                0
            }
            | if fs.compresses {
                fscc::fs_attr::FILE_FILE_COMPRESSION
            } else {
                0
            }
            | if fs.quotas.tracked {
                fscc::fs_attr::FILE_VOLUME_QUOTAS
            } else {
                0
            },
        object_id: [0; 16],
        quota_flags,
    }
}

/// Renames an open file: share modes first (every other open must allow
/// delete), then the VFS, then every path in the table that moved.
fn rename(
    server: &Server,
    f: &FileOpen,
    caller: &Caller<'_>,
    my_id: u64,
    target: &str,
    replace: bool,
) -> Result<(String, String), NtStatus> {
    let vfs = f.vfs.as_ref();
    let from = may_rename(
        server, &f.key, f.is_dir, vfs, caller, my_id, target, replace,
    )?;
    // Both names are the server's own change (local.rs).
    let own = server.own_changes().begin(f.key.0, &[&from, target]);
    let new_path = f
        .vfs
        .rename(f.handle.who(), &from, target, replace)
        .map_err(|e| vfs_status(&e))?;
    drop(own);
    server.files().moved(&f.key, &from, &new_path);
    Ok((from, new_path))
}

/// The share path a rename names: FileRenameInformation's FileName,
/// from the share's root.
pub(crate) fn rename_target(name: &str) -> Result<String, NtStatus> {
    let target = path::from_smb_str(name.strip_prefix('\\').unwrap_or(name))?;
    if target.is_empty() {
        return Err(status::OBJECT_NAME_INVALID);
    }
    Ok(target)
}

/// Whether a rename of an open file (not a stream) to `target` leaves
/// the VFS's rename as a call and goes on from its result with nothing
/// but memory (see [`may_rename`]): not when it may replace what is
/// there and the kernel's cache does not find that (its real name is
/// looked up first: an application's save that renames its new copy
/// over the old one finds it there). Where descriptors are stored, the
/// call also checks what they allow ([`RenameJudging`]). Both names stay
/// marked as the server's own change (local.rs) until the call is made.
pub(crate) fn renames_by_call(f: &FileOpen, target: &str, replace: bool) -> bool {
    f.handle.stream.is_none() && replaced_without_waiting(f.vfs.as_ref(), target, replace)
}

/// Whether a rename to `target` on `vfs` replaces nothing the kernel's
/// cache does not find (see [`renames_by_call`]).
pub(crate) fn replaced_without_waiting(vfs: &dyn Vfs, target: &str, replace: bool) -> bool {
    !replace || vfs.found_without_waiting(target)
}

/// A rename on a share with stored descriptors, made by the engine as a
/// call ([`CallOp::RenameJudged`]) with the checks before it (see
/// [`may_rename`]): the table's rules, what it would replace, what the
/// descriptors of the target's folder and of what it replaces allow.
#[derive(Debug)]
pub struct RenameJudging {
    caller: OwnedCaller,
    who: Identity,
    key: FileKey,
    is_dir: bool,
    my_id: u64,
    /// The open's path when the call was asked for.
    from: String,
    to: String,
    replace: bool,
}

impl RenameJudging {
    /// The share paths it acts on.
    pub(crate) fn paths(&self) -> Vec<&str> {
        vec![&self.from, &self.to]
    }

    /// Makes it through `vfs`, blocking: the open's path and its new one.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> Result<(String, String), NtStatus> {
        let caller = self.caller.caller(&self.who);
        let server = self.caller.server();
        let (key, dir, id) = (&self.key, self.is_dir, self.my_id);
        let from = may_rename(server, key, dir, vfs, &caller, id, &self.to, self.replace)?;
        let to = vfs
            .rename(&self.who, &from, &self.to, self.replace)
            .map_err(|e| vfs_status(&e))?;
        Ok((from, to))
    }
}

/// What a rename checks before the VFS moves anything: the table's rules,
/// what it would replace, the rights stored descriptors give. Returns the
/// open's current path. Reaches the filesystem only to look up what it
/// replaces (`replace`) and where descriptors are stored.
#[allow(clippy::too_many_arguments)]
fn may_rename(
    server: &Server,
    key: &FileKey,
    is_dir: bool,
    vfs: &dyn Vfs,
    caller: &Caller<'_>,
    my_id: u64,
    target: &str,
    replace: bool,
) -> Result<String, NtStatus> {
    let share = key.0;
    let from = {
        let table = server.files();
        let state = table.get(key).ok_or(status::FILE_CLOSED)?;
        if table.others_deny_delete(key, my_id) {
            return Err(status::SHARING_VIOLATION);
        }
        // Windows renames through an open of the target's folder that
        // adds an entry and shares reading and writing, never deletion: an
        // open of that folder with DELETE access, or one that does not
        // share writing, refuses it.
        let parent = path::parent(state.path());
        let target_parent = match path::parent(target) {
            p if p.eq_ignore_ascii_case(parent) => parent,
            p => p,
        };
        let adding = match is_dir {
            true => access::FILE_ADD_SUBDIRECTORY,
            false => access::FILE_WRITE_DATA,
        };
        let sharing = access::SHARE_READ | access::SHARE_WRITE;
        if table.dir_open_conflicts(share, target_parent, adding, sharing) {
            return Err(status::SHARING_VIOLATION);
        }
        // Nor does it rename a directory with anything open beneath it
        // (smb2.rename.rename_dir_openfile).
        if is_dir && table.is_open_beneath(share, state.path()) {
            return Err(status::ACCESS_DENIED);
        }
        state.path().to_owned()
    };
    let replaced = replace
        .then(|| vfs.resolve(caller.who, target).ok())
        .flatten()
        .filter(|existing| !existing.eq_ignore_ascii_case(&from));
    if replaced
        .as_ref()
        .is_some_and(|existing| server.files().is_open_at(share, existing))
    {
        return Err(status::ACCESS_DENIED);
    }
    // A folder that is not there fails the rename itself; one without a
    // stored descriptor leaves the rename to the kernel.
    let folder = vfs
        .descriptors_stored()
        .then(|| vfs.resolve(caller.who, path::parent(target)).ok())
        .flatten();
    let new_parent = match folder {
        Some(folder) => security::folder_rights(vfs, caller, &folder)?,
        None => None,
    };
    rights::rename(new_parent, is_dir, replaced.is_some(), || {
        security::stored_rights_at(vfs, caller, replaced.as_deref().unwrap_or_default())
    })?;
    Ok(from)
}

/// What watchers of the folders are told of a rename from `from` to
/// `to`: old and new name in one folder, else a removal and an addition.
fn rename_changes(from: String, to: String, name_class: u32) -> [(String, u32, u32); 2] {
    if path::parent(&from) == path::parent(&to) {
        [
            (from, action::RENAMED_OLD_NAME, name_class),
            (to, action::RENAMED_NEW_NAME, name_class),
        ]
    } else {
        [
            (from, action::REMOVED, name_class),
            (to, action::ADDED, name_class),
        ]
    }
}

/// A SET_INFO rename that waits for the VFS to move the file.
pub(crate) struct Renaming {
    key: FileKey,
    is_dir: bool,
    parent_lease: Option<LeaseId>,
}

impl Connection {
    /// A rename goes on once the VFS moved the file (or failed to).
    pub(crate) fn renamed(
        &mut self,
        r: Renaming,
        result: Result<(String, String), NtStatus>,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let (from, to) = result?;
        self.server.files().moved(&r.key, &from, &to);
        let share = r.key.0;
        let name_class = if r.is_dir {
            filter::DIR_NAME
        } else {
            filter::FILE_NAME
        };
        for (path, action, class) in rename_changes(from, to.clone(), name_class) {
            self.report_change(share, &path, action, class);
            self.break_parent_leases(share, &path, r.parent_lease);
        }
        if !r.is_dir {
            self.report_renamed_file(share, &to);
        }
        messages::write_set_info_response(w);
        Ok(status::SUCCESS)
    }
}

/// Renames the named stream open `f` is on (MS-FSA 2.1.5.15.11.1) to
/// `new_name`: `:stream[:$DATA]`, or `::$DATA` for the file's main data.
/// The open then names the stream (or main data) by its new name.
///
/// Nothing else may have the stream open: the other opens' handles name
/// it, and only this one can be moved along.
fn rename_stream(
    server: &Server,
    f: &mut FileOpen,
    my_id: u64,
    new_name: &str,
    replace: bool,
) -> Result<(), NtStatus> {
    // A path (even `file:stream`) is no new name for a stream: Windows
    // answers SHARING_VIOLATION over SMB2 (smbtorture smb2.streams.rename2).
    let Some(rest) = new_name.strip_prefix(':') else {
        return Err(status::SHARING_VIOLATION);
    };
    let (name, kind) = match rest.split_once(':') {
        Some((name, kind)) => (name, Some(kind)),
        None => (rest, None),
    };
    let bad = |c: char| matches!(c, '\\' | '/' | ':' | '\0');
    if new_name.ends_with(':')
        || rest.is_empty()
        || kind.is_some_and(|k| k.contains(':'))
        || name.chars().any(bad)
        || name.encode_utf16().count() > 255
    {
        return Err(status::INVALID_PARAMETER);
    }
    if kind.is_some_and(|k| !k.eq_ignore_ascii_case("$DATA")) {
        return Err(status::OBJECT_TYPE_MISMATCH);
    }
    let (share, dev, ino, _) = f.key;
    let mut table = server.files();
    if !table.sole_open(&f.key, my_id) {
        return Err(status::SHARING_VIOLATION);
    }
    let to_main = name.is_empty();
    let new_key = (share, dev, ino, stream_id((!to_main).then_some(name)));
    // An open target is neither replaced nor taken over.
    if new_key != f.key && table.get(&new_key).is_some() {
        return Err(if replace {
            status::ACCESS_DENIED
        } else {
            status::OBJECT_NAME_COLLISION
        });
    }
    let handle = if to_main {
        into_main_data(
            f,
            table.get(&f.key).map(|s| s.path()).unwrap_or(""),
            replace,
        )?
    } else {
        let real = f
            .vfs
            .rename_stream(&f.handle, name, replace)
            .map_err(|e| rename_status(&e))?;
        let (handle, _) = f
            .vfs
            .open_stream(&f.handle, &real, Disposition::Open)
            .map_err(|e| vfs_status(&e))?;
        handle
    };
    table.rekey(&f.key, new_key);
    f.key = new_key;
    f.handle = Arc::new(handle);
    Ok(())
}

/// Moves the data of the stream open `f` is on into the main data of its
/// file at `path`, which must be empty (it always exists), and returns a
/// handle on the main data. A directory has no main data to give.
fn into_main_data(f: &FileOpen, path: &str, replace: bool) -> Result<FileHandle, NtStatus> {
    if !replace {
        return Err(status::OBJECT_NAME_COLLISION);
    }
    let req = OpenRequest {
        who: f.handle.who(),
        path,
        disposition: Disposition::Open,
        kind: Kind::NonDirectory,
        read: true,
        write: true,
        attributes: 0,
        allocation_size: 0,
        unlink_asked: false,
    };
    let main = f.vfs.open(&req).map_err(|e| match e {
        VfsError::IsADirectory => status::INVALID_PARAMETER,
        e => vfs_status(&e),
    })?;
    if main.stat.size != 0 {
        return Err(status::INVALID_PARAMETER);
    }
    let size = f.vfs.stat(&f.handle).map_err(|e| vfs_status(&e))?.size;
    let mut data = vec![0; usize::try_from(size).map_err(|_| status::INVALID_PARAMETER)?];
    let n = f
        .vfs
        .read(&f.handle, 0, &mut data)
        .map_err(|e| vfs_status(&e))?;
    data.truncate(n);
    f.vfs
        .write(&main.handle, 0, &data)
        .and_then(|_| f.vfs.delete_stream(&f.handle))
        .map_err(|e| vfs_status(&e))?;
    Ok(main.handle)
}

/// A stream rename's failures as Windows words them: a target that is
/// not empty, or a name the store cannot hold, is an invalid parameter
/// (MS-FSA 2.1.5.15.11.1; smbtorture smb2.streams.names).
fn rename_status(e: &VfsError) -> NtStatus {
    match e {
        VfsError::NotEmpty | VfsError::InvalidName => status::INVALID_PARAMETER,
        e => vfs_status(e),
    }
}

/// The descriptor a SET_INFO of security information `info` sets, from
/// `buffer`, once the open's `granted` rights allow it (MS-FSA
/// 2.1.5.16): WRITE_OWNER for the owner and group, WRITE_DAC for the
/// DACL, ACCESS_SYSTEM_SECURITY for the SACL.
fn security_to_set(granted: u32, info: u32, buffer: &[u8]) -> Result<Descriptor, NtStatus> {
    use fscc::additional_info::*;
    let mut need = 0;
    if info & (OWNER_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION) != 0 {
        need |= access::WRITE_OWNER;
    }
    if info & DACL_SECURITY_INFORMATION != 0 {
        need |= access::WRITE_DAC;
    }
    if info & SACL_SECURITY_INFORMATION != 0 {
        need |= access::ACCESS_SYSTEM_SECURITY;
    }
    if granted & need != need {
        return Err(status::ACCESS_DENIED);
    }
    Descriptor::parse(buffer).map_err(|e| e.ntstatus())
}

/// A SET_INFO of a security descriptor (MS-SMB2 3.3.5.21.3), as a call
/// ([`CallOp::SetSecurity`]): the parts named in `info` replace the
/// stored ones, an owner only one the caller may give; the parts never
/// set stay derived from the object's owner and mode. Completes with
/// [`crate::Completion::Changed`].
pub struct SecuritySet {
    handle: Arc<FileHandle>,
    caller: OwnedCaller,
    info: u32,
    new: Descriptor,
}

impl std::fmt::Debug for SecuritySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecuritySet")
            .field("info", &self.info)
            .finish()
    }
}

impl SecuritySet {
    /// Makes it through `vfs`, blocking.
    pub(crate) fn perform(self, vfs: &dyn Vfs) -> Result<(), NtStatus> {
        use fscc::additional_info::OWNER_SECURITY_INFORMATION;
        let caller = self.caller.caller(self.handle.who());
        let stored = security::stored(vfs, &self.handle)?;
        let owner = &self.new.owner;
        if let (true, Some(owner)) = (self.info & OWNER_SECURITY_INFORMATION != 0, owner) {
            let present = match stored.as_ref().and_then(|sd| sd.owner.clone()) {
                Some(sid) => sid,
                None => {
                    let st = vfs.stat(&self.handle).map_err(|e| vfs_status(&e))?;
                    copyless_fscc::descriptor::sids::unix_user(st.uid)
                }
            };
            rights::may_take_owner(owner, &present, &caller.token())?;
        }
        let mut sd = stored.unwrap_or_default();
        sd.merge(self.new, self.info);
        vfs.set_security(&self.handle, &sd.encode(ALL_PARTS))
            .map_err(|e| vfs_status(&e))
    }
}

/// The right each part of a descriptor needs (MS-SMB2 3.3.5.20.3): the
/// owner, group, DACL and label need READ_CONTROL, the SACL
/// ACCESS_SYSTEM_SECURITY. A query for no part needs nothing and gets an
/// empty descriptor, as Windows answers.
fn security_readable(info: u32, granted: u32) -> Result<(), NtStatus> {
    use fscc::additional_info::*;
    const LABEL_SECURITY_INFORMATION: u32 = 0x0000_0010;
    let control = OWNER_SECURITY_INFORMATION
        | GROUP_SECURITY_INFORMATION
        | DACL_SECURITY_INFORMATION
        | LABEL_SECURITY_INFORMATION;
    if info & control != 0 && granted & access::READ_CONTROL == 0 {
        return Err(status::ACCESS_DENIED);
    }
    if info & SACL_SECURITY_INFORMATION != 0 && granted & access::ACCESS_SYSTEM_SECURITY == 0 {
        return Err(status::ACCESS_DENIED);
    }
    Ok(())
}
