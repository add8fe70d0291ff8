"""NT security descriptors set by a client are kept, inherited and enforced.

Driven with smbprotocol's low-level client: the descriptors are built and
parsed by its own security_descriptor module, not by ours.
"""

from __future__ import annotations

import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    CreateDisposition,
    CreateOptions,
    FileAttributes,
    ImpersonationLevel,
    InfoType,
    Open,
    ShareAccess,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
    SMB2SetInfoRequest,
)
from smbprotocol.security_descriptor import (
    AccessAllowedAce,
    AclPacket,
    SDControl,
    SMB2CreateSDBuffer,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

OWNER = 0x1
GROUP = 0x2
DACL = 0x4

READ_DATA = 0x1
WRITE_DATA = 0x2
APPEND_DATA = 0x4
DELETE_CHILD = 0x40
READ_ATTRIBUTES = 0x80
DELETE = 0x10000
READ_CONTROL = 0x20000
WRITE_DAC = 0x40000
WRITE_OWNER = 0x80000
SYNCHRONIZE = 0x100000
GENERIC_WRITE = 0x40000000
# What smbtorture's delete-on-close-perms test gives: everything but DELETE
# and FILE_DELETE_CHILD.
NO_DELETE = 0x001E01BF
FULL = 0x001F01FF

OBJECT_INHERIT = 0x1

STATUS_BUFFER_TOO_SMALL = 0xC0000023


def connect(server, dialect, capabilities=None) -> TreeConnect:
    """A tree connect to the test share; `capabilities`, when given, are
    what the NEGOTIATE asks for (smbprotocol asks for large MTU, encryption
    and DFS)."""
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    if capabilities is not None:
        connection.client_capabilities = capabilities
    connection.connect(dialect, timeout=30)
    try:
        session = Session(connection, server.user, server.password,
                          require_encryption=False, auth_protocol="ntlm")
        session.connect()
        tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
        tree.connect()
        return tree
    except BaseException:
        connection.disconnect()
        raise


@pytest.fixture
def tree(server):
    tree = connect(server, Dialects.SMB_3_1_1)
    yield tree
    tree.session.connection.disconnect()


def open_(tree, name, access, disposition=CreateDisposition.FILE_OPEN, options=0,
          directory=False):
    h = Open(tree, name)
    h.create(
        ImpersonationLevel.Impersonation,
        access,
        FileAttributes.FILE_ATTRIBUTE_DIRECTORY if directory else FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE,
        disposition,
        options | (CreateOptions.FILE_DIRECTORY_FILE if directory else CreateOptions.FILE_NON_DIRECTORY_FILE),
    )
    return h


def status_of(call) -> int:
    with pytest.raises(SMBResponseException) as e:
        call()
    return e.value.status


def query_sd(h, parts) -> SMB2CreateSDBuffer:
    req = SMB2QueryInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    req["output_buffer_length"] = 65535
    req["additional_information"] = parts
    req["file_id"] = h.file_id
    conn = h.connection
    request = conn.send(req, sid=h.tree_connect.session.session_id, tid=h.tree_connect.tree_connect_id)
    resp = SMB2QueryInfoResponse()
    resp.unpack(conn.receive(request)["data"].get_value())
    sd = SMB2CreateSDBuffer()
    sd.unpack(resp["buffer"].get_value())
    return sd


def set_sd(h, parts, raw: bytes) -> None:
    req = SMB2SetInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    req["additional_information"] = parts
    req["file_id"] = h.file_id
    req["buffer"] = raw
    conn = h.connection
    request = conn.send(req, sid=h.tree_connect.session.session_id, tid=h.tree_connect.tree_connect_id)
    conn.receive(request)


def owner_only_dacl(owner, mask, flags=0) -> bytes:
    ace = AccessAllowedAce()
    ace["mask"] = mask
    ace["sid"] = owner
    ace["ace_flags"] = flags
    acl = AclPacket()
    acl["aces"] = [ace]
    sd = SMB2CreateSDBuffer()
    sd["control"].set_flag(SDControl.SELF_RELATIVE)
    sd.set_owner(owner)
    sd.set_dacl(acl)
    return sd.pack()


def aces(sd: SMB2CreateSDBuffer):
    return [(a["sid"].get_value() if hasattr(a["sid"], "get_value") else a["sid"],
             a["mask"].get_value(), a["ace_flags"].get_value())
            for a in sd.get_dacl()["aces"].get_value()]


def test_dacl_is_stored_inherited_and_enforced(tree, server):
    d = open_(tree, "acl_dir", READ_CONTROL | WRITE_DAC | WRITE_OWNER,
              CreateDisposition.FILE_CREATE, directory=True)
    owner = query_sd(d, OWNER | DACL).get_owner()
    set_sd(d, OWNER | DACL, owner_only_dacl(owner, NO_DELETE, OBJECT_INHERIT))

    stored = query_sd(d, OWNER | DACL)
    assert str(stored.get_owner()) == str(owner)
    assert [(str(s), m, f) for s, m, f in aces(stored)] == [(str(owner), NO_DELETE, OBJECT_INHERIT)], (
        "the directory does not report the DACL that was set"
    )

    # A bad descriptor is refused and changes nothing.
    assert status_of(lambda: set_sd(d, DACL, b"\x01\x00\x04")) == STATUS_BUFFER_TOO_SMALL
    assert [m for _, m, _ in aces(query_sd(d, DACL))] == [NO_DELETE]
    d.close()

    # The creator of a new file gets what it asks for, DELETE included...
    f = open_(tree, "acl_dir\\f.txt", GENERIC_WRITE | DELETE | READ_CONTROL,
              CreateDisposition.FILE_CREATE)
    f.write(b"kept", 0)
    inherited = aces(query_sd(f, DACL))
    f.close()
    assert [(str(s), m) for s, m, _ in inherited] == [(str(owner), NO_DELETE)]

    # ...but afterwards neither the file nor its directory grant DELETE.
    assert status_of(lambda: open_(tree, "acl_dir\\f.txt", DELETE)) == NtStatus.STATUS_ACCESS_DENIED
    assert status_of(lambda: open_(
        tree, "acl_dir\\f.txt", DELETE, options=CreateOptions.FILE_DELETE_ON_CLOSE,
    )) == NtStatus.STATUS_ACCESS_DENIED
    r = open_(tree, "acl_dir\\f.txt", READ_DATA | SYNCHRONIZE)
    assert r.read(0, 4) == b"kept"
    r.close()

    # Without WRITE_DAC on the handle the DACL cannot be changed.
    d = open_(tree, "acl_dir", READ_CONTROL, directory=True)
    assert status_of(lambda: set_sd(d, DACL, owner_only_dacl(owner, FULL))) == NtStatus.STATUS_ACCESS_DENIED
    d.close()

    # Once the directory grants FILE_DELETE_CHILD the file can be deleted.
    d = open_(tree, "acl_dir", READ_CONTROL | WRITE_DAC, directory=True)
    set_sd(d, DACL, owner_only_dacl(owner, FULL))
    d.close()
    f = open_(tree, "acl_dir\\f.txt", DELETE, options=CreateOptions.FILE_DELETE_ON_CLOSE)
    f.close()
    assert not (server.share_path / "acl_dir" / "f.txt").exists()


def test_descriptor_survives_a_reconnect(tree, server):
    d = open_(tree, "kept_dir", READ_CONTROL | WRITE_DAC, CreateDisposition.FILE_CREATE, directory=True)
    owner = query_sd(d, OWNER).get_owner()
    set_sd(d, DACL, owner_only_dacl(owner, NO_DELETE | DELETE))
    d.close()
    tree.session.connection.disconnect()

    t = connect(server, Dialects.SMB_3_0_2)
    try:
        d = open_(t, "kept_dir", READ_CONTROL, directory=True)
        assert [m for _, m, _ in aces(query_sd(d, DACL))] == [NO_DELETE | DELETE]
        d.close()
        # Not granted by the DACL: FILE_DELETE_CHILD.
        assert status_of(lambda: open_(t, "kept_dir", DELETE_CHILD, directory=True)) == (
            NtStatus.STATUS_ACCESS_DENIED
        )
    finally:
        t.session.connection.disconnect()
