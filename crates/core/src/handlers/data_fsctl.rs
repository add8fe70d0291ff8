//! IOCTLs on a file's data: sparse files (MS-FSCC 2.3.33, 2.3.64,
//! 2.3.65), server-side copy (MS-SMB2 3.3.5.15.5, 3.3.5.15.6) and block
//! cloning (MS-FSCC 2.3.8). What the server's tables decide (the opens
//! named, their access, byte-range locks, the request's limits) is
//! checked here, on the loop; the work on the filesystem leaves as one
//! call (handlers/fsctl.rs), so that a large copy holds up neither the
//! loop nor the connection's other requests.

use copyless_proto::fsctl::{
    self, AllocatedRange, CopyChunkCopy, CopyChunkResponse, DuplicateExtents, ZeroData,
};
use copyless_proto::messages::{self as m, FileId, IoctlRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use crate::access;
use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::conn::waiting::Wait;
use crate::env::Env;
use crate::handlers::fsctl::{Fsctl, Work};
use crate::handlers::Then;
use crate::intent::{CallOp, DataFile};
use crate::open::{FileOpen, Open, OpenKind};

/// Server-side copy's limits, as Windows Server sets them (MS-SMB2
/// 3.3.5.15.6, ServerSideCopyMaxNumberofChunks, ServerSideCopyMaxChunkSize,
/// ServerSideCopyMaxDataSize); a request beyond them is told them.
const MAX_CHUNKS: u32 = 256;
const MAX_CHUNK_LEN: u32 = 1 << 20;
const MAX_COPY_LEN: u32 = 16 << 20;

/// The file-system controls this module serves.
pub(crate) fn serves(ctl_code: u32) -> bool {
    matches!(
        ctl_code,
        fsctl::FSCTL_SRV_REQUEST_RESUME_KEY
            | fsctl::FSCTL_SRV_COPYCHUNK
            | fsctl::FSCTL_SRV_COPYCHUNK_WRITE
            | fsctl::FSCTL_SET_SPARSE
            | fsctl::FSCTL_SET_ZERO_DATA
            | fsctl::FSCTL_QUERY_ALLOCATED_RANGES
            | fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE
            | fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX
            | fsctl::FSCTL_GET_COMPRESSION
            | fsctl::FSCTL_SET_COMPRESSION
    )
}

/// What a data control needs of the open it names.
struct Target {
    file_id: FileId,
    access: u32,
    file: DataFile,
    key: crate::file_table::FileKey,
}

impl Target {
    fn of(open: &Open, f: &FileOpen) -> Target {
        Target {
            file_id: open.file_id,
            access: open.access,
            file: f.data_file(),
            key: f.key,
        }
    }
}

impl Connection {
    /// One of the controls [`serves`] says.
    pub(crate) fn data_fsctl(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        io: &IoctlRequest<'_>,
        reply: &mut Reply,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        match io.ctl_code {
            fsctl::FSCTL_SRV_REQUEST_RESUME_KEY => self.resume_key(req, compound, io, w, env),
            fsctl::FSCTL_SRV_COPYCHUNK | fsctl::FSCTL_SRV_COPYCHUNK_WRITE => {
                self.copy_chunk(req, compound, io, reply, w)
            }
            fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE | fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX => {
                self.duplicate_extents(req, compound, io, reply)
            }
            fsctl::FSCTL_GET_COMPRESSION | fsctl::FSCTL_SET_COMPRESSION => {
                self.compression(req, compound, io, reply)
            }
            _ => self.sparse_fsctl(req, compound, io, reply, w),
        }
    }

    /// The open `id` names, as a file (not a folder, not a pipe), for
    /// the control `ctl`.
    fn data_target(
        &mut self,
        req: &Req<'_>,
        compound: &Compound,
        id: FileId,
        ctl: u32,
    ) -> Result<(Target, &mut FileOpen), NtStatus> {
        let open = self.open_mut(req, compound, id)?;
        let (file_id, access) = (open.file_id, open.access);
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::INVALID_DEVICE_REQUEST);
        };
        if f.is_dir {
            return Err(status::INVALID_PARAMETER);
        }
        // Only the allocated ranges of a snapshot's file are asked, and
        // its key taken to copy from it.
        let reads_only = matches!(
            ctl,
            fsctl::FSCTL_QUERY_ALLOCATED_RANGES | fsctl::FSCTL_SRV_REQUEST_RESUME_KEY
        );
        if f.snapshot && !reads_only {
            return Err(status::MEDIA_WRITE_PROTECTED);
        }
        let target = Target {
            file_id,
            access,
            file: f.data_file(),
            key: f.key,
        };
        Ok((target, f))
    }

    /// Whether a byte-range lock of another open keeps `len` bytes at
    /// `offset` of `t` from being read (or written).
    fn locked(&self, t: &Target, offset: u64, len: u64, write: bool) -> bool {
        self.server.has_byte_locks()
            && !self
                .server
                .files()
                .may_access(&t.key, t.file_id.volatile, offset, len, write)
    }

    /// FSCTL_SRV_REQUEST_RESUME_KEY: a key that names the open as the
    /// source of a copy, random so that no other open can be guessed.
    fn resume_key(
        &mut self,
        req: &Req<'_>,
        compound: &Compound,
        io: &IoctlRequest<'_>,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        let (t, f) = self.data_target(req, compound, io.file_id, io.ctl_code)?;
        if (io.max_output_response as usize) < fsctl::RESUME_KEY_RESPONSE_LEN {
            return Err(status::INVALID_PARAMETER);
        }
        let key = *f.resume_key.get_or_insert_with(|| {
            let mut key = [0; fsctl::RESUME_KEY_LEN];
            env.fill_random(&mut key);
            key
        });
        let mut out = Writer::new();
        fsctl::write_resume_key(&mut out, &key);
        m::write_ioctl_response(w, io.ctl_code, t.file_id, &out.buf);
        Ok(status::SUCCESS)
    }

    /// FSCTL_SRV_COPYCHUNK and FSCTL_SRV_COPYCHUNK_WRITE (MS-SMB2
    /// 3.3.5.15.6), from an open of the same session named by its
    /// resume key.
    fn copy_chunk(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        io: &IoctlRequest<'_>,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let copy = CopyChunkCopy::parse(io.input).map_err(|_| status::INVALID_PARAMETER)?;
        let session = self
            .sessions
            .get(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        let source = session
            .opens
            .values()
            .find_map(|o| match &o.kind {
                OpenKind::File(f) if f.resume_key == Some(copy.source_key) => {
                    Some(Target::of(o, f))
                }
                _ => None,
            })
            .ok_or(status::OBJECT_NAME_NOT_FOUND)?;
        if (io.max_output_response as usize) < fsctl::COPYCHUNK_RESPONSE_LEN {
            return Err(status::INVALID_PARAMETER);
        }
        // The count is checked before the chunks are read.
        let chunks = (copy.chunk_count <= MAX_CHUNKS)
            .then(|| copy.chunks())
            .flatten()
            .filter(|c| within_limits(c));
        let Some(chunks) = chunks else {
            // The request is refused with the limits it broke (3.3.5.15.6.2).
            let limits = CopyChunkResponse {
                chunks_written: MAX_CHUNKS,
                chunk_bytes_written: MAX_CHUNK_LEN,
                total_bytes_written: MAX_COPY_LEN,
            };
            let file_id = self.file_id(io.file_id, compound)?;
            m::write_ioctl_response(w, io.ctl_code, file_id, &limits.to_vec());
            return Ok(status::INVALID_PARAMETER);
        };
        let (target, _) = self.data_target(req, compound, io.file_id, io.ctl_code)?;
        let reads_target = io.ctl_code == fsctl::FSCTL_SRV_COPYCHUNK;
        if target.access & access::FILE_WRITE_DATA == 0
            || (reads_target && target.access & access::FILE_READ_DATA == 0)
            || source.access & (access::FILE_READ_DATA | access::FILE_EXECUTE) == 0
        {
            return Err(status::ACCESS_DENIED);
        }
        // Chunks are copied in order: those before the first a lock
        // keeps out are, as plain reads and writes would be.
        let locked = chunks.iter().position(|c| {
            let len = u64::from(c.length);
            self.locked(&source, c.source_offset, len, false)
                || self.locked(&target, c.target_offset, len, true)
        });
        let whole = chunks.is_empty();
        if whole
            && (self.locked(&source, 0, u64::MAX, false) || self.locked(&target, 0, u64::MAX, true))
        {
            return Err(status::FILE_LOCK_CONFLICT);
        }
        self.wrote(req, compound, io.file_id)?;
        let work = if whole {
            Work::CopyFile {
                source: source.file,
                target: target.file.clone(),
            }
        } else {
            Work::CopyChunks {
                source: source.file,
                target: target.file.clone(),
                chunks,
                locked,
            }
        };
        call(reply, &target.file, target.file_id, io.ctl_code, work)
    }

    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX): a range of another open of
    /// the session, named by its file id, cloned. Unlike a copy, a clone
    /// is not held up by byte-range locks (as on Windows; smbtorture
    /// smb2.ioctl.dup_extents_src_lock and _dest_lock).
    fn duplicate_extents(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        io: &IoctlRequest<'_>,
        reply: &mut Reply,
    ) -> Result<NtStatus, NtStatus> {
        let (target, _) = self.data_target(req, compound, io.file_id, io.ctl_code)?;
        let d = if io.ctl_code == fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE_EX {
            DuplicateExtents::parse_ex(io.input)
        } else {
            DuplicateExtents::parse(io.input)
        }
        .map_err(|_| status::INVALID_PARAMETER)?;
        let (Ok(source_offset), Ok(target_offset), Ok(len)) = (
            u64::try_from(d.source_offset),
            u64::try_from(d.target_offset),
            u64::try_from(d.byte_count),
        ) else {
            return Err(status::INVALID_PARAMETER);
        };
        let session = &self.sessions[&req.session_id];
        let source = match session.opens.get(&d.source.volatile) {
            Some(o) if o.file_id == d.source => o,
            _ => return Err(status::INVALID_HANDLE),
        };
        let OpenKind::File(sf) = &source.kind else {
            return Err(status::INVALID_HANDLE);
        };
        if sf.is_dir {
            return Err(status::INVALID_PARAMETER);
        }
        if source.access & access::FILE_READ_DATA == 0
            || target.access & access::FILE_WRITE_DATA == 0
        {
            return Err(status::ACCESS_DENIED);
        }
        let source = sf.data_file();
        self.wrote(req, compound, io.file_id)?;
        let work = Work::Duplicate {
            source,
            target: target.file.clone(),
            source_offset,
            target_offset,
            len,
        };
        call(reply, &target.file, target.file_id, io.ctl_code, work)
    }

    /// FSCTL_GET_COMPRESSION and FSCTL_SET_COMPRESSION (MS-FSCC 2.3.12,
    /// 2.3.67), of a file or a folder: asking needs no right at all, as
    /// on Windows; setting needs WRITE_DATA. Where the filesystem cannot
    /// compress, a file is uncompressed, and may be set so.
    fn compression(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        io: &IoctlRequest<'_>,
        reply: &mut Reply,
    ) -> Result<NtStatus, NtStatus> {
        let file_id = self.file_id(io.file_id, compound)?;
        let open = self.open_mut(req, compound, io.file_id)?;
        let access = open.access;
        let OpenKind::File(f) = &open.kind else {
            return Err(status::INVALID_DEVICE_REQUEST);
        };
        let file = f.data_file();
        let work = if io.ctl_code == fsctl::FSCTL_GET_COMPRESSION {
            if (io.max_output_response as usize) < 2 {
                return Err(status::INVALID_PARAMETER);
            }
            Work::GetCompression { file }
        } else {
            let format = match io.input.get(..2) {
                Some(b) => u16::from_le_bytes([b[0], b[1]]),
                None => return Err(status::INVALID_PARAMETER),
            };
            if format > fsctl::COMPRESSION_FORMAT_LZNT1 {
                return Err(status::INVALID_PARAMETER);
            }
            if access & access::FILE_WRITE_DATA == 0 {
                return Err(status::ACCESS_DENIED);
            }
            if f.snapshot {
                return Err(status::MEDIA_WRITE_PROTECTED);
            }
            Work::SetCompression {
                file,
                on: format != fsctl::COMPRESSION_FORMAT_NONE,
            }
        };
        call(reply, &f.data_file(), file_id, io.ctl_code, work)
    }

    /// FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA and
    /// FSCTL_QUERY_ALLOCATED_RANGES.
    fn sparse_fsctl(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        io: &IoctlRequest<'_>,
        reply: &mut Reply,
        w: &mut Writer,
    ) -> Result<NtStatus, NtStatus> {
        let (t, _) = self.data_target(req, compound, io.file_id, io.ctl_code)?;
        let work = match io.ctl_code {
            fsctl::FSCTL_SET_SPARSE => {
                let may = access::FILE_WRITE_DATA
                    | access::FILE_APPEND_DATA
                    | access::FILE_WRITE_ATTRIBUTES;
                if t.access & may == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                Work::SetSparse {
                    file: t.file.clone(),
                    sparse: fsctl::parse_set_sparse(io.input),
                }
            }
            fsctl::FSCTL_SET_ZERO_DATA => {
                let z = ZeroData::parse(io.input).map_err(|_| status::INVALID_PARAMETER)?;
                let (Ok(offset), Ok(end)) =
                    (u64::try_from(z.offset), u64::try_from(z.beyond_final_zero))
                else {
                    return Err(status::INVALID_PARAMETER);
                };
                if offset > end {
                    return Err(status::INVALID_PARAMETER);
                }
                if t.access & access::FILE_WRITE_DATA == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                if self.locked(&t, offset, end - offset, true) {
                    return Err(status::FILE_LOCK_CONFLICT);
                }
                self.wrote(req, compound, io.file_id)?;
                Work::ZeroData {
                    file: t.file.clone(),
                    offset,
                    end,
                }
            }
            _ => {
                let r = AllocatedRange::parse(io.input).map_err(|_| status::INVALID_PARAMETER)?;
                let end = r.offset.checked_add(r.length);
                let (Ok(offset), Some(Ok(end))) = (u64::try_from(r.offset), end.map(u64::try_from))
                else {
                    return Err(status::INVALID_PARAMETER);
                };
                if r.length < 0 {
                    return Err(status::INVALID_PARAMETER);
                }
                if t.access & access::FILE_READ_DATA == 0 {
                    return Err(status::ACCESS_DENIED);
                }
                if offset == end {
                    m::write_ioctl_response(w, io.ctl_code, t.file_id, &[]);
                    return Ok(status::SUCCESS);
                }
                Work::AllocatedRanges {
                    file: t.file.clone(),
                    offset,
                    end,
                    room: io.max_output_response as usize,
                }
            }
        };
        call(reply, &t.file, t.file_id, io.ctl_code, work)
    }

    /// The open `id` names is about to have its data changed: level II
    /// oplocks on its file break, as for a WRITE, and its watchers hear
    /// of it at its close.
    fn wrote(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        id: FileId,
    ) -> Result<(), NtStatus> {
        if self.server.has_oplocks() {
            self.break_level2_for(req, compound, id)?;
        }
        if let OpenKind::File(f) = &mut self.open_mut(req, compound, id)?.kind {
            f.written = true;
        }
        Ok(())
    }
}

/// Whether a copy's chunks keep to the limits: none too long or empty,
/// not too much in all (MS-SMB2 3.3.5.15.6; their count is checked
/// before they are read).
fn within_limits(chunks: &[fsctl::Chunk]) -> bool {
    let total: u64 = chunks.iter().map(|c| u64::from(c.length)).sum();
    chunks
        .iter()
        .all(|c| c.length != 0 && c.length <= MAX_CHUNK_LEN)
        && total <= u64::from(MAX_COPY_LEN)
}

/// The reply waits for `work` on the open `file_id` of `file`, made by
/// a call through its VFS.
pub(crate) fn call(
    reply: &mut Reply,
    file: &DataFile,
    file_id: FileId,
    ctl_code: u32,
    work: Work,
) -> Result<NtStatus, NtStatus> {
    reply.wait = Some(Wait::Call {
        vfs: file.vfs.clone(),
        op: CallOp::Fsctl(Box::new(Fsctl { work })),
        then: Then::Ioctl { ctl_code, file_id },
        mark: None,
    });
    Ok(status::SUCCESS)
}
