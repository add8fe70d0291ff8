"""`copyless status`: a real smbclient holding a file open shows up, with
its session and the file, as smbstatus would show them."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from conftest import SERVER_KIND, copyless_binary

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
