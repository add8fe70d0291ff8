"""Server-side copy as a client asks for it: smbprotocol's
`smbclient.copyfile` takes a resume key on the source and sends
FSCTL_SRV_COPYCHUNK_WRITE requests of up to sixteen 1 MiB chunks, so the
data never crosses the wire. The copy must be byte for byte; on btrfs the
copy shares the source's blocks rather than writing new ones."""

from __future__ import annotations

import os
import subprocess

import pytest
import smbclient

from conftest import SERVER_KIND, copyless_on_btrfs
from support import sha256_file


def unc(server, name: str) -> str:
    return f"\\\\{server.host}\\{server.share}\\{name}"


def register(server):
    smbclient.reset_connection_cache()
    smbclient.register_session(server.host, username=server.user, password=server.password,
                               port=server.port, auth_protocol="ntlm")


def test_copyfile_copies_every_byte(server):
    # More than one request's worth (16 MiB), ending inside a chunk.
    size = 20 * 1024 * 1024 + 12345
    data = os.urandom(size)
    (server.share_path / "source.bin").write_bytes(data)
    os.chmod(server.share_path / "source.bin", 0o644)
    register(server)
    try:
        smbclient.copyfile(unc(server, "source.bin"), unc(server, "copy.bin"),
                           port=server.port)
        with smbclient.open_file(unc(server, "copy.bin"), mode="rb", port=server.port) as f:
            assert f.read() == data
    finally:
        smbclient.reset_connection_cache()
    assert sha256_file(server.share_path / "copy.bin") == sha256_file(
        server.share_path / "source.bin")


@pytest.fixture
def btrfs_server():
    """copyless serving a share on a fresh btrfs image, loop-mounted."""
    with copyless_on_btrfs() as running:
        yield running.info


def exclusive_bytes(path) -> int:
    """Bytes of `path` that no other file shares (`btrfs filesystem du`)."""
    out = subprocess.run(["btrfs", "filesystem", "du", "--raw", "-s", str(path)],
                         check=True, capture_output=True, text=True).stdout
    total, exclusive, *_ = out.splitlines()[1].split()
    return int(exclusive)


@pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless clones where Samba's "
                    "default module copies")
def test_copyfile_on_btrfs_shares_the_blocks(btrfs_server):
    server = btrfs_server
    size = 64 * 1024 * 1024
    source = server.share_path / "source.bin"
    with open(source, "wb") as f:
        for _ in range(size // (1 << 20)):
            f.write(os.urandom(1 << 20))
        os.fsync(f.fileno())
    os.chmod(source, 0o644)
    register(server)
    try:
        smbclient.copyfile(unc(server, "source.bin"), unc(server, "copy.bin"),
                           port=server.port)
    finally:
        smbclient.reset_connection_cache()
    copy = server.share_path / "copy.bin"
    subprocess.run(["sync"], check=True)
    assert sha256_file(copy) == sha256_file(source)
    assert os.path.getsize(copy) == size
    # Every block of the copy is the source's.
    assert exclusive_bytes(copy) == 0
