"""Reads on a server that signs only when asked, through Python
smbprotocol, checked byte for byte. An unsigned READ alone in its frame
may have its data sent from a pipe by the io_uring engine (between 128 KiB
and 1 MiB); every size around those bounds, short reads at the end of the
file, and signed and sealed sessions on the same server must all return
the file's bytes."""

from __future__ import annotations

import os
import shutil
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import EndOfFile
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              FilePipePrinterAccessMask, ImpersonationLevel, Open)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="starts copyless with signing not required")

KIB = 1024
SIZE = 3 * KIB * KIB + 123


@pytest.fixture(scope="module")
def lenient_server():
    base = make_temp_dir("unsigned")
    running = _start_copyless(base, extra_config='\n[security]\nsigning = "enabled"\n')
    try:
        yield running.info
    finally:
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)


def _open(server, signing: bool, encrypt: bool):
    conn = Connection(uuid.uuid4(), server.host, server.port, require_signing=signing)
    conn.connect(timeout=30)
    session = Session(conn, server.user, server.password, require_encryption=encrypt,
                      auth_protocol="ntlm")
    session.connect()
    tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
    tree.connect()
    f = Open(tree, "data.bin")
    f.create(ImpersonationLevel.Impersonation, FilePipePrinterAccessMask.GENERIC_READ,
             FileAttributes.FILE_ATTRIBUTE_NORMAL, 7, CreateDisposition.FILE_OPEN,
             CreateOptions.FILE_NON_DIRECTORY_FILE)
    return conn, session, f


@pytest.mark.parametrize("signing,encrypt", [(False, False), (True, False), (False, True)],
                         ids=["unsigned", "signed", "sealed"])
def test_reads_of_every_size_return_the_files_bytes(lenient_server, signing, encrypt):
    data = os.urandom(SIZE)
    (lenient_server.share_path / "data.bin").write_bytes(data)
    conn, session, f = _open(lenient_server, signing, encrypt)
    try:
        assert session.signing_required == signing or encrypt, "the session signs as asked"
        for length in (1, 4095, 128 * KIB - 1, 128 * KIB, 300 * KIB + 7, KIB * KIB,
                       KIB * KIB + 1, 2 * KIB * KIB):
            for offset in (0, 4096 + 3, SIZE - (length + 1) // 2):
                got = f.read(offset, length)
                want = data[offset:offset + length]
                assert got == want, (
                    f"read of {length} at {offset}: {len(got)} bytes, "
                    f"{'same' if got[:len(want)] == want[:len(got)] else 'different'} start")
        with pytest.raises(EndOfFile):
            f.read(SIZE, KIB * KIB)
        # Many in a row, as a copy does.
        whole = b"".join(f.read(at, min(KIB * KIB, SIZE - at)) for at in range(0, SIZE, KIB * KIB))
        assert whole == data, "a file read in 1 MiB pieces differs"
        f.close()
    finally:
        conn.disconnect()
