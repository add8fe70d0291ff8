"""Byte-range locks between two smbprotocol clients, each on its own
connection, as an application such as Office takes them."""

from __future__ import annotations

from smbprotocol.connection import Dialects
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              ImpersonationLevel, LockFlags, Open, ShareAccess,
                              SMB2LockElement)

from smbprotocol.header import NtStatus

from test_acl import connect, status_of

READ_WRITE = 0x0012019F
# smbprotocol names neither status.
STATUS_FILE_LOCK_CONFLICT = 0xC0000054
STATUS_LOCK_NOT_GRANTED = 0xC0000055


def open_shared(tree, name) -> Open:
    h = Open(tree, name)
    h.create(ImpersonationLevel.Impersonation, READ_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
             CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE)
    return h


def element(offset, length, flags) -> SMB2LockElement:
    e = SMB2LockElement()
    e["offset"] = offset
    e["length"] = length
    e["flags"] = flags
    return e


def test_a_lock_taken_by_one_client_stops_the_other(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        a, b = open_shared(first, "shared.doc"), open_shared(second, "shared.doc")
        a.write(b"x" * 100, 0)
        exclusive = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        a.lock([element(0, 50, exclusive)])
        assert status_of(lambda: b.lock([element(10, 1, exclusive)])) \
            == STATUS_LOCK_NOT_GRANTED
        assert status_of(lambda: b.read(0, 10)) == STATUS_FILE_LOCK_CONFLICT
        assert status_of(lambda: b.write(b"y", 20)) == STATUS_FILE_LOCK_CONFLICT
        assert b.read(60, 10) == b"x" * 10, "beyond the lock"
        assert a.read(0, 10) == b"x" * 10, "the holder reads its own range"
        a.lock([element(0, 50, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        b.write(b"y", 20)
        assert a.read(20, 1) == b"y"
        a.close()
        b.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()


def send_lock(handle: Open, elements):
    """Sends a LOCK without waiting for its reply: the request to receive."""
    msg, _ = handle.lock(elements, send=False)
    return handle.connection.send(msg, handle.tree_connect.session.session_id,
                                  handle.tree_connect.tree_connect_id)


def assert_pending(request):
    """The request had an interim response (smbprotocol's receive with
    wait=False would forget it, so the event is watched)."""
    assert request.response_event.wait(10), "no response at all"
    assert request.response["status"].get_value() == NtStatus.STATUS_PENDING
    assert request.async_id, "the interim response names the request"


def test_a_lock_that_may_wait_is_granted_when_the_other_client_unlocks(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        a, b = open_shared(first, "waiting.doc"), open_shared(second, "waiting.doc")
        a.write(b"x" * 100, 0)
        a.lock([element(0, 50, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK)])
        waiting = send_lock(b, [element(10, 10, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK)])
        assert_pending(waiting)

        a.lock([element(0, 50, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        granted = b.connection.receive(waiting, timeout=10)
        assert granted["status"].get_value() == NtStatus.STATUS_SUCCESS
        exclusive = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        assert status_of(lambda: a.lock([element(15, 1, exclusive)])) == STATUS_LOCK_NOT_GRANTED, \
            "the waiting client holds its lock now"
        a.close()
        b.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()


def test_a_waiting_lock_ends_when_its_client_cancels_it(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        a, b = open_shared(first, "cancel.doc"), open_shared(second, "cancel.doc")
        a.lock([element(0, 50, LockFlags.SMB2_LOCKFLAG_SHARED_LOCK)])
        waiting = send_lock(b, [element(0, 1, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK)])
        assert_pending(waiting)
        waiting.cancel()
        assert status_of(lambda: b.connection.receive(waiting, timeout=10)) \
            == NtStatus.STATUS_CANCELLED
        # The cancelled request is not granted once the way is free.
        a.lock([element(0, 50, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        exclusive = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        a.lock([element(0, 1, exclusive)])
        a.close()
        b.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()
