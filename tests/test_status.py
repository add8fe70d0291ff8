"""`copyless status`: a real smbclient holding a file open shows up, with
its session and the file, as smbstatus would show them; a file under a
lease and with locked ranges shows both."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from smbprotocol.connection import Dialects
from smbprotocol.open import LockFlags, Open

from conftest import SERVER_KIND, copyless_binary
from test_acl import connect
from test_leases import create
from test_locks import element

pytestmark = pytest.mark.skipif(SERVER_KIND == "samba", reason="copyless's own command")


def status(server, *extra):
    r = subprocess.run([str(copyless_binary()), "status", "--control", str(server.control), *extra],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_status_lists_an_smbclient_session_and_the_file_it_holds_open(server):
    (server.share_path / "held.txt").write_text("x")
    # smbclient's `open` keeps the file open until `close` or the end.
    client = subprocess.Popen(
        ["smbclient", f"//{server.host}/{server.share}", "-p", str(server.port),
         "-U", f"{server.user}%{server.password}", "--option=client min protocol=SMB3"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        client.stdin.write("open held.txt\n")
        client.stdin.flush()
        deadline = time.monotonic() + 20
        while True:
            doc = json.loads(status(server, "--json"))
            held = [o for o in doc["open_files"] if o["path"] == "held.txt"]
            if held or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert held, doc
        sessions = [s for s in doc["sessions"] if s["user"] == server.user]
        assert len(sessions) == 1, doc
        session = sessions[0]
        assert session["client"].startswith("127.0.0.1:")
        assert session["dialect"] in ("3.0", "3.0.2", "3.1.1")
        assert session["auth"] == "ntlm"
        assert session["signing"] == "required"
        assert server.share in session["shares"]
        assert held[0]["user"] == server.user
        assert held[0]["session_id"] == session["session_id"]
        assert held[0]["share"] == server.share

        shown = status(server)
        print(shown)
        assert any(line.startswith(server.user) and "held.txt" in line
                   for line in shown.splitlines()), shown
    finally:
        client.stdin.close()
        client.wait(timeout=20)

    # Once smbclient is gone, so are its session and its file.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        doc = json.loads(status(server, "--json"))
        if not doc["open_files"] and not doc["sessions"]:
            break
        time.sleep(0.2)
    assert doc == {"sessions": [], "open_files": []}


def test_status_shows_a_lease_and_byte_range_locks(server):
    """smbprotocol, as Office would: a file under a read-write-handle
    lease, with an exclusive and a shared range locked."""
    tree = connect(server, Dialects.SMB_3_1_1)
    try:
        h = Open(tree, "report.docx")
        create(h, os.urandom(16))
        h.lock([element(0, 100, LockFlags.SMB2_LOCKFLAG_EXCLUSIVE_LOCK
                        | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY),
                element(4096, 1, LockFlags.SMB2_LOCKFLAG_SHARED_LOCK
                        | LockFlags.SMB2_LOCKFLAG_FAIL_IMMEDIATELY)])
        doc = json.loads(status(server, "--json"))
        [held] = [o for o in doc["open_files"] if o["path"] == "report.docx"]
        assert held["lease"] == "RWH", held
        assert held["oplock"] == "none", held
        assert held["locks"] == [
            {"offset": 0, "length": 100, "type": "exclusive"},
            {"offset": 4096, "length": 1, "type": "shared"},
        ], held
        shown = status(server)
        assert "Byte-range locks: 2" in shown, shown
        assert any(line.startswith(server.user) and "report.docx" in line and "lease(RWH)" in line
                   for line in shown.splitlines()), shown

        h.lock([element(0, 100, LockFlags.SMB2_LOCKFLAG_UNLOCK)])
        [held] = [o for o in json.loads(status(server, "--json"))["open_files"]
                  if o["path"] == "report.docx"]
        assert held["locks"] == [{"offset": 4096, "length": 1, "type": "shared"}], held
        h.close()
    finally:
        tree.session.connection.disconnect()
