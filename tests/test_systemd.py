"""copyless as a systemd service: the unit file in dist/ passes
`systemd-analyze verify`, and the real binary tells a socket named by
NOTIFY_SOCKET, as systemd would read it, that it is ready, that it still
answers (watchdog) and that it is stopping."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import smbclient

from conftest import (REPO_ROOT, SERVER_KIND, _start_copyless, _stop_copyless,
                      copyless_binary, make_temp_dir)

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
    for option in ("Type=notify", "WatchdogSec=", "LimitNOFILE=",
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

        # SIGHUP, the unit's reload signal, does not end the server.
        running.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert running.proc.poll() is None, running.logs()
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
