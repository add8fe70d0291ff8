"""Leases between two smbprotocol clients, each on its own connection, as
Windows Explorer and Office cache a document under one: the first client
holds read, handle and write caching, and the second opening the file to
write breaks its write caching."""

from __future__ import annotations

import os
import struct
from collections import OrderedDict

import pytest
from smbprotocol.connection import Capabilities, Dialects
from smbprotocol.create_contexts import (CreateContextName, LeaseState, SMB2CreateContextRequest,
                                         SMB2CreateRequestLease)
from smbprotocol.header import Commands, NtStatus
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              ImpersonationLevel, Open, RequestedOplockLevel, ShareAccess,
                              SMB2CreateResponse)
from smbprotocol.structure import BytesField, Structure

from conftest import SERVER_KIND
from test_acl import connect
from test_oplocks import listen_for_notifications

READ_WRITE = 0x0012019F
SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
RWH = (LeaseState.SMB2_LEASE_READ_CACHING | LeaseState.SMB2_LEASE_HANDLE_CACHING
       | LeaseState.SMB2_LEASE_WRITE_CACHING)


def lease_context(key: bytes, state) -> SMB2CreateContextRequest:
    lease = SMB2CreateRequestLease()
    lease["lease_key"] = key
    lease["lease_state"] = state
    context = SMB2CreateContextRequest()
    context["buffer_name"] = CreateContextName.SMB2_CREATE_REQUEST_LEASE
    context["buffer_data"] = lease
    return context


def create(h: Open, key: bytes, send=True):
    return h.create(ImpersonationLevel.Impersonation, READ_WRITE, FileAttributes.FILE_ATTRIBUTE_NORMAL,
                    SHARE_ALL, CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE,
                    create_contexts=[lease_context(key, RWH)],
                    oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE, send=send)


class LeaseBreakAck(Structure):
    """An SMB2 Lease Break Acknowledgment (MS-SMB2 2.2.24.2), which
    smbprotocol does not model: its bytes as given."""

    COMMAND = Commands.SMB2_OPLOCK_BREAK

    def __init__(self, body: bytes = b""):
        self.fields = OrderedDict([("body", BytesField(size=len(body), default=body))])
        super().__init__()


def send_lease_ack(tree, body: bytes) -> bytes:
    connection = tree.session.connection
    request = connection.send(LeaseBreakAck(body), tree.session.session_id, tree.tree_connect_id)
    return connection.receive(request, timeout=10)["data"].get_value()


def granted_state(contexts) -> int:
    (lease,) = [c for c in contexts if hasattr(c, "fields") and "lease_state" in c.fields]
    return lease["lease_state"].get_value()


def test_opening_for_write_breaks_the_other_clients_write_caching(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        a = Open(first, "budget.xlsx")
        contexts = create(a, os.urandom(16))
        assert a.oplock_level == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE
        assert granted_state(contexts) == RWH, "the only user caches everything"
        notifications = listen_for_notifications(first.session.connection)

        b = Open(second, "budget.xlsx")
        msg, _ = create(b, os.urandom(16), send=False)
        opening = second.session.connection.send(msg, second.session.session_id,
                                                  second.tree_connect_id)
        assert notifications.response_event.wait(10), "no lease break reached the first client"
        body = notifications.response["data"].get_value()
        size, _epoch, flags = struct.unpack_from("<HHI", body)
        current, new = struct.unpack_from("<II", body, 24)
        assert size == 44
        assert flags & 0x01, "the break wants an acknowledgment"
        assert (current, new) == (RWH, RWH & ~LeaseState.SMB2_LEASE_WRITE_CACHING), \
            "write caching goes, read and handle caching stay"
        if opening.response_event.is_set():
            assert opening.response["status"].get_value() == NtStatus.STATUS_PENDING, \
                "the second open waits for the acknowledgment"

        # The first client flushes its cached writes and acknowledges.
        ack = struct.pack("<HHI16sIQ", 36, 0, 0, body[8:24], new, 0)
        response = send_lease_ack(first, ack)
        assert struct.unpack_from("<I", response, 24)[0] == new, "the response names the state"

        reply = second.session.connection.receive(opening, timeout=10)
        created = SMB2CreateResponse()
        created.unpack(reply["data"].get_value())
        assert created["oplock_level"].get_value() == RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE
        a.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()


def test_a_folder_lease_breaks_when_a_local_process_adds_a_file(server):
    """Explorer caches a folder's listing under a directory lease (SMB 3);
    a program on the NAS itself that saves a file there must break it, as
    another client's change does, or the listing goes stale."""
    from smbprotocol.create_contexts import SMB2CreateRequestLeaseV2

    (server.share_path / "inbox").mkdir()
    tree = connect(server, Dialects.SMB_3_1_1, Capabilities.SMB2_GLOBAL_CAP_DIRECTORY_LEASING)
    try:
        key = os.urandom(16)
        lease = SMB2CreateRequestLeaseV2()
        lease["lease_key"] = key
        lease["lease_state"] = (LeaseState.SMB2_LEASE_READ_CACHING
                                | LeaseState.SMB2_LEASE_HANDLE_CACHING)
        lease["parent_lease_key"] = bytes(16)
        lease["epoch"] = 0
        context = SMB2CreateContextRequest()
        context["buffer_name"] = CreateContextName.SMB2_CREATE_REQUEST_LEASE_V2
        context["buffer_data"] = lease
        folder = Open(tree, "inbox")
        contexts = folder.create(ImpersonationLevel.Impersonation, 0x00100081,
                                 FileAttributes.FILE_ATTRIBUTE_DIRECTORY, SHARE_ALL,
                                 CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE,
                                 create_contexts=[context],
                                 oplock_level=RequestedOplockLevel.SMB2_OPLOCK_LEVEL_LEASE)
        assert granted_state(contexts) == (LeaseState.SMB2_LEASE_READ_CACHING
                                           | LeaseState.SMB2_LEASE_HANDLE_CACHING)
        notifications = listen_for_notifications(tree.session.connection)

        (server.share_path / "inbox" / "scan-0001.pdf").write_bytes(b"%PDF")

        assert notifications.response_event.wait(10), "no break reached the client"
        header = notifications.response
        assert header["command"].get_value() == Commands.SMB2_OPLOCK_BREAK
        body = header["data"].get_value()
        assert len(body) == 44, "a lease break notification"
        assert body[8:24] == key
        new_state = struct.unpack_from("<I", body, 28)[0]
        assert new_state == 0, "the listing is no longer cached"
        folder.close()
    finally:
        tree.session.connection.disconnect()


@pytest.mark.parametrize("asked", [0, Capabilities.SMB2_GLOBAL_CAP_DIRECTORY_LEASING
                                   | Capabilities.SMB2_GLOBAL_CAP_MULTI_CHANNEL])
def test_directory_leasing_and_multichannel_are_offered_only_when_asked(server, asked):
    """A client whose NEGOTIATE does not ask for directory leasing or
    multichannel is not told of them (MS-SMB2 3.3.5.4), as Windows and Samba
    do: one widely used client library fails every CREATE outside the share
    root when told of directory leasing it did not ask for."""
    both = (Capabilities.SMB2_GLOBAL_CAP_DIRECTORY_LEASING
            | Capabilities.SMB2_GLOBAL_CAP_MULTI_CHANNEL)
    tree = connect(server, Dialects.SMB_3_1_1, asked)
    try:
        offered = tree.session.connection.server_capabilities.get_value()
        if SERVER_KIND == "copyless":
            assert offered & both == asked
        else:
            assert offered & both & ~asked == 0
        # Work goes on as usual beneath the root.
        folder = Open(tree, "asked-nothing")
        folder.create(ImpersonationLevel.Impersonation, 0x00100081,
                      FileAttributes.FILE_ATTRIBUTE_DIRECTORY, SHARE_ALL,
                      CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_DIRECTORY_FILE)
        folder.close()
    finally:
        tree.session.connection.disconnect()
