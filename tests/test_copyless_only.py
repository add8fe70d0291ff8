"""Behaviour that belongs to copyless itself: state kept across a restart,
the SMB1 negotiate upgrade, and configuration checking."""

from __future__ import annotations

import os
import re
import pwd
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SERVER_KIND, copyless_binary, make_temp_dir, unix_user_args
from support import parse_allinfo, smbclient_ok

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="tests of copyless's own command line and state"
)

USER, PASSWORD = "restartuser", "Restart-pass1"


class Proc:
    def __init__(self, share, state):
        self.proc = subprocess.Popen(
            [str(copyless_binary()), "serve", "--listen", "127.0.0.1:0",
             "--share", f"share={share}", "--state-dir", str(state)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline()
        m = re.match(r"copyless listening on 127\.0\.0\.1:(\d+)", line)
        assert m, f"no listening line: {line!r}"
        self.port = int(m.group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=10) == 0


class Info:
    def __init__(self, port, share):
        self.host, self.port, self.share = "127.0.0.1", port, "share"
        self.share_path, self.user, self.password = share, USER, PASSWORD


def test_dos_attributes_survive_restart(client_conf):
    base = make_temp_dir("restart")
    share, state = base / "share", base / "state"
    share.mkdir()
    subprocess.run([str(copyless_binary()), "user", "add", USER, *unix_user_args(),
                    "--password-stdin", "--state-dir", str(state)],
                   input=PASSWORD + "\n", text=True, check=True)
    (share / "f.txt").write_bytes(b"data")
    if os.geteuid() == 0:
        # The user acts as its own Unix account: the file is theirs.
        owner = pwd.getpwnam(USER)
        for path in (share, share / "f.txt"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    first = Proc(share, state)
    try:
        smbclient_ok(Info(first.port, share), client_conf, "setmode f.txt +hsr")
    finally:
        first.stop()
    second = Proc(share, state)
    try:
        out = smbclient_ok(Info(second.port, share), client_conf, "allinfo f.txt").output
        attrs = parse_allinfo(out).attributes
        for letter in "HSR":
            assert letter in attrs, f"attribute {letter} lost across a restart: {attrs!r}\n{out}"
    finally:
        second.stop()
        shutil.rmtree(base, ignore_errors=True)


def _smb1_negotiate(dialects):
    data = b"".join(b"\x02" + d.encode() + b"\x00" for d in dialects)
    header = b"\xffSMB" + bytes([0x72]) + bytes(27)
    body = b"\x00" + struct.pack("<H", len(data)) + data
    msg = header + body
    return struct.pack(">I", len(msg)) + msg


def _recv_frame(sock):
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    length = struct.unpack(">I", head)[0] & 0xFFFFFF
    data = b""
    while len(data) < length:
        chunk = sock.recv(length - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("dialects,expected", [
    (["NT LM 0.12", "SMB 2.002", "SMB 2.???"], 0x02FF),
    (["NT LM 0.12", "SMB 2.002"], 0x0202),
])
def test_smb1_negotiate_upgrades_to_smb2(server, dialects, expected):
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(_smb1_negotiate(dialects))
        reply = _recv_frame(s)
    assert reply is not None and reply[:4] == b"\xfeSMB", f"not an SMB2 reply: {reply!r}"
    command, = struct.unpack_from("<H", reply, 12)
    assert command == 0, "reply is not a NEGOTIATE response"
    structure, _mode, dialect = struct.unpack_from("<HHH", reply, 64)
    assert structure == 65 and dialect == expected, f"dialect {dialect:#x}"


def test_smb1_only_client_is_dropped(server):
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(_smb1_negotiate(["NT LM 0.12"]))
        assert _recv_frame(s) is None, "a client without SMB2 dialects must be dropped"


def test_check_config_names_file_and_line():
    base = make_temp_dir("config")
    good = base / "good.toml"
    good.write_text(f'listen = ["127.0.0.1:4450"]\n\n[[share]]\nname = "data"\npath = "{base}"\n')
    r = subprocess.run([str(copyless_binary()), "check-config", str(good)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    bad = base / "bad.toml"
    bad.write_text('listen = ["127.0.0.1:4450"]\n[security]\nsigning = "sometimes"\n')
    r = subprocess.run([str(copyless_binary()), "check-config", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert f"{bad}:3:" in r.stderr, f"error does not name the file and line: {r.stderr!r}"
    unknown = base / "unknown.toml"
    unknown.write_text('listen = ["127.0.0.1:4450"]\ncolour = "blue"\n')
    r = subprocess.run([str(copyless_binary()), "check-config", str(unknown)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and f"{unknown}:2:" in r.stderr, r.stderr
    shutil.rmtree(base, ignore_errors=True)


def _engine_line(args, share, state):
    """Starts the server with `args`, stops it, and returns the line that
    names its engine."""
    proc = subprocess.Popen(
        [str(copyless_binary()), "serve", "--listen", "127.0.0.1:0",
         "--share", f"share={share}", "--state-dir", str(state), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # A fresh state directory first gets its first user.
        line = proc.stdout.readline()
        while line.startswith("created user"):
            line = proc.stdout.readline()
        assert line.startswith("copyless listening on"), line
        # The engine line follows the listening line on standard error.
        deadline = time.monotonic() + 10
        seen = []
        while time.monotonic() < deadline:
            err = proc.stderr.readline()
            seen.append(err)
            if err.startswith("copyless: engine "):
                return err.strip()
        raise AssertionError(f"no engine line in {seen}")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_the_engine_is_chosen_and_named_at_start(tmp_path):
    share, state = tmp_path / "share", tmp_path / "state"
    share.mkdir()
    threads = "copyless: engine threads, one per connection"
    uring = "copyless: engine io_uring, %d threads" % os.cpu_count()
    assert _engine_line(["--engine", "threads"], share, state) == threads
    picked = _engine_line(["--engine", "auto"], share, state)
    assert picked in (uring, threads), picked
    disabled = Path("/proc/sys/kernel/io_uring_disabled")
    if disabled.exists() and disabled.read_text().strip() == "0":
        assert picked == uring, "a kernel that allows io_uring gets it"
    assert _engine_line([], share, state) == picked, "the default is auto"
    if picked == uring:
        # Where auto picks io_uring, asking for it gets it.
        assert _engine_line(["--engine", "io_uring"], share, state) == uring
    bad = subprocess.run(
        [str(copyless_binary()), "serve", "--share", f"share={share}", "--engine", "fast"],
        capture_output=True, text=True, timeout=10,
    )
    assert bad.returncode == 2, bad
    assert '--engine: engine "fast" must be "auto", "io_uring" or "threads"' in bad.stderr
