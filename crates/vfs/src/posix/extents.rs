//! Where a file's data lies and how it moves: read and written whole at
//! an offset, holes punched and filled, allocated ranges found with
//! SEEK_DATA and SEEK_HOLE, ranges copied with `copy_file_range`, which
//! clones blocks where the filesystem shares them (btrfs, XFS) and
//! copies in the kernel elsewhere.

use std::ops::Range;
use std::os::fd::BorrowedFd;

use rustix::fs::{copy_file_range, fallocate, seek, FallocateFlags, SeekFrom};
use rustix::io::{pread, pwrite, Errno};

use super::errno::io_err;
use crate::{VfsError, VfsResult};

/// What the fallback copies at a time: a copy-chunk's largest chunk, so
/// that a chunk whose source and target overlap in one file is read
/// whole before it is written, as Windows Server 2012 and later do.
const COPY_BUFFER: usize = 1 << 20;

/// Zeroes `len` bytes at `offset`; `deallocate` gives the blocks back.
pub fn zero(fd: BorrowedFd<'_>, offset: u64, len: u64, deallocate: bool) -> VfsResult<()> {
    if len == 0 {
        return Ok(());
    }
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    match fallocate(fd, punch, offset, len) {
        Ok(()) if deallocate => Ok(()),
        Ok(()) => allocate(fd, offset, len),
        // A filesystem without holes: write the zeros.
        Err(Errno::OPNOTSUPP) => write_zeros(fd, offset, len),
        Err(e) => Err(io_err(e)),
    }
}

/// Allocates `len` bytes at `offset` where they are holes, keeping the
/// size; a filesystem that cannot is left as it is (allocation is a
/// promise of space, never of data).
pub fn allocate(fd: BorrowedFd<'_>, offset: u64, len: u64) -> VfsResult<()> {
    if len == 0 {
        return Ok(());
    }
    match fallocate(fd, FallocateFlags::KEEP_SIZE, offset, len) {
        Ok(()) | Err(Errno::OPNOTSUPP) => Ok(()),
        Err(e) => Err(io_err(e)),
    }
}

fn write_zeros(fd: BorrowedFd<'_>, offset: u64, len: u64) -> VfsResult<()> {
    let zeros = vec![0; COPY_BUFFER.min(len as usize)];
    let mut done = 0;
    while done < len {
        let n = zeros.len().min((len - done) as usize);
        write_at(fd, offset + done, &zeros[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// The allocated ranges from `offset` to `end`, at most `limit`.
pub fn data_ranges(
    fd: BorrowedFd<'_>,
    offset: u64,
    end: u64,
    limit: usize,
) -> VfsResult<Vec<Range<u64>>> {
    let mut ranges: Vec<Range<u64>> = Vec::new();
    let mut at = offset;
    while at < end && ranges.len() < limit {
        let data = match seek_to(fd, SeekFrom::Data(at))? {
            Some(d) if d < end => d,
            _ => break,
        };
        let hole = seek_to(fd, SeekFrom::Hole(data))?.unwrap_or(end).min(end);
        if hole <= data {
            break;
        }
        match ranges.last_mut() {
            Some(last) if last.end == data => last.end = hole,
            _ => ranges.push(data..hole),
        }
        at = hole;
    }
    Ok(ranges)
}

/// Where SEEK_DATA or SEEK_HOLE lands; None past the end of the data
/// (ENXIO).
fn seek_to(fd: BorrowedFd<'_>, to: SeekFrom) -> VfsResult<Option<u64>> {
    match seek(fd, to) {
        Ok(at) => Ok(Some(at)),
        Err(Errno::NXIO) => Ok(None),
        Err(e) => Err(io_err(e)),
    }
}

/// Copies `len` bytes from `src` at `src_offset` to `dst` at
/// `dst_offset`: the bytes copied, fewer only at the end of `src`.
pub fn copy(
    src: BorrowedFd<'_>,
    src_offset: u64,
    dst: BorrowedFd<'_>,
    dst_offset: u64,
    len: u64,
) -> VfsResult<u64> {
    let mut done = 0;
    while done < len {
        let mut from = src_offset + done;
        let mut to = dst_offset + done;
        let want = usize::try_from(len - done).unwrap_or(usize::MAX);
        match copy_file_range(src, Some(&mut from), dst, Some(&mut to), want) {
            Ok(0) => break,
            Ok(n) => done += n as u64,
            Err(Errno::INTR) => {}
            // Overlapping ranges of one file, another filesystem, or a
            // kernel or filesystem without it: through memory.
            Err(Errno::INVAL | Errno::XDEV | Errno::OPNOTSUPP | Errno::NOSYS) => {
                return Ok(done + copy_through_memory(src, from, dst, to, len - done)?);
            }
            Err(e) => return Err(io_err(e)),
        }
    }
    Ok(done)
}

fn copy_through_memory(
    src: BorrowedFd<'_>,
    src_offset: u64,
    dst: BorrowedFd<'_>,
    dst_offset: u64,
    len: u64,
) -> VfsResult<u64> {
    let mut buf = vec![0; COPY_BUFFER.min(usize::try_from(len).unwrap_or(usize::MAX))];
    let mut done = 0;
    while done < len {
        let want = buf
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let n = read_at(src, src_offset + done, &mut buf[..want])?;
        if n == 0 {
            break;
        }
        write_at(dst, dst_offset + done, &buf[..n])?;
        done += n as u64;
        if n < want {
            break;
        }
    }
    Ok(done)
}

/// Reads at `offset` until `buf` is full or the data ends: the bytes
/// read.
pub fn read_at(fd: BorrowedFd<'_>, offset: u64, buf: &mut [u8]) -> VfsResult<usize> {
    let mut done = 0;
    while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
        let at = offset
            .checked_add(done as u64)
            .ok_or(VfsError::Io(Errno::INVAL.into()))?;
        match pread(fd, rest, at) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    Ok(done)
}

/// Writes all of `data` at `offset`.
pub fn write_at(fd: BorrowedFd<'_>, offset: u64, data: &[u8]) -> VfsResult<()> {
    let mut done = 0;
    while let Some(rest) = data.get(done..).filter(|r| !r.is_empty()) {
        let at = offset
            .checked_add(done as u64)
            .ok_or(VfsError::Io(Errno::INVAL.into()))?;
        match pwrite(fd, rest, at) {
            Ok(0) => return Err(VfsError::Io(Errno::IO.into())),
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(io_err(e)),
        }
    }
    Ok(())
}
