//! The IOCTLs on a file's data, driven through the protocol core on a
//! share in memory: server-side copy (resume keys, chunks, limits, locks,
//! access), sparse files and allocated ranges, and clones where the
//! filesystem cannot clone.

use std::sync::Arc;

use copyless_proto::fsctl::{self, CopyChunkResponse};
use copyless_proto::messages::FileId;
use copyless_proto::{command, status, Writer, HEADER_LEN};
use copyless_scripted::{
    create_request_with, file_contents, lock_request, put_file, Client, Reply, Request, Users,
};
use copyless_vfs::memory::MemoryVfs;

/// FILE_READ_DATA | FILE_WRITE_DATA | FILE_APPEND_DATA | attributes,
/// EAs and READ_CONTROL: what the tests' opens ask unless they say.
const ALL: u32 = 0x0012_019f;
const READ_DATA: u32 = 0x0001;
const READ_ATTRIBUTES: u32 = 0x0080;
const LOCK_EXCLUSIVE: u32 = 0x0002;

fn login() -> (Arc<MemoryVfs>, Client) {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    (vfs, Client::login(server, "alice", "pw"))
}

/// Opens (creating if need be) `name` with `access`, sharing everything.
fn open(c: &mut Client, name: &str, access: u32) -> FileId {
    // FILE_OPEN_IF, FILE_NON_DIRECTORY_FILE.
    c.open(create_request_with(name, access, 7, 3, 0x40))
        .expect("open")
}

fn ioctl(id: FileId, ctl_code: u32, input: &[u8], max_out: u32) -> Request {
    let input = input.to_vec();
    Request::new(command::IOCTL, 1, move |w| {
        w.u16(57).u16(0).u32(ctl_code);
        w.u64(id.persistent).u64(id.volatile);
        let at = (HEADER_LEN + 56) as u32;
        w.u32(if input.is_empty() { 0 } else { at })
            .u32(input.len() as u32)
            .u32(0)
            .u32(0)
            .u32(0)
            .u32(max_out)
            .u32(1)
            .u32(0);
        w.bytes(&input);
    })
}

/// The output buffer of an IOCTL reply.
fn output(r: &Reply) -> &[u8] {
    let at = |o: usize| u32::from_le_bytes(r.msg[o..o + 4].try_into().unwrap()) as usize;
    let (offset, count) = (at(HEADER_LEN + 32), at(HEADER_LEN + 36));
    &r.msg[offset..offset + count]
}

fn resume_key(c: &mut Client, id: FileId) -> [u8; 24] {
    let r = c.call(ioctl(id, fsctl::FSCTL_SRV_REQUEST_RESUME_KEY, &[], 32));
    assert_eq!(r.status(), status::SUCCESS);
    let out = output(&r);
    assert_eq!(out.len(), 32);
    out[..24].try_into().unwrap()
}

fn copy_input(key: &[u8; 24], chunks: &[(u64, u64, u32)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(key).u32(chunks.len() as u32).u32(0);
    for &(source, target, len) in chunks {
        w.u64(source).u64(target).u32(len).u32(0);
    }
    w.into_vec()
}

fn copy_response(r: &Reply) -> CopyChunkResponse {
    let out = output(r);
    let at = |i: usize| u32::from_le_bytes(out[i..i + 4].try_into().unwrap());
    CopyChunkResponse {
        chunks_written: at(0),
        chunk_bytes_written: at(4),
        total_bytes_written: at(8),
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn chunks_are_copied_in_order_and_reported() {
    let (vfs, mut c) = login();
    let data = pattern(10_000);
    put_file(vfs.as_ref(), "src", &data);
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    // The same key again for the same open.
    assert_eq!(resume_key(&mut c, src), key);

    let input = copy_input(&key, &[(0, 0, 4096), (4096, 8192, 1000), (0, 4096, 4096)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK_WRITE, &input, 12));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(
        copy_response(&r),
        CopyChunkResponse {
            chunks_written: 3,
            chunk_bytes_written: 0,
            total_bytes_written: 9192
        }
    );
    let copied = file_contents(vfs.as_ref(), "dst");
    assert_eq!(copied.len(), 9192);
    assert_eq!(&copied[..4096], &data[..4096]);
    assert_eq!(&copied[4096..8192], &data[..4096]);
    assert_eq!(&copied[8192..], &data[4096..5096]);
}

#[test]
fn a_chunk_past_the_source_end_stops_the_copy_after_those_before() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(8192));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    let input = copy_input(&key, &[(0, 0, 4096), (4096, 4096, 8192)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::INVALID_VIEW_SIZE);
    assert_eq!(copy_response(&r).chunks_written, 1);
    assert_eq!(file_contents(vfs.as_ref(), "dst").len(), 4096);
}

#[test]
fn contiguous_chunks_are_copied_together_and_each_counted() {
    let (vfs, mut c) = login();
    let data = pattern(4500);
    put_file(vfs.as_ref(), "src", &data);
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    // Three that follow each other in both files, then one past the end.
    let run = [(0, 0, 1000), (1000, 1000, 1000), (2000, 2000, 1000)];
    let input = copy_input(&key, &[run[0], run[1], run[2], (3000, 3000, 2000)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK_WRITE, &input, 12));
    assert_eq!(r.status(), status::INVALID_VIEW_SIZE);
    let done = copy_response(&r);
    assert_eq!((done.chunks_written, done.total_bytes_written), (3, 3000));
    assert_eq!(file_contents(vfs.as_ref(), "dst"), &data[..3000]);
}

#[test]
fn within_one_file_a_chunk_reads_what_the_one_before_wrote() {
    let (vfs, mut c) = login();
    let data = pattern(8192);
    put_file(vfs.as_ref(), "f", &data);
    let f = open(&mut c, "f", ALL);
    let key = resume_key(&mut c, f);
    // The second chunk's source is the first's target.
    let input = copy_input(&key, &[(0, 4096, 4096), (4096, 8192, 4096)]);
    let r = c.call(ioctl(f, fsctl::FSCTL_SRV_COPYCHUNK_WRITE, &input, 12));
    assert_eq!(r.status(), status::SUCCESS);
    let after = file_contents(vfs.as_ref(), "f");
    assert_eq!(after.len(), 12288);
    assert_eq!(&after[4096..8192], &data[..4096]);
    assert_eq!(&after[8192..], &data[..4096]);
}

#[test]
fn requests_beyond_the_limits_are_told_the_limits() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(100));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    let limits = CopyChunkResponse {
        chunks_written: 256,
        chunk_bytes_written: 1 << 20,
        total_bytes_written: 16 << 20,
    };
    let too_many: Vec<_> = (0..257).map(|i| (0, i * 10, 10)).collect();
    let seventeen_mib: Vec<_> = (0..17).map(|i| (0, i << 20, 1 << 20)).collect();
    let requests = [
        vec![(0, 0, u32::MAX)],
        vec![(0, 0, 0)],
        too_many,
        seventeen_mib,
    ];
    for chunks in requests {
        let r = c.call(ioctl(
            dst,
            fsctl::FSCTL_SRV_COPYCHUNK,
            &copy_input(&key, &chunks),
            12,
        ));
        assert_eq!(r.status(), status::INVALID_PARAMETER);
        assert_eq!(copy_response(&r), limits);
    }
    // A count the buffer does not hold.
    let mut short = copy_input(&key, &[(0, 0, 10)]);
    short[24] = 2;
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &short, 12));
    assert_eq!(copy_response(&r), limits);
    // No room for the answer.
    let ok = copy_input(&key, &[(0, 0, 10)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &ok, 11));
    assert_eq!(r.status(), status::INVALID_PARAMETER);
    assert!(file_contents(vfs.as_ref(), "dst").is_empty());
}

#[test]
fn an_unknown_or_closed_source_is_not_found() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(100));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    let input = copy_input(&[7; 24], &[(0, 0, 10)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::OBJECT_NAME_NOT_FOUND);
    assert_eq!(c.close(src), status::SUCCESS);
    let input = copy_input(&key, &[(0, 0, 10)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::OBJECT_NAME_NOT_FOUND);
}

#[test]
fn copies_need_read_access_to_the_source_and_write_to_the_target() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(100));
    let src = open(&mut c, "src", READ_ATTRIBUTES);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    let input = copy_input(&key, &[(0, 0, 10)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::ACCESS_DENIED);

    let src = open(&mut c, "src", READ_DATA | READ_ATTRIBUTES);
    let key = resume_key(&mut c, src);
    let read_only = open(&mut c, "dst", READ_DATA | READ_ATTRIBUTES);
    let input = copy_input(&key, &[(0, 0, 10)]);
    let r = c.call(ioctl(read_only, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::ACCESS_DENIED);
    // COPYCHUNK reads the target too; COPYCHUNK_WRITE does not.
    let write_only = open(&mut c, "dst", 0x0002 | READ_ATTRIBUTES);
    let r = c.call(ioctl(write_only, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::ACCESS_DENIED);
    let r = c.call(ioctl(
        write_only,
        fsctl::FSCTL_SRV_COPYCHUNK_WRITE,
        &input,
        12,
    ));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(file_contents(vfs.as_ref(), "dst"), pattern(10));
}

#[test]
fn a_lock_on_a_chunk_stops_the_copy_there() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(8192));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let locker = open(&mut c, "src", ALL);
    assert_eq!(
        c.call(lock_request(locker, 0, &[(4096, 100, LOCK_EXCLUSIVE)]))
            .status(),
        status::SUCCESS
    );
    let key = resume_key(&mut c, src);
    let input = copy_input(&key, &[(0, 0, 4096), (4096, 4096, 4096)]);
    let r = c.call(ioctl(dst, fsctl::FSCTL_SRV_COPYCHUNK, &input, 12));
    assert_eq!(r.status(), status::FILE_LOCK_CONFLICT);
    assert_eq!(copy_response(&r).chunks_written, 1);
    assert_eq!(file_contents(vfs.as_ref(), "dst"), pattern(4096));
}

#[test]
fn no_chunks_copy_the_whole_file() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(3000));
    put_file(vfs.as_ref(), "dst", &pattern(9000));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let key = resume_key(&mut c, src);
    let r = c.call(ioctl(
        dst,
        fsctl::FSCTL_SRV_COPYCHUNK,
        &copy_input(&key, &[]),
        12,
    ));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(copy_response(&r).total_bytes_written, 3000);
    assert_eq!(file_contents(vfs.as_ref(), "dst"), pattern(3000));
}

fn ranges_input(offset: i64, length: i64) -> Vec<u8> {
    let mut w = Writer::new();
    w.u64(offset as u64).u64(length as u64);
    w.into_vec()
}

fn ranges(r: &Reply) -> Vec<(u64, u64)> {
    output(r)
        .chunks(16)
        .map(|c| {
            let at = |i: usize| u64::from_le_bytes(c[i..i + 8].try_into().unwrap());
            (at(0), at(8))
        })
        .collect()
}

#[test]
fn a_sparse_file_shows_its_holes() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "f", &pattern(3 * 65536));
    let f = open(&mut c, "f", ALL);
    let qar = fsctl::FSCTL_QUERY_ALLOCATED_RANGES;
    // Not sparse: one range, up to the end.
    let r = c.call(ioctl(f, qar, &ranges_input(1, 1 << 30), 1024));
    assert_eq!(ranges(&r), [(1, 3 * 65536 - 1)]);

    let r = c.call(ioctl(f, fsctl::FSCTL_SET_SPARSE, &[], 0));
    assert_eq!(r.status(), status::SUCCESS);
    // The middle 64 KiB zeroed: a hole between two ranges.
    let r = c.call(ioctl(
        f,
        fsctl::FSCTL_SET_ZERO_DATA,
        &ranges_input(65536, 131072),
        0,
    ));
    assert_eq!(r.status(), status::SUCCESS);
    let r = c.call(ioctl(f, qar, &ranges_input(0, 3 * 65536), 1024));
    assert_eq!(r.status(), status::SUCCESS);
    assert_eq!(ranges(&r), [(0, 65536), (131072, 65536)]);
    let data = file_contents(vfs.as_ref(), "f");
    assert_eq!(data.len(), 3 * 65536);
    assert!(data[65536..131072].iter().all(|&b| b == 0));
    assert_eq!(&data[131072..], &pattern(3 * 65536)[131072..]);

    // Room for one: the first, and more to come.
    let r = c.call(ioctl(f, qar, &ranges_input(0, 3 * 65536), 16));
    assert_eq!(r.status(), status::BUFFER_OVERFLOW);
    assert_eq!(ranges(&r), [(0, 65536)]);
    let r = c.call(ioctl(f, qar, &ranges_input(0, 3 * 65536), 0));
    assert_eq!(r.status(), status::BUFFER_TOO_SMALL);
    // Ranges that wrap or go below zero are refused.
    for (offset, length) in [(512, -1), (-1, 10), (i64::MAX, 1)] {
        let r = c.call(ioctl(f, qar, &ranges_input(offset, length), 1024));
        assert_eq!(r.status(), status::INVALID_PARAMETER);
    }
    let r = c.call(ioctl(
        f,
        fsctl::FSCTL_SET_ZERO_DATA,
        &ranges_input(10, 5),
        0,
    ));
    assert_eq!(r.status(), status::INVALID_PARAMETER);

    // No longer sparse: allocated through and through again.
    let r = c.call(ioctl(f, fsctl::FSCTL_SET_SPARSE, &[0], 0));
    assert_eq!(r.status(), status::SUCCESS);
    let r = c.call(ioctl(f, qar, &ranges_input(0, 3 * 65536), 1024));
    assert_eq!(ranges(&r), [(0, 3 * 65536)]);
}

#[test]
fn sparse_controls_check_access_and_kind() {
    let (_vfs, mut c) = login();
    let f = open(&mut c, "f", READ_ATTRIBUTES);
    let r = c.call(ioctl(f, fsctl::FSCTL_SET_SPARSE, &[], 0));
    assert_eq!(r.status(), status::ACCESS_DENIED);
    let r = c.call(ioctl(
        f,
        fsctl::FSCTL_SET_ZERO_DATA,
        &ranges_input(0, 10),
        0,
    ));
    assert_eq!(r.status(), status::ACCESS_DENIED);
    let r = c.call(ioctl(
        f,
        fsctl::FSCTL_QUERY_ALLOCATED_RANGES,
        &ranges_input(0, 10),
        64,
    ));
    assert_eq!(r.status(), status::ACCESS_DENIED);
    let dir = c.create("d", true).unwrap();
    let r = c.call(ioctl(dir, fsctl::FSCTL_SET_SPARSE, &[], 0));
    assert_eq!(r.status(), status::INVALID_PARAMETER);
}

#[test]
fn a_filesystem_that_cannot_clone_refuses_duplicate_extents() {
    let (vfs, mut c) = login();
    put_file(vfs.as_ref(), "src", &pattern(4096));
    put_file(vfs.as_ref(), "dst", &pattern(4096));
    let src = open(&mut c, "src", ALL);
    let dst = open(&mut c, "dst", ALL);
    let mut w = Writer::new();
    w.u64(src.persistent)
        .u64(src.volatile)
        .u64(0)
        .u64(0)
        .u64(4096);
    let r = c.call(ioctl(
        dst,
        fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE,
        &w.buf,
        0,
    ));
    assert_eq!(r.status(), status::INVALID_DEVICE_REQUEST);
    // A source that is no open of the session.
    let mut w = Writer::new();
    w.u64(99).u64(99).u64(0).u64(0).u64(4096);
    let r = c.call(ioctl(
        dst,
        fsctl::FSCTL_DUPLICATE_EXTENTS_TO_FILE,
        &w.buf,
        0,
    ));
    assert_eq!(r.status(), status::INVALID_HANDLE);
}

#[test]
fn compression_where_the_filesystem_has_none() {
    let (_vfs, mut c) = login();
    let f = open(&mut c, "f", ALL);
    let get = |c: &mut Client, id| c.call(ioctl(id, fsctl::FSCTL_GET_COMPRESSION, &[], 2));
    let set = |c: &mut Client, id, format: u16| {
        c.call(ioctl(
            id,
            fsctl::FSCTL_SET_COMPRESSION,
            &format.to_le_bytes(),
            0,
        ))
    };
    let r = get(&mut c, f);
    assert_eq!((r.status(), output(&r)), (status::SUCCESS, &[0u8, 0][..]));
    assert_eq!(set(&mut c, f, 1).status(), status::NOT_SUPPORTED);
    assert_eq!(set(&mut c, f, 0).status(), status::SUCCESS);
    assert_eq!(set(&mut c, f, 3).status(), status::INVALID_PARAMETER);
    // Asking needs no right; setting needs WRITE_DATA.
    let bare = open(&mut c, "f", 0x0010_0000);
    assert_eq!(get(&mut c, bare).status(), status::SUCCESS);
    assert_eq!(set(&mut c, bare, 0).status(), status::ACCESS_DENIED);
    let r = c.call(ioctl(f, fsctl::FSCTL_GET_COMPRESSION, &[], 1));
    assert_eq!(r.status(), status::INVALID_PARAMETER);
}
