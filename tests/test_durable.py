"""Durable handles with smbprotocol clients: a client whose network drops
gets its open file back, data, lock and all, on a new connection, as a
Windows client does after a Wi-Fi hiccup; and a client that is gone for
good does not keep another from the file."""

from __future__ import annotations

import uuid

from smbprotocol.connection import Dialects
from smbprotocol.create_contexts import (SMB2CreateContextRequest,
                                         SMB2CreateDurableHandleReconnectV2,
                                         SMB2CreateDurableHandleRequestV2,
                                         SMB2CreateDurableHandleResponseV2)
from smbprotocol.header import NtStatus
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              ImpersonationLevel, LockFlags, Open, RequestedOplockLevel,
                              ShareAccess)

from test_acl import connect, status_of
from test_locks import element, STATUS_LOCK_NOT_GRANTED

READ_WRITE = 0x0012019F
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
BATCH = RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH


def context(structure) -> SMB2CreateContextRequest:
    c = SMB2CreateContextRequest()
    c["buffer_name"] = structure.NAME
    c["buffer_data"] = structure
    return c


def open_durable(tree, name, create_guid) -> tuple[Open, list]:
    dh2q = SMB2CreateDurableHandleRequestV2()
    dh2q["timeout"] = 0
    dh2q["create_guid"] = create_guid
    h = Open(tree, name)
    contexts = h.create(ImpersonationLevel.Impersonation, READ_WRITE,
                        FileAttributes.FILE_ATTRIBUTE_NORMAL, SHARE_ALL,
                        CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
                        create_contexts=[context(dh2q)], oplock_level=BATCH)
    return h, contexts or []


def reclaim(tree, name, file_id, create_guid) -> Open:
    dh2c = SMB2CreateDurableHandleReconnectV2()
    dh2c["file_id"] = file_id
    dh2c["create_guid"] = create_guid
    h = Open(tree, name)
    h.create(ImpersonationLevel.Impersonation, READ_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             SHARE_ALL, CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
             create_contexts=[context(dh2c)], oplock_level=BATCH)
    return h


def drop(tree):
    """The network goes: the socket closes with no LOGOFF or CLOSE."""
    tree.session.connection.disconnect(close=False)


def test_an_open_file_survives_a_dropped_connection(server):
    guid = uuid.uuid4()
    first = connect(server, Dialects.SMB_3_1_1)
    other = connect(server, Dialects.SMB_3_1_1)
    again = None
    try:
        a, contexts = open_durable(first, "draft.docx", guid)
        assert a.oplock_level == BATCH
        granted = [c for c in contexts if isinstance(c, SMB2CreateDurableHandleResponseV2)]
        assert granted and granted[0]["timeout"].get_value() == 60_000, "kept a minute"
        a.write(b"unsaved work", 0)
        exclusive = LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY
        a.lock([element(0, 6, exclusive)])
        drop(first)

        again = connect(server, Dialects.SMB_3_1_1)
        b = reclaim(again, "draft.docx", a.file_id, guid)
        assert b.file_id == a.file_id
        assert b.oplock_level == BATCH, "the oplock came back with the open"
        assert b.read(0, 12) == b"unsaved work"

        # The lock came back too: another client still cannot take it.
        c = Open(other, "draft.docx")
        c.create(ImpersonationLevel.Impersonation, 0x80, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                 SHARE_ALL, CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
        assert status_of(lambda: c.lock([element(0, 1, exclusive)])) == STATUS_LOCK_NOT_GRANTED
        b.lock([element(0, 6, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        c.close()
        b.close()

        # Closed for good: nothing is left to reclaim.
        assert status_of(lambda: reclaim(again, "draft.docx", a.file_id, guid)) \
            == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
    finally:
        other.session.connection.disconnect()
        if again is not None:
            again.session.connection.disconnect()


def test_a_client_that_is_gone_does_not_keep_others_from_the_file(server):
    guid = uuid.uuid4()
    first = connect(server, Dialects.SMB_3_1_1)
    second = connect(server, Dialects.SMB_3_1_1)
    try:
        a, _ = open_durable(first, "shared.xlsx", guid)
        drop(first)

        # Another client opens it at once: the batch oplock of the client
        # that is gone is not waited for, and its open goes.
        b, _ = open_durable(second, "shared.xlsx", uuid.uuid4())
        assert b.oplock_level == BATCH
        b.close()

        late = connect(server, Dialects.SMB_3_1_1)
        try:
            assert status_of(lambda: reclaim(late, "shared.xlsx", a.file_id, guid)) \
                == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
        finally:
            late.session.connection.disconnect()
    finally:
        second.session.connection.disconnect()
