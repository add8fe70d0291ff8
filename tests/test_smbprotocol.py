"""Python smbprotocol's high-level client against the server, signing required."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid

import pytest
import smbclient
from smbprotocol.connection import Connection
import smbprotocol.session
from smbprotocol.exceptions import BadNetworkName, LogonFailure, SharingViolation, UserSessionDeleted
from smbprotocol.header import NtStatus
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              FilePipePrinterAccessMask, ImpersonationLevel, Open)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from support import make_share_file


@pytest.fixture(autouse=True)
def fresh_connections(server):
    # Depends on `server` so that the cached connections are closed while
    # the server still runs.
    smbclient.reset_connection_cache()
    yield
    smbclient.reset_connection_cache()


def unc(server, *parts: str) -> str:
    return "\\".join([f"\\\\{server.host}\\{server.share}", *parts])


@contextlib.contextmanager
def signed_tree(server):
    """A connection, session and tree connect of our own, for requests
    the high-level client does not make; the connection goes after."""
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    conn.connect(timeout=30)
    try:
        session = Session(conn, server.user, server.password, auth_protocol="ntlm")
        session.connect()
        tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
        tree.connect()
        yield conn, session, tree
    finally:
        conn.disconnect()


def register(server, password=None):
    smbclient.register_session(
        server.host,
        username=server.user,
        password=server.password if password is None else password,
        port=server.port,
        require_signing=True,
        auth_protocol="ntlm",
    )


def test_file_lifecycle(server):
    register(server)
    port = server.port
    payload = os.urandom(3 * 1024 * 1024 + 17)

    smbclient.makedirs(unc(server, "a", "b"), port=port)
    assert (server.share_path / "a" / "b").is_dir(), "makedirs did not create a\\b on disk"

    with smbclient.open_file(unc(server, "a", "b", "data.bin"), mode="wb", port=port) as f:
        f.write(payload)
    assert (server.share_path / "a" / "b" / "data.bin").read_bytes() == payload, (
        "file written through smbprotocol differs on disk"
    )
    with smbclient.open_file(unc(server, "a", "b", "data.bin"), mode="rb", port=port) as f:
        assert f.read() == payload, "file read back through smbprotocol differs"

    # a ranged read from the middle
    with smbclient.open_file(unc(server, "a", "b", "data.bin"), mode="rb", port=port) as f:
        f.seek(1_000_000)
        assert f.read(4096) == payload[1_000_000:1_004_096], "read at an offset returned wrong data"

    make_share_file(server, "a/local.txt", b"made on disk\n")
    entries = {e.name: e for e in smbclient.scandir(unc(server, "a"), port=port)}
    assert set(entries) == {"b", "local.txt"}, f"scandir(a) returned {sorted(entries)}"
    assert entries["b"].is_dir(), "scandir: b is not a directory"
    assert not entries["local.txt"].is_dir(), "scandir: local.txt is a directory"
    # The size as the directory listing reports it, then as a stat of the
    # entry reports it (SMBDirEntry.stat() forgets the port, so stat the path).
    assert entries["local.txt"].smb_info.end_of_file == len("made on disk\n"), (
        f"scandir size of local.txt: {entries['local.txt'].smb_info}"
    )
    st = smbclient.stat(entries["local.txt"].path, port=port)
    assert st.st_size == len("made on disk\n"), f"stat size of local.txt: {st}"
    assert stat.S_ISDIR(smbclient.stat(entries["b"].path, port=port).st_mode), "stat: b is not a directory"

    st = smbclient.stat(unc(server, "a", "b", "data.bin"), port=port)
    assert st.st_size == len(payload), f"stat size {st.st_size}, expected {len(payload)}"

    smbclient.rename(unc(server, "a", "b", "data.bin"), unc(server, "a", "moved.bin"), port=port)
    assert not (server.share_path / "a" / "b" / "data.bin").exists(), "rename left the old name"
    assert (server.share_path / "a" / "moved.bin").read_bytes() == payload, "rename lost the contents"
    assert sorted(smbclient.listdir(unc(server, "a"), port=port)) == ["b", "local.txt", "moved.bin"]

    smbclient.remove(unc(server, "a", "moved.bin"), port=port)
    smbclient.remove(unc(server, "a", "local.txt"), port=port)
    smbclient.rmdir(unc(server, "a", "b"), port=port)
    smbclient.rmdir(unc(server, "a"), port=port)
    assert list(server.share_path.iterdir()) == [], (
        f"share not empty after remove/rmdir: {list(server.share_path.iterdir())}"
    )


def test_overwrite_truncates(server):
    register(server)
    path = unc(server, "over.txt")
    with smbclient.open_file(path, mode="wb", port=server.port) as f:
        f.write(b"a long first version of the file")
    with smbclient.open_file(path, mode="wb", port=server.port) as f:
        f.write(b"short")
    assert (server.share_path / "over.txt").read_bytes() == b"short", "mode wb did not truncate"


def test_rename_in_one_compound(server):
    """Finder renames with CREATE, SET_INFO and CLOSE in one frame, each
    related to the one before it; so does smbclient's transaction."""
    from smbclient._io import SMBFileTransaction, SMBRawIO, set_info
    from smbprotocol.file_info import FileRenameInformation

    register(server)
    smbclient.makedirs(unc(server, "ren"), port=server.port)
    make_share_file(server, "ren/before.txt", b"renamed whole\n")
    make_share_file(server, "ren/taken.txt", b"replaced\n")
    for target, replace in (("ren\\after.txt", False), ("ren\\taken.txt", True)):
        source = "before.txt" if not replace else "after.txt"
        raw = SMBRawIO(unc(server, "ren", source), mode="r", share_access="rwd",
                       desired_access=FilePipePrinterAccessMask.DELETE, port=server.port)
        assert raw.closed, "opened by the compound, not before it"
        with SMBFileTransaction(raw) as transaction:
            rename = FileRenameInformation()
            rename["replace_if_exists"] = replace
            rename["file_name"] = target
            set_info(transaction, rename)
        # Any status but success raises; what is left is the SET_INFO's.
        assert len(transaction.results) == 1, transaction.results
    names = sorted(p.name for p in (server.share_path / "ren").iterdir())
    assert names == ["taken.txt"], f"after the renames: {names}"
    assert (server.share_path / "ren" / "taken.txt").read_bytes() == b"renamed whole\n"


def test_a_close_gives_the_attributes_asked_for(server):
    """The Linux client opens, works and closes in one compound, asking
    the CLOSE for the file's attributes (POSTQUERY_ATTRIB); a named
    stream's are in its file's extended attributes, not memory."""
    make_share_file(server, "sized.txt", b"twelve bytes")
    with signed_tree(server) as (conn, session, tree):
        stream = Open(tree, "sized.txt:side")
        stream.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.GENERIC_WRITE,
                      FileAttributes.FILE_ATTRIBUTE_NORMAL, 0, CreateDisposition.FILE_OVERWRITE_IF,
                      CreateOptions.FILE_NON_DIRECTORY_FILE)
        stream.write(b"seven b", 0)
        stream.close()
        for name, size in (("sized.txt", 12), ("sized.txt:side", 7)):
            f = Open(tree, name)
            create, opened = f.create(
                ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES,
                FileAttributes.FILE_ATTRIBUTE_NORMAL, 0, CreateDisposition.FILE_OPEN,
                CreateOptions.FILE_NON_DIRECTORY_FILE, send=False)
            close, closed = f.close(get_attributes=True, send=False)
            close["file_id"] = b"\xff" * 16
            requests = conn.send_compound([create, close], session.session_id,
                                          tree.tree_connect_id, related=True)
            opened(requests[0])
            reply = closed(requests[1])
            assert reply["flags"].get_value() == 1, f"{name}: attributes not given"
            assert reply["end_of_file"].get_value() == size, f"{name}: {reply}"


def test_object_ids_are_stable_and_distinct(server):
    """Windows asks for a file's object id (distributed link tracking,
    when a shortcut to it is made); the same file gives the same id."""
    from smbprotocol.ioctl import CtlCode, IOCTLFlags, SMB2IOCTLRequest, SMB2IOCTLResponse

    make_share_file(server, "one.txt", b"1")
    make_share_file(server, "two.txt", b"2")
    with signed_tree(server) as (conn, session, tree):

        def object_id(name):
            f = _open_exclusive(tree, name)
            try:
                req = SMB2IOCTLRequest()
                req["ctl_code"] = CtlCode.FSCTL_CREATE_OR_GET_OBJECT_ID
                req["file_id"] = f.file_id
                req["max_output_response"] = 64
                req["flags"] = IOCTLFlags.SMB2_0_IOCTL_IS_FSCTL
                req["buffer"] = b""
                sent = conn.send(req, sid=session.session_id, tid=tree.tree_connect_id)
                reply = SMB2IOCTLResponse()
                reply.unpack(conn.receive(sent)["data"].get_value())
                return reply["buffer"].get_value()
            finally:
                f.close()

        first = object_id("one.txt")
        assert len(first) == 64, first
        assert object_id("one.txt") == first, "the same file, another id"
        assert object_id("two.txt")[:16] != first[:16], "two files, one object id"


def test_missing_file_raises(server):
    register(server)
    with pytest.raises(OSError) as excinfo:
        smbclient.open_file(unc(server, "does-not-exist.txt"), mode="rb", port=server.port)
    assert excinfo.value.errno == errno.ENOENT, f"unexpected error: {excinfo.value!r}"
    assert excinfo.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND, (
        f"unexpected status: {excinfo.value!r}"
    )


def test_wrong_password_raises_logon_failure(server):
    with pytest.raises(LogonFailure):
        register(server, password=server.password + "-wrong")


def test_unknown_share_raises_bad_network_name(server):
    # The low-level API: smbclient.open_file would go on to try a DFS referral.
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(timeout=30)
    try:
        session = Session(connection, server.user, server.password, require_encryption=False,
                          auth_protocol="ntlm")
        session.connect()
        with pytest.raises(BadNetworkName):
            TreeConnect(session, f"\\\\{server.host}\\nosuchshare").connect()
        tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
        tree.connect()
        tree.disconnect()
    finally:
        connection.disconnect()


def _open_exclusive(tree, name):
    """Opens `name` for reading and writing, sharing it with no other open."""
    f = Open(tree, name)
    f.create(ImpersonationLevel.Impersonation,
             FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
             FileAttributes.FILE_ATTRIBUTE_NORMAL, 0, CreateDisposition.FILE_OPEN,
             CreateOptions.FILE_NON_DIRECTORY_FILE)
    return f


def test_a_reconnect_naming_the_previous_session_ends_it_and_frees_its_opens(server, monkeypatch):
    # A client whose connection seems lost reconnects on a new one and
    # names its old session (PreviousSessionId), as Windows does: the old
    # session ends on the old connection, and its open no longer blocks
    # the file, while the old connection itself may still be up.
    make_share_file(server, "doc.txt", b"kept\n")
    share = f"\\\\{server.host}\\{server.share}"
    old = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    new = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    old.connect(timeout=30)
    new.connect(timeout=30)
    try:
        # Unencrypted, so that a late request on it gets a status: a sealed
        # request for a session that is gone ends its connection instead
        # (MS-SMB2 3.3.5.2.1.1).
        old_session = Session(old, server.user, server.password, require_encryption=False,
                              auth_protocol="ntlm")
        old_session.connect()
        old_tree = TreeConnect(old_session, share)
        old_tree.connect()
        held = _open_exclusive(old_tree, "doc.txt")

        plain = Session(new, server.user, server.password, auth_protocol="ntlm")
        plain.connect()
        plain_tree = TreeConnect(plain, share)
        plain_tree.connect()
        with pytest.raises(SharingViolation):
            _open_exclusive(plain_tree, "doc.txt")

        class NamingPrevious(smbprotocol.session.SMB2SessionSetupRequest):
            def __init__(self):
                super().__init__()
                self["previous_session_id"] = old_session.session_id

        monkeypatch.setattr(smbprotocol.session, "SMB2SessionSetupRequest", NamingPrevious)
        again = Session(new, server.user, server.password, auth_protocol="ntlm")
        again.connect()
        monkeypatch.undo()
        tree = TreeConnect(again, share)
        tree.connect()
        reopened = _open_exclusive(tree, "doc.txt")
        assert reopened.read(0, 5) == b"kept\n", "the reopened file reads wrong"
        reopened.close()

        with pytest.raises(UserSessionDeleted):
            held.read(0, 5)
        # The other session on the new connection was not named and stays.
        plain_tree.disconnect()
    finally:
        new.disconnect()
        # Without logging off: the old session is gone.
        old.disconnect(False)
