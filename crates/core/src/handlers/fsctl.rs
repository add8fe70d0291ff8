//! What the file-system controls of an IOCTL do to a file's data: made
//! sparse, zeroed, asked for its allocated ranges, copied or cloned
//! from another file. Each is one call ([`CallOp::Fsctl`](crate::CallOp))
//! made where it may wait for a disk; the request's checks that need
//! only the server's tables (access, byte-range locks, the source's
//! key) are made before, by handlers/data_fsctl.rs and ioctl.rs.

use std::sync::Arc;

use copyless_proto::fsctl::{self, AllocatedRange, Chunk, CopyChunkResponse};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;

use copyless_vfs::snapshots::{self, Snapshots};
use copyless_vfs::{attr, FileStat, Identity, VfsError, VfsResult};

use crate::handlers::vfs_status;
use crate::intent::DataFile;

/// The most a fallback copy holds in memory at once.
const COPY_BUFFER: usize = 1 << 20;

/// The call: `work` on files of the share whose VFS makes it.
#[derive(Debug)]
pub struct Fsctl {
    pub(crate) work: Work,
}

#[derive(Debug)]
pub(crate) enum Work {
    /// FSCTL_SET_SPARSE.
    SetSparse { file: DataFile, sparse: bool },
    /// FSCTL_GET_COMPRESSION.
    GetCompression { file: DataFile },
    /// FSCTL_SET_COMPRESSION: compressed or not.
    SetCompression { file: DataFile, on: bool },
    /// FSCTL_SET_ZERO_DATA of `offset..end`.
    ZeroData {
        file: DataFile,
        offset: u64,
        end: u64,
    },
    /// FSCTL_QUERY_ALLOCATED_RANGES of `offset..end`, answered in at
    /// most `room` bytes.
    AllocatedRanges {
        file: DataFile,
        offset: u64,
        end: u64,
        room: usize,
    },
    /// FSCTL_SRV_COPYCHUNK(_WRITE): `chunks` in order, stopping at the
    /// first that fails, or at the one another open's byte-range lock
    /// covers (`locked`, found before).
    CopyChunks {
        source: DataFile,
        target: DataFile,
        chunks: Vec<Chunk>,
        locked: Option<usize>,
    },
    /// A SRV_COPYCHUNK_COPY without chunks: the whole source, as macOS
    /// asks for it when it duplicates a file.
    CopyFile { source: DataFile, target: DataFile },
    /// FSCTL_SRV_ENUMERATE_SNAPSHOTS: the share's snapshots that hold
    /// `path` (as `who` finds it), answered in at most `room` bytes.
    Snapshots {
        snapshots: Option<Arc<Snapshots>>,
        who: Identity,
        path: String,
        room: usize,
    },
    /// FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX).
    Duplicate {
        source: DataFile,
        target: DataFile,
        source_offset: u64,
        target_offset: u64,
        len: u64,
    },
}

/// What the reply carries: its status and output, or an error alone.
pub(crate) type Done = Result<(NtStatus, Vec<u8>), NtStatus>;

impl Fsctl {
    /// Makes it, blocking.
    pub(crate) fn perform(&self) -> Done {
        let fs = |e: VfsError| vfs_status(&e);
        match &self.work {
            Work::SetSparse { file, sparse } => {
                file.vfs.set_sparse(&file.handle, *sparse).map_err(fs)?;
                Ok((status::SUCCESS, Vec::new()))
            }
            Work::GetCompression { file } => {
                let st = file.vfs.stat(&file.handle).map_err(fs)?;
                let format = if st.attributes & attr::COMPRESSED != 0 {
                    fsctl::COMPRESSION_FORMAT_LZNT1
                } else {
                    fsctl::COMPRESSION_FORMAT_NONE
                };
                Ok((status::SUCCESS, format.to_le_bytes().to_vec()))
            }
            Work::SetCompression { file, on } => {
                match file.vfs.set_compression(&file.handle, *on) {
                    Ok(()) => {}
                    // Uncompressed is what a file here always is.
                    Err(VfsError::NotSupported) if !on => {}
                    Err(e) => return Err(fs(e)),
                }
                Ok((status::SUCCESS, Vec::new()))
            }
            Work::ZeroData { file, offset, end } => {
                let st = file.vfs.stat(&file.handle).map_err(fs)?;
                let end = (*end).min(st.size);
                if *offset < end {
                    let sparse = st.attributes & attr::SPARSE_FILE != 0;
                    file.vfs
                        .zero_range(&file.handle, *offset, end - offset, sparse)
                        .map_err(fs)?;
                }
                Ok((status::SUCCESS, Vec::new()))
            }
            Work::AllocatedRanges {
                file,
                offset,
                end,
                room,
            } => allocated_ranges(file, *offset, *end, *room).map_err(fs),
            Work::CopyChunks {
                source,
                target,
                chunks,
                locked,
            } => Ok(copy_chunks(source, target, chunks, *locked)),
            Work::CopyFile { source, target } => copy_file(source, target).map_err(fs),
            Work::Duplicate {
                source,
                target,
                source_offset,
                target_offset,
                len,
            } => duplicate(source, target, *source_offset, *target_offset, *len),
            Work::Snapshots {
                snapshots,
                who,
                path,
                room,
            } => {
                let times = match snapshots {
                    Some(s) => versions(s, who, path).map_err(fs)?,
                    None => Vec::new(),
                };
                Ok((status::SUCCESS, snapshot_array(&times, *room)))
            }
        }
    }
}

/// The times of the snapshots in which `path` is, newest first: the
/// previous versions of that file or folder (MS-SMB2 3.3.5.15.1).
fn versions(snapshots: &Snapshots, who: &Identity, path: &str) -> VfsResult<Vec<u64>> {
    let mut found = Vec::new();
    for (time, tree) in snapshots.list()? {
        // One that cannot be opened (a snapper folder without its
        // snapshot) is no version.
        let Ok(vfs) = snapshots.open(time, &tree) else {
            continue;
        };
        if path.is_empty() || vfs.resolve(who, path).is_ok() {
            found.push(time);
        }
    }
    Ok(found)
}

/// SRV_SNAPSHOT_ARRAY (MS-SMB2 2.2.32.2): the count, and the tokens
/// when they fit in `room` with the header; when they do not, the size
/// they need, which a client asks again with.
fn snapshot_array(times: &[u64], room: usize) -> Vec<u8> {
    let mut tokens = Writer::new();
    for &t in times {
        for unit in snapshots::token(t).encode_utf16().chain([0]) {
            tokens.u16(unit);
        }
    }
    tokens.u16(0);
    let fits = 12 + tokens.len() <= room;
    let mut w = Writer::new();
    w.u32(times.len() as u32)
        .u32(if fits { times.len() as u32 } else { 0 })
        .u32(tokens.len() as u32);
    if fits {
        w.bytes(&tokens.buf);
    } else {
        // As Windows: the header, and room for the terminator.
        w.u32(0);
    }
    w.into_vec()
}

/// A non-sparse file is allocated through and through (MS-FSA
/// 2.1.5.10.22): one range, up to its end; a sparse one has its holes
/// left out.
fn allocated_ranges(
    file: &DataFile,
    offset: u64,
    end: u64,
    room: usize,
) -> VfsResult<(NtStatus, Vec<u8>)> {
    let st = file.vfs.stat(&file.handle)?;
    let end = end.min(st.size);
    let fit = room / fsctl::ALLOCATED_RANGE_LEN;
    let ranges = if st.attributes & attr::SPARSE_FILE == 0 {
        (offset < end).then_some(offset..end).into_iter().collect()
    } else {
        // One more than fits, to know whether they all do.
        file.vfs
            .allocated_ranges(&file.handle, offset, end, fit + 1)?
    };
    if ranges.len() > fit && fit == 0 {
        return Ok((status::BUFFER_TOO_SMALL, Vec::new()));
    }
    let mut w = Writer::new();
    for r in ranges.iter().take(fit) {
        AllocatedRange {
            offset: r.start as i64,
            length: (r.end - r.start) as i64,
        }
        .write(&mut w);
    }
    let status = if ranges.len() > fit {
        status::BUFFER_OVERFLOW
    } else {
        status::SUCCESS
    };
    Ok((status, w.into_vec()))
}

/// Copies the chunks in order, up to the first that reaches past the
/// source's end (INVALID_VIEW_SIZE) or is `locked` (FILE_LOCK_CONFLICT),
/// saying how far it got. Between two files (or streams), a run of
/// chunks each going on where the one before ended, in both, is one
/// copy: a client copying a file sends 16 such chunks of 1 MiB a request,
/// and one call shares or copies them as well as sixteen. Within one
/// file each chunk is copied on its own, after the one before: a later
/// chunk may read what an earlier one wrote.
fn copy_chunks(
    source: &DataFile,
    target: &DataFile,
    chunks: &[Chunk],
    locked: Option<usize>,
) -> (NtStatus, Vec<u8>) {
    let mut done = CopyChunkResponse::default();
    let status = match copy_runs(source, target, chunks, locked, &mut done) {
        Ok(()) => status::SUCCESS,
        Err(status) => status,
    };
    (status, done.to_vec())
}

fn copy_runs(
    source: &DataFile,
    target: &DataFile,
    chunks: &[Chunk],
    locked: Option<usize>,
    done: &mut CopyChunkResponse,
) -> Result<(), NtStatus> {
    let fs = |e: VfsError| vfs_status(&e);
    let src = source.vfs.stat(&source.handle).map_err(fs)?;
    let dst = target.vfs.stat(&target.handle).map_err(fs)?;
    let one_file =
        (src.dev, src.ino) == (dst.dev, dst.ino) && source.handle.stream == target.handle.stream;
    let locked = locked.filter(|&i| i < chunks.len());
    let copyable = locked.unwrap_or(chunks.len());
    let mut size = src.size;
    let mut at = 0;
    while at < copyable {
        // Within one file, what the chunk before wrote may have grown it.
        if one_file && at > 0 {
            size = source.vfs.stat(&source.handle).map_err(fs)?.size;
        }
        // A chunk must lie inside the source's data (MS-SMB2
        // 3.3.5.15.6: STATUS_INVALID_VIEW_SIZE as Windows sends it).
        let inside = |c: &Chunk| {
            c.source_offset
                .checked_add(u64::from(c.length))
                .is_some_and(|end| end <= size)
        };
        let first = &chunks[at];
        if !inside(first) {
            return Err(status::INVALID_VIEW_SIZE);
        }
        let mut len = u64::from(first.length);
        let mut end = at + 1;
        while !one_file
            && end < copyable
            && inside(&chunks[end])
            && chunks[end].source_offset == first.source_offset + len
            && chunks[end].target_offset == first.target_offset + len
        {
            len += u64::from(chunks[end].length);
            end += 1;
        }
        let mut copied = copy(
            source,
            first.source_offset,
            target,
            first.target_offset,
            len,
        )
        .map_err(fs)?;
        for c in &chunks[at..end] {
            let n = u64::from(c.length);
            if copied < n {
                // The source shrank meanwhile.
                done.chunk_bytes_written = copied as u32;
                return Err(status::INVALID_VIEW_SIZE);
            }
            copied -= n;
            done.chunks_written += 1;
            done.total_bytes_written += c.length;
        }
        at = end;
    }
    match locked {
        Some(_) => Err(status::FILE_LOCK_CONFLICT),
        None => Ok(()),
    }
}

/// The whole source's data over the target's, which ends where the
/// source does.
fn copy_file(source: &DataFile, target: &DataFile) -> VfsResult<(NtStatus, Vec<u8>)> {
    let size = source.vfs.stat(&source.handle)?.size;
    target.vfs.set_len(&target.handle, 0)?;
    let copied = copy(source, 0, target, 0, size)?;
    let done = CopyChunkResponse {
        chunks_written: 0,
        chunk_bytes_written: 0,
        total_bytes_written: u32::try_from(copied).unwrap_or(u32::MAX),
    };
    Ok((status::SUCCESS, done.to_vec()))
}

/// Clones a range, as ReFS does (MS-FSA 2.1.5.10.8): the source's range
/// inside its file, never from a sparse file into one that is not, never
/// onto itself; a range past the target's end is cut there, as Windows
/// cuts it (it never grows the target).
fn duplicate(
    source: &DataFile,
    target: &DataFile,
    source_offset: u64,
    target_offset: u64,
    len: u64,
) -> Result<(NtStatus, Vec<u8>), NtStatus> {
    let fs = |e: VfsError| vfs_status(&e);
    if !target.vfs.fs_stat().map_err(fs)?.clones {
        return Err(status::INVALID_DEVICE_REQUEST);
    }
    let src = source.vfs.stat(&source.handle).map_err(fs)?;
    let dst = target.vfs.stat(&target.handle).map_err(fs)?;
    if source_offset.checked_add(len).is_none() || target_offset.checked_add(len).is_none() {
        return Err(status::INVALID_PARAMETER);
    }
    if source_offset + len > src.size {
        return Err(status::NOT_SUPPORTED);
    }
    let len = len.min(
        dst.size
            .checked_sub(target_offset)
            .ok_or(status::INVALID_PARAMETER)?,
    );
    if len == 0 {
        return Ok((status::SUCCESS, Vec::new()));
    }
    let sparse = |st: &FileStat| st.attributes & attr::SPARSE_FILE != 0;
    let same =
        (src.dev, src.ino) == (dst.dev, dst.ino) && source.handle.stream == target.handle.stream;
    let overlap =
        same && source_offset < target_offset + len && target_offset < source_offset + len;
    if overlap || (sparse(&src) && !sparse(&dst)) {
        return Err(status::NOT_SUPPORTED);
    }
    let copied = copy(source, source_offset, target, target_offset, len).map_err(fs)?;
    if copied < len {
        return Err(status::NOT_SUPPORTED);
    }
    Ok((status::SUCCESS, Vec::new()))
}

/// Copies `len` bytes inside the filesystem where the target's VFS can,
/// else through memory a piece at a time: the bytes copied, fewer only
/// at the end of the source.
fn copy(
    source: &DataFile,
    source_offset: u64,
    target: &DataFile,
    target_offset: u64,
    len: u64,
) -> VfsResult<u64> {
    match target.vfs.copy_range(
        &source.handle,
        source_offset,
        &target.handle,
        target_offset,
        len,
    ) {
        Err(VfsError::NotSupported) => {}
        done => return done,
    }
    let mut buf = vec![0; COPY_BUFFER.min(usize::try_from(len).unwrap_or(usize::MAX))];
    let mut done = 0;
    while done < len {
        let want = buf
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let n = source
            .vfs
            .read(&source.handle, source_offset + done, &mut buf[..want])?;
        if n == 0 {
            break;
        }
        target
            .vfs
            .write(&target.handle, target_offset + done, &buf[..n])?;
        done += n as u64;
    }
    Ok(done)
}
