"""Helpers shared by the integration tests: running smbclient and friends,
and opening files with smbprotocol."""

from __future__ import annotations

import hashlib
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from smbprotocol.file_info import FileInformationClass, FileRenameInformation, InfoType
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              FilePipePrinterAccessMask, ImpersonationLevel, Open,
                              ShareAccess, SMB2SetInfoRequest)

from conftest import STARTUP_TIMEOUT, copyless_binary

DIALECTS = ["SMB2_02", "SMB2_10", "SMB3_00", "SMB3_02", "SMB3_11"]

NT_STATUS_RE = re.compile(r"NT_STATUS_[A-Z0-9_]+")

# One line of smbclient's `ls`: two spaces, the name, the attribute letters
# (possibly none), the size and the date, e.g.
#   "  big.bin                             A 104857600  Sat Nov 21 17:38:01 2026"
LS_LINE_RE = re.compile(
    r"^  (?P<name>.+?)\s+(?P<attrs>[A-Z]*)\s+(?P<size>\d+)\s+"
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}$"
)


class Result(NamedTuple):
    returncode: int
    output: str
    argv: list[str]

    def describe(self) -> str:
        return f"command: {' '.join(self.argv)}\nexit status: {self.returncode}\noutput:\n{self.output}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def make_share_file(server, relative: str, data: bytes, mode: int = 0o644) -> Path:
    """Create a file directly on the share's disk, owned like the share root.

    Samba accesses files as the logged-in unix user; giving the file the
    share root's owner keeps it as deletable as files made over SMB.
    """
    path = server.share_path / relative
    path.write_bytes(data)
    path.chmod(mode)
    root = server.share_path.stat()
    os.chown(path, root.st_uid, root.st_gid)
    return path


def smbclient_argv(server, client_conf, *, share=None, user=None, password=None,
                   dialect=None, extra=()):
    """Argument vector for smbclient with signing required.

    With `dialect`, both the minimum and the maximum protocol are set to it,
    so the connection either uses exactly that dialect or fails.
    """
    user = server.user if user is None else user
    password = server.password if password is None else password
    argv = ["smbclient"]
    if share is None:
        argv += ["-L", f"//{server.host}"]
    else:
        argv += [f"//{server.host}/{share}"]
    argv += [
        "-s", str(client_conf),
        "-p", str(server.port),
        "-U", f"{user}%{password}",
        "--option=client signing=required",
        "--option=client ipc signing=required",
    ]
    if dialect is not None:
        argv += [
            "-m", dialect,
            f"--option=client min protocol={dialect}",
            f"--option=client max protocol={dialect}",
        ]
    argv += list(extra)
    return argv


def run(argv, timeout=300, cwd=None) -> Result:
    proc = subprocess.run(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        cwd=cwd,
    )
    return Result(proc.returncode, proc.stdout.decode(errors="replace"), list(argv))


def smbclient(server, client_conf, commands, *, share=None, dialect=None, user=None,
              password=None, timeout=300, cwd=None) -> Result:
    share = server.share if share is None else share
    argv = smbclient_argv(server, client_conf, share=share, user=user, password=password,
                          dialect=dialect, extra=["-c", commands])
    return run(argv, timeout=timeout, cwd=cwd)


def smbclient_ok(server, client_conf, commands, **kwargs) -> Result:
    """Run smbclient commands that must all succeed."""
    result = smbclient(server, client_conf, commands, **kwargs)
    statuses = NT_STATUS_RE.findall(result.output)
    assert result.returncode == 0 and not statuses, (
        f"smbclient commands {commands!r} failed (NT statuses: {statuses})\n"
        + result.describe()
    )
    return result


def parse_ls(output: str) -> dict[str, tuple[str, int]]:
    """Map each name in smbclient `ls` output to (attribute letters, size)."""
    entries = {}
    for line in output.splitlines():
        match = LS_LINE_RE.match(line)
        if match:
            entries[match.group("name")] = (match.group("attrs"), int(match.group("size")))
    return entries


class AllInfo(NamedTuple):
    attributes: str
    attribute_bits: int
    size: int | None


ALLINFO_ATTR_RE = re.compile(r"^attributes:\s*(?P<letters>[A-Z]*)\s*\((?P<hex>[0-9a-fA-F]+)\)",
                             re.MULTILINE)
ALLINFO_STREAM_RE = re.compile(r"^stream: \[::\$DATA\], (?P<size>\d+) bytes", re.MULTILINE)


def parse_allinfo(output: str) -> AllInfo:
    attr = ALLINFO_ATTR_RE.search(output)
    assert attr, f"no 'attributes:' line in allinfo output:\n{output}"
    stream = ALLINFO_STREAM_RE.search(output)
    size = int(stream.group("size")) if stream else None
    return AllInfo(attr.group("letters"), int(attr.group("hex"), 16), size)


FILE_ATTRIBUTE_READONLY = 0x01
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_ARCHIVE = 0x20


def create_file(tree, name: str):
    """Opens `name` for reading and writing through smbprotocol's `tree`,
    made empty (created when missing), others allowed to read meanwhile."""
    f = Open(tree, name)
    f.create(
        ImpersonationLevel.Impersonation,
        FilePipePrinterAccessMask.GENERIC_READ | FilePipePrinterAccessMask.GENERIC_WRITE,
        FileAttributes.FILE_ATTRIBUTE_NORMAL,
        ShareAccess.FILE_SHARE_READ,
        CreateDisposition.FILE_OVERWRITE_IF,
        CreateOptions.FILE_NON_DIRECTORY_FILE,
    )
    return f


def rename(h, new: str, replace_if_exists: bool = False) -> None:
    """Renames what the smbprotocol open `h` (made with DELETE) is on to
    `new` (FileRenameInformation); raises the server's status."""
    info = FileRenameInformation()
    info["replace_if_exists"] = replace_if_exists
    info["file_name"] = new.encode("utf-16-le")
    req = SMB2SetInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_FILE
    req["file_info_class"] = FileInformationClass.FILE_RENAME_INFORMATION
    req["file_id"] = h.file_id
    req["buffer"] = info
    tree = h.tree_connect
    conn = tree.session.connection
    conn.receive(conn.send(req, sid=tree.session.session_id, tid=tree.tree_connect_id))


LISTENING_RE = re.compile(r"^copyless listening on 127\.0\.0\.1:(\d+)$")


class Serve:
    """`copyless serve ARGS --listen 127.0.0.1:0`, as a test that drives
    the command line itself starts it: `port` once it listens, `stdout`
    as it comes, stderr in `base`/serve.stderr."""

    def __init__(self, base: Path, *args: str):
        self.stderr_path = base / "serve.stderr"
        self.argv = [str(copyless_binary()), "serve", *args, "--listen", "127.0.0.1:0"]
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.stdout: list[str] = []
        lines: queue.Queue = queue.Queue()

        def drain():
            for line in self.proc.stdout:
                self.stdout.append(line.rstrip("\n"))
                lines.put(line.rstrip("\n"))
            lines.put(None)

        threading.Thread(target=drain, daemon=True).start()
        self.port = None
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while self.port is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if m := LISTENING_RE.match(line):
                self.port = int(m.group(1))
        if self.port is None:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"no listening line from {' '.join(self.argv)}\n"
                        f"stdout: {self.stdout}\nstderr: {self.stderr()}", pytrace=False)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("copyless did not stop on SIGTERM", pytrace=False)
