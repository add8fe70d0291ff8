"""A READ or a CREATE that waits on a slow disk, seen on the wire by a raw
SMB client.
The share lives on a FUSE filesystem whose reads take 1.5 s (slowfs.py).
The io_uring engine answers such a READ with an interim STATUS_PENDING
carrying an AsyncId after half a second, as Windows does for a request
that goes asynchronous, then with the data; a CANCEL naming the AsyncId
does not stop a read the disk has begun: it ends with its data, as Samba
ends one (smbtorture smb2.aio_delay.aio_cancel; MS-SMB2 3.3.5.16 leaves it
to the server). The threaded
engine waits on the
disk with the connection's own thread, so it sends the one final reply."""

from __future__ import annotations

import os
import shutil
import struct
import time

import pytest

import slowfs
from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir
from hostile import (CREATE, FILE_NON_DIRECTORY_FILE, FLAG_ASYNC, FLAG_SIGNED, READ,
                     READ_WRITE_ACCESS, STATUS_PENDING, STATUS_SUCCESS, RawSmb, create_body,
                     header, read_body)

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless",
                                reason="starts copyless on a filesystem of its own")

DELAY = 1.5
CANCEL = 0x0C
FILE_CREATE = 2


@pytest.fixture
def slow_server():
    base = make_temp_dir("slowshare")
    backing = base / "backing"
    backing.mkdir()
    (backing / "slow.bin").write_bytes(os.urandom(64 * 1024))
    mount = None

    def mount_slow(share):
        nonlocal mount
        mount = slowfs.mounted(backing, share, DELAY)
        mount.__enter__()

    running = _start_copyless(base, prepare_share=mount_slow)
    try:
        yield running, (backing / "slow.bin").read_bytes()
    finally:
        try:
            _stop_copyless(running)
        finally:
            if mount is not None:
                mount.__exit__(None, None, None)
            shutil.rmtree(base, ignore_errors=True)


def _cancel(client: RawSmb, async_id: int) -> None:
    """CANCEL of an asynchronous request: by AsyncId, no credit, signed."""
    msg = bytearray(header(CANCEL, 0, charge=0, credit_request=0,
                           session_id=client.session_id, flags=FLAG_ASYNC))
    struct.pack_into("<Q", msg, 32, async_id)
    client.send([bytes(msg) + struct.pack("<HH", 4, 0)])


def _read_slowly(client: RawSmb, file_id: bytes, length: int):
    """Sends a READ; returns the replies seen, each with when it came."""
    msg = client.message(READ, read_body(file_id, length))
    client.send([msg])
    started = time.monotonic()
    seen = []
    while True:
        for reply in client.recv_frame(timeout=3 * DELAY):
            seen.append((time.monotonic() - started, reply))
            if not (reply.status == STATUS_PENDING and reply.flags & FLAG_ASYNC):
                return seen


def test_a_read_on_a_slow_disk_goes_asynchronous_and_ends_with_its_data_even_cancelled(
        slow_server):
    running, data = slow_server
    info = running.info
    client = RawSmb.logged_in(info.host, info.port, info.user, info.password, info.share,
                              timeout=3 * DELAY)
    # Serving, the server has said which engine it runs (auto picks io_uring
    # where the kernel allows it).
    uring = "engine io_uring" in running.logs()
    try:
        status, file_id = client.create("slow.bin")
        assert status == STATUS_SUCCESS and file_id is not None, f"open: {status:#x}"
        seen = _read_slowly(client, file_id, 4096)
        final_at, final = seen[-1]
        assert final.status == STATUS_SUCCESS, f"the read ended with {final.status:#x}"
        assert final_at >= DELAY * 0.9, f"the read took {final_at:.2f} s on a {DELAY} s disk"
        got = final.body[16:16 + 4096]
        assert got == data[:4096], "the read returned other bytes than the file's"
        if not uring:
            assert len(seen) == 1, f"the threaded engine sent {len(seen)} replies"
            assert not final.flags & FLAG_ASYNC
            return

        assert len(seen) == 2, f"replies: {[(round(t, 2), hex(r.status)) for t, r in seen]}"
        interim_at, interim = seen[0]
        assert 0.4 <= interim_at < DELAY * 0.9, f"the interim reply came after {interim_at:.2f} s"
        assert interim.flags & FLAG_ASYNC and interim.async_id != 0
        assert not interim.flags & FLAG_SIGNED, "an interim reply is not signed (MS-SMB2 3.3.4.2)"
        assert interim.credits >= 1, "the interim reply grants the request's credits"
        assert final.flags & FLAG_ASYNC and final.async_id == interim.async_id
        assert final.flags & FLAG_SIGNED, "the final reply is signed as the session signs"
        assert final.credits == 0, "the interim reply granted the credits already"

        # Again, cancelled once it has gone asynchronous: the disk's read
        # runs to its end, and the client gets its data.
        msg = client.message(READ, read_body(file_id, 4096, offset=4096))
        client.send([msg])
        started = time.monotonic()
        interim = client.recv_frame(timeout=3 * DELAY)[0]
        assert interim.status == STATUS_PENDING and interim.async_id != 0
        _cancel(client, interim.async_id)
        final = client.recv_frame(timeout=3 * DELAY)[0]
        took = time.monotonic() - started
        assert final.status == STATUS_SUCCESS, f"the cancelled read ended with {final.status:#x}"
        assert final.async_id == interim.async_id
        assert final.body[16:16 + 4096] == data[4096:8192], "the cancelled read's bytes"
        assert took >= DELAY * 0.9, f"the cancelled read took {took:.2f} s on a {DELAY} s disk"
        # The connection goes on.
        status, _ = client.create("slow.bin")
        assert status == STATUS_SUCCESS
    finally:
        client.close()


def test_a_create_on_a_slow_disk_holds_up_no_other_request_of_its_connection(slow_server):
    """Two CREATEs sent one after the other on one connection: the first
    names a file the slow disk takes DELAY seconds to make, the second one
    it makes at once, in another folder. On io_uring each open is a call of its own, made
    while the other waits, and the quick one is answered first; the
    threaded engine handles a connection's requests in turn."""
    running, _ = slow_server
    info = running.info
    client = RawSmb.logged_in(info.host, info.port, info.user, info.password, info.share,
                              timeout=3 * DELAY)
    uring = "engine io_uring" in running.logs()
    # In two folders: the kernel holds a folder while it makes a name in it.
    names = ["later\\" + slowfs.SLOW_TO_CREATE + "new.txt", "quick-new.txt"]
    try:
        status, _ = client.create("later", directory=True, disposition=FILE_CREATE)
        assert status == STATUS_SUCCESS, f"mkdir: {status:#x}"
        msgs = [client.message(CREATE, create_body(name, access=READ_WRITE_ACCESS,
                                                   disposition=FILE_CREATE,
                                                   options=FILE_NON_DIRECTORY_FILE))
                for name in names]
        ids = [struct.unpack_from("<Q", m, 24)[0] for m in msgs]
        started = time.monotonic()
        for msg in msgs:
            client.send([msg])
        finals = []
        while len(finals) < 2:
            for reply in client.recv_frame(timeout=3 * DELAY):
                if not (reply.status == STATUS_PENDING and reply.flags & FLAG_ASYNC):
                    finals.append((time.monotonic() - started, reply))
        seen = [(round(t, 2), r.message_id, hex(r.status)) for t, r in finals]
        assert all(r.status == STATUS_SUCCESS for _, r in finals), seen
        order = [r.message_id for _, r in finals]
        if uring:
            assert order == ids[::-1], f"the quick create waited for the slow one: {seen}"
            assert finals[0][0] < DELAY / 2, seen
        else:
            assert order == ids, seen
        assert finals[-1][0] >= DELAY * 0.9, f"the slow create took no time: {seen}"
        for name in names:
            status, _ = client.create(name)
            assert status == STATUS_SUCCESS, f"{name} was not made: {status:#x}"
    finally:
        client.close()
