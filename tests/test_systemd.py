"""copyless as a systemd service: the unit file in dist/ passes
`systemd-analyze verify`, and the real binary tells a socket named by
NOTIFY_SOCKET, as systemd would read it, that it is ready, that it still
answers (watchdog), that it reloads its configuration on SIGHUP (the
unit's ExecReload), and that it is stopping."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
import smbclient
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.header import NtStatus
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import (REPO_ROOT, SERVER_KIND, RunningServer, _start_copyless, _stop_copyless,
                      copyless_binary, make_temp_dir)
from support import create_file

pytestmark = pytest.mark.skipif(SERVER_KIND == "samba", reason="copyless's own service interface")

UNIT = REPO_ROOT / "dist" / "copyless.service"


def test_the_unit_file_passes_systemd_analyze_verify(tmp_path):
    # The unit names the installed binary; here the one under test stands
    # in for it, and nothing else of the unit changes.
    text = UNIT.read_text()
    assert "ExecStart=/usr/bin/copyless serve" in text
    unit = tmp_path / "copyless.service"
    unit.write_text(text.replace("/usr/bin/copyless", str(copyless_binary())))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)],
                       capture_output=True, text=True, timeout=60)
    # Complaints about the host's own units (no sysinit.target in a
    # container) are not the unit's.
    complaints = [line for line in (r.stdout + r.stderr).splitlines()
                  if line.strip() and "sysinit.target" not in line]
    assert not complaints, "\n".join(complaints)
    for option in ("Type=notify", "WatchdogSec=", "ExecReload=", "LimitNOFILE=",
                   "CapabilityBoundingSet=", "ProtectSystem=", "ProtectHome=", "PrivateTmp=yes"):
        assert option in text, f"the unit lacks {option}"


def receive(sock: socket.socket, wanted: str, deadline: float) -> list[str]:
    """Notifications until one holds the line `wanted`."""
    seen = []
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            message = sock.recv(4096).decode()
        except socket.timeout:
            break
        seen.append(message)
        if wanted in message.splitlines():
            return seen
    pytest.fail(f"no {wanted} within the deadline; got {seen!r}")


def test_ready_watchdog_and_stopping_reach_notify_socket(monkeypatch):
    base = make_temp_dir("systemd")
    path = base / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    # A ping every second: the server pings at half the interval.
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    running = _start_copyless(base)
    try:
        ready = receive(sock, "READY=1", time.monotonic() + 10)
        status = [line for line in ready[-1].splitlines() if line.startswith("STATUS=")]
        assert status and f"127.0.0.1:{running.info.port}" in status[0], ready
        # Pings come while the server answers.
        receive(sock, "WATCHDOG=1", time.monotonic() + 10)
        receive(sock, "WATCHDOG=1", time.monotonic() + 10)

        server = running.info
        smbclient.reset_connection_cache()
        smbclient.register_session(server.host, username=server.user, password=server.password,
                                   port=server.port, require_signing=True, auth_protocol="ntlm")
        assert smbclient.listdir(f"\\\\{server.host}\\{server.share}", port=server.port) == []
        smbclient.reset_connection_cache()

        running.proc.send_signal(signal.SIGTERM)
        receive(sock, "STOPPING=1", time.monotonic() + 10)
        assert running.proc.wait(timeout=10) == 0
    finally:
        _stop_copyless(running)
        sock.close()
        shutil.rmtree(base, ignore_errors=True)


def share_table(name: str, path: Path) -> str:
    return f"\n[[share]]\nname = {json.dumps(name)}\npath = {json.dumps(str(path))}\n"


class Reloading(NamedTuple):
    """A server whose shares come from its config file alone (so that a
    reload applies them), a session on it with share `share` connected,
    and a socket that hears what it tells systemd."""
    running: RunningServer
    notify: socket.socket
    session: Session
    tree: TreeConnect

    @property
    def config(self) -> Path:
        return self.running.info.share_path.parent / "copyless.toml"

    def reload(self, text: str) -> str:
        """Writes the config, sends SIGHUP, and returns the STATUS of the
        READY=1 that ends the reload."""
        self.config.write_text(text)
        self.running.proc.send_signal(signal.SIGHUP)
        seen = receive(self.notify, "READY=1", time.monotonic() + 10)
        assert any("RELOADING=1" in m.splitlines() for m in seen), seen
        return seen[-1]


@contextlib.contextmanager
def reloading_server(monkeypatch, name: str):
    base = make_temp_dir(name)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(base / "notify.sock"))
    monkeypatch.setenv("NOTIFY_SOCKET", str(base / "notify.sock"))
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    running = _start_copyless(base, extra_config=share_table("share", base / "share"),
                              share_flag=False)
    server = running.info
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    try:
        connection.connect(Dialects.SMB_3_1_1, timeout=30)
        receive(notify, "READY=1", time.monotonic() + 10)
        session = Session(connection, server.user, server.password,
                          require_encryption=False, auth_protocol="ntlm")
        session.connect()
        tree = TreeConnect(session, f"\\\\{server.host}\\share")
        tree.connect()
        yield Reloading(running, notify, session, tree)
        assert running.proc.poll() is None
    finally:
        try:
            connection.disconnect()
        except Exception:
            pass
        _stop_copyless(running)
        notify.close()
        shutil.rmtree(base, ignore_errors=True)


def test_sighup_adds_a_share_a_connected_client_can_use_and_ends_a_removed_one(monkeypatch):
    with reloading_server(monkeypatch, "reload") as r:
        server = r.running.info
        base = server.share_path.parent
        second = base / "second"
        second.mkdir()
        if os.geteuid() == 0:
            owner = pwd.getpwnam(server.user)
            os.chown(second, owner.pw_uid, owner.pw_gid)
        create_file(r.tree, "before.txt").close()
        with pytest.raises(SMBResponseException) as refused:
            TreeConnect(r.session, f"\\\\{server.host}\\second").connect()
        assert refused.value.status == NtStatus.STATUS_BAD_NETWORK_NAME

        said = r.reload(r.config.read_text() + share_table("second", second))
        assert "share second added" in said, said

        # The same session, without reconnecting: the new share is there,
        # and the old tree connect still works.
        added = TreeConnect(r.session, f"\\\\{server.host}\\second")
        added.connect()
        f = create_file(added, "after.txt")
        f.write(b"through the new share", 0)
        f.close()
        assert (second / "after.txt").read_bytes() == b"through the new share"
        create_file(r.tree, "still.txt").close()

        # Removing a share ends its tree connects.
        said = r.reload(r.config.read_text().replace(share_table("share", base / "share"), ""))
        assert "share share removed" in said, said
        with pytest.raises(SMBResponseException) as ended:
            create_file(r.tree, "too-late.txt")
        assert ended.value.status == NtStatus.STATUS_NETWORK_NAME_DELETED
        assert not (server.share_path / "too-late.txt").exists()
        create_file(added, "fine.txt").close()

        # A file that does not load changes nothing.
        said = r.reload(r.config.read_text() + "\nbogus = 1\n")
        assert "reload failed" in said, said
        create_file(added, "after-bad-reload.txt").close()


def test_sighup_applies_limits_to_connected_clients_and_new_ones(monkeypatch):
    with reloading_server(monkeypatch, "reload-limits") as r:
        server = r.running.info
        unlimited = r.config.read_text()

        def refused_at_once() -> bool:
            """Whether a new connection is closed on accept, without
            waiting for a NEGOTIATE that never comes."""
            with socket.create_connection((server.host, server.port), timeout=5) as s:
                try:
                    return s.recv(1) == b""
                except (TimeoutError, socket.timeout):
                    return False
                except ConnectionResetError:
                    return True

        held = [create_file(r.tree, f"held{i}.txt") for i in range(2)]
        assert not refused_at_once()

        said = r.reload(unlimited + "\n[limits]\nmax_open_files = 2\nmax_connections = 1\n")
        assert "limits.max_open_files 16384 -> 2: in force now" in said, said
        assert "limits.max_connections 1024 -> 1: in force now" in said, said
        # The session keeps its two opens and gets no third; no new
        # connection is let in while this one holds the only slot.
        with pytest.raises(SMBResponseException) as full:
            create_file(r.tree, "third.txt")
        assert full.value.status == NtStatus.STATUS_INSUFFICIENT_RESOURCES
        held[0].write(b"still open", 0)
        assert refused_at_once()

        said = r.reload(unlimited)
        assert "limits.max_open_files 2 -> 16384: in force now" in said, said
        create_file(r.tree, "third.txt").close()
        assert not refused_at_once()
        for f in held:
            f.close()
        assert (server.share_path / "held0.txt").read_bytes() == b"still open"
