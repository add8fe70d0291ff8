"""Oplocks between two smbprotocol clients, each on its own connection:
the break that reaches a client holding a batch oplock when another
opens the same document, as Office and Explorer rely on."""

from __future__ import annotations

from smbprotocol.connection import Dialects, Request
from smbprotocol.header import NtStatus, SMB2HeaderRequest
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              ImpersonationLevel, Open, RequestedOplockLevel, ShareAccess,
                              SMB2CreateResponse)

from test_acl import connect

READ_WRITE = 0x0012019F
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
# The MessageId of every unsolicited notification (MS-SMB2 3.3.4.6).
NOTIFICATION = 0xFFFFFFFFFFFFFFFF


def create(h: Open, level, send=True):
    return h.create(ImpersonationLevel.Impersonation, READ_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                    SHARE_ALL, CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
                    oplock_level=level, send=send)


def listen_for_notifications(connection) -> Request:
    """smbprotocol has no handler for server notifications: a request
    registered under their MessageId receives them instead."""
    listener = Request(SMB2HeaderRequest(), None, connection)
    connection.outstanding_requests[NOTIFICATION] = listener
    return listener


def test_a_batch_oplock_is_broken_when_another_client_opens_the_file(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        a = Open(first, "report.docx")
        create(a, RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH)
        assert a.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
        notifications = listen_for_notifications(first.session.connection)

        b = Open(second, "report.docx")
        msg, _ = create(b, RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH, send=False)
        opening = second.session.connection.send(msg, second.session.session_id,
                                                  second.tree_connect_id)
        assert notifications.response_event.wait(10), "no break reached the holder"
        header = notifications.response
        assert header["command"].get_value() == 0x12
        body = header["data"].get_value()
        assert body[2] == 0x01, "broken to level II"
        assert body[8:24] == a.file_id, "the holder's open"
        if opening.response_event.is_set():
            assert opening.response["status"].get_value() == NtStatus.STATUS_PENDING, \
                "the second open waits for the holder"

        # The holder gives up its handle, as Word does when another
        # program asks for the document: the second open goes through,
        # and is now the only one.
        a.close()
        reply = second.session.connection.receive(opening, timeout=10)
        created = SMB2CreateResponse()
        created.unpack(reply["data"].get_value())
        assert created["oplock_level"].get_value() == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_BATCH
        b.file_id = created["file_id"].get_value()
        b.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()
