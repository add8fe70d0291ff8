"""A share whose folder vanished (issue 25): removed, or its filesystem
unmounted. Tree connects get STATUS_BAD_NETWORK_NAME, as for a share that
is not there, and those made before end with STATUS_NETWORK_NAME_DELETED,
rather than failing every request or writing into a detached filesystem;
the share is served again once its folder is back (or, for a filesystem
that came back as another, at the next reload), and the server says each
change on standard error."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir
from support import create_file

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own share keeper")


@pytest.fixture
def served(request):
    """A fresh server; with the parameter "tmpfs", its share folder is a
    tmpfs mounted for the test (root only)."""
    mounted = getattr(request, "param", None) == "tmpfs"
    if mounted and os.geteuid() != 0:
        pytest.skip("mounting a filesystem needs root")
    base = make_temp_dir("vanished")

    def mount(share):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "copyless-test", str(share)],
                       check=True)

    running = _start_copyless(base, prepare_share=mount if mounted else None)
    try:
        yield running
    finally:
        _stop_copyless(running)
        if mounted:
            subprocess.run(["umount", "-l", str(base / "share")], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


class Client:
    def __init__(self, server):
        self.server = server
        self.connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
        self.connection.connect(Dialects.SMB_3_1_1, timeout=30)
        self.session = Session(self.connection, server.user, server.password,
                               require_encryption=False, auth_protocol="ntlm")
        self.session.connect()

    def tree(self) -> TreeConnect:
        tree = TreeConnect(self.session, f"\\\\{self.server.host}\\{self.server.share}")
        tree.connect()
        return tree

    def close(self):
        # Without logging off: the trees the server ended cannot be
        # disconnected any more.
        self.connection.disconnect(close=False)


def status_of(call) -> int:
    with pytest.raises(SMBResponseException) as e:
        call()
    return e.value.status


def write(tree, name: str, data: bytes) -> None:
    h = create_file(tree, name)
    h.write(data, 0)
    h.close()


def make_folder_like(path, like: os.stat_result) -> None:
    path.mkdir()
    os.chown(path, like.st_uid, like.st_gid)
    path.chmod(like.st_mode & 0o7777)


def wait_for_log(running, text: str) -> None:
    deadline = time.monotonic() + 20
    while text not in running.logs():
        assert time.monotonic() < deadline, f"the server never said {text!r}:\n{running.logs()}"
        time.sleep(0.05)


def test_a_removed_share_folder_is_refused_and_served_again_when_made_again(served):
    server = served.info
    folder = server.share_path
    like = folder.stat()
    client = Client(server)
    try:
        before = client.tree()
        write(before, "before.txt", b"old folder")
        shutil.rmtree(folder)
        assert status_of(client.tree) == NtStatus.STATUS_BAD_NETWORK_NAME
        assert status_of(lambda: create_file(before, "lost.txt")) \
            == NtStatus.STATUS_NETWORK_NAME_DELETED
        wait_for_log(served, f"share {server.share}: its folder {folder} is gone")

        make_folder_like(folder, like)
        after = client.tree()
        write(after, "after.txt", b"new folder")
        assert (folder / "after.txt").read_bytes() == b"new folder"
        wait_for_log(served, f"share {server.share}: its folder {folder} is back")
    finally:
        client.close()


def test_a_folder_removed_and_made_again_at_once_is_served_from_the_new_one(served):
    server = served.info
    folder = server.share_path
    like = folder.stat()
    client = Client(server)
    try:
        before = client.tree()
        write(before, "before.txt", b"old folder")
        # Between two looks of the keeper, as a restore from backup does.
        shutil.rmtree(folder)
        make_folder_like(folder, like)
        after = client.tree()
        write(after, "after.txt", b"new folder")
        assert (folder / "after.txt").read_bytes() == b"new folder"
        assert status_of(lambda: create_file(before, "lost.txt")) \
            == NtStatus.STATUS_NETWORK_NAME_DELETED
        assert not (folder / "lost.txt").exists()
        wait_for_log(served, f"share {server.share}: {folder} is a new folder")
    finally:
        client.close()


@pytest.mark.parametrize("served", ["tmpfs"], indirect=True)
def test_an_unmounted_share_is_refused_until_its_filesystem_is_back(served):
    server = served.info
    folder = server.share_path
    client = Client(server)
    try:
        before = client.tree()
        write(before, "before.txt", b"on the share's own filesystem")
        # Lazily, as a busy filesystem is unmounted: the server's own
        # descriptors keep it alive, detached; the mount point shows.
        subprocess.run(["umount", "-l", str(folder)], check=True)
        assert status_of(client.tree) == NtStatus.STATUS_BAD_NETWORK_NAME
        assert status_of(lambda: create_file(before, "detached.txt")) \
            == NtStatus.STATUS_NETWORK_NAME_DELETED
        wait_for_log(served, f"share {server.share}: its folder {folder} is on another "
                             f"filesystem now")
        # The bare mount point is not the share, and stays refused.
        assert status_of(client.tree) == NtStatus.STATUS_BAD_NETWORK_NAME
        assert list(folder.iterdir()) == []

        # A filesystem mounted there again is another one (tmpfs has no
        # device of its own to come back on): served after a reload.
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "copyless-test", str(folder)],
                       check=True)
        os.chown(folder, *server_owner(server))
        served.proc.send_signal(signal.SIGHUP)
        wait_for_log(served, f"share {server.share}: served again from {folder}")
        after = client.tree()
        write(after, "after.txt", b"on the new filesystem")
        assert (folder / "after.txt").read_bytes() == b"on the new filesystem"
    finally:
        client.close()


def server_owner(server) -> tuple[int, int]:
    account = pwd.getpwnam(server.user)
    return account.pw_uid, account.pw_gid
