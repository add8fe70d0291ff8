"""Fixtures for the integration tests: a running SMB server and shared data.

The server under test is chosen by the environment variable
COPYLESS_TEST_SERVER:

* ``copyless`` (default): the release build at target/release/copyless
  (override the path with COPYLESS_BIN).
* ``samba``: a private smbd started as root on a free loopback port. This
  is how the tests themselves are validated: every test must pass against
  Samba before it can judge copyless.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_KIND = os.environ.get("COPYLESS_TEST_SERVER", "copyless")
STARTUP_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0

TEST_USER = "testuser"
TEST_PASSWORD = "Corr3ct-Horse-Battery"
SHARE_NAME = "share"
BIG_FILE_SIZE = 100 * 1024 * 1024

LISTENING_RE = re.compile(r"^copyless listening on (127\.\d+\.\d+\.\d+):(\d+)$")
METRICS_RE = re.compile(r"^copyless metrics on (http://\S+)$")

if SERVER_KIND not in ("copyless", "samba"):
    raise pytest.UsageError(
        f"COPYLESS_TEST_SERVER must be 'copyless' or 'samba', not {SERVER_KIND!r}"
    )


class Server(NamedTuple):
    """Where and how to reach the server under test."""

    host: str
    port: int
    share: str
    share_path: Path
    user: str
    password: str
    # copyless only: its control socket (for `copyless top`) and the URL of
    # its Prometheus endpoint.
    control: Path | None = None
    metrics_url: str | None = None


class RunningServer(NamedTuple):
    info: Server
    proc: subprocess.Popen
    log_paths: tuple[Path, ...]

    def logs(self) -> str:
        return _read_logs(self.log_paths)


def _supports_user_xattrs(directory: str) -> bool:
    # Both servers keep DOS attributes in user xattrs; tmpfs only has them
    # on Linux >= 6.6, so fall back to the ordinary temp dir otherwise.
    try:
        fd, probe = tempfile.mkstemp(dir=directory)
    except OSError:
        return False
    try:
        os.setxattr(probe, "user.copyless-probe", b"1")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
        os.unlink(probe)


def _temp_base() -> str | None:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK) and _supports_user_xattrs(shm):
        return shm
    return None


TEMP_BASE = _temp_base()


def make_temp_dir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"copyless-{prefix}-", dir=TEMP_BASE))
    # smbd drops to the test user's uid for file access; it must be able to
    # traverse every directory we create.
    path.chmod(0o755)
    return path


@pytest.fixture
def temp_dir():
    path = make_temp_dir("tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _read_logs(paths) -> str:
    parts = []
    for path in paths:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError as exc:
            text = f"<cannot read: {exc}>"
        parts.append(f"----- {path} (last 4000 chars) -----\n{text[-4000:]}")
    return "\n".join(parts)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(host: str, port: int, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not accept connections on {host}:{port} within {timeout} s")


# --------------------------------------------------------------------------
# copyless


def copyless_binary() -> Path:
    # Where `cargo build --release` put it, CARGO_TARGET_DIR included.
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    return Path(os.environ.get("COPYLESS_BIN", target / "release" / "copyless"))


def unix_user_args() -> list[str]:
    """How `copyless user add` links a test user to a Unix account: as root
    (as on CI), a system account of the user's name, made when missing (an
    existing one is linked, so reruns work); otherwise the account we run
    as, the only one an unprivileged server can act as anyway."""
    if os.geteuid() == 0:
        return ["--create-unix-user"]
    return ["--unix-user", pwd.getpwuid(os.geteuid()).pw_name]


_startup_timeouts: list[str] = []


def _start_copyless(base: Path, *, extra_users=(), preexec_fn=None,
                    extra_config: str = "", prepare_share=None,
                    share_flag: bool = True,
                    metrics_listen: str = "127.0.0.1:0",
                    listen: str = "127.0.0.1:0") -> RunningServer:
    """Starts copyless on a fresh share with TEST_USER and each (name,
    password) of `extra_users`; `preexec_fn` runs in the server's process
    before exec (e.g. to set its resource limits); `extra_config` is added
    to its config file (whole tables, such as a [limits] section);
    `prepare_share` is called with the share's empty directory before the
    server starts (e.g. to mount a filesystem there). Without `share_flag`
    the share (base/share) is not given with --share, which would replace
    the config's shares: `extra_config` then declares it, and any others.
    `metrics_listen` is the `[metrics] listen` address; `extra_config`
    may go on with more keys of `[metrics]`. `listen` is where it serves
    SMB (a loopback address)."""
    if _startup_timeouts:
        pytest.fail(
            "not started: an earlier start of copyless in this session timed out:\n"
            + _startup_timeouts[0],
            pytrace=False,
        )
    binary = copyless_binary()
    if not binary.is_file() or not os.access(binary, os.X_OK):
        pytest.fail(
            f"copyless binary not found or not executable at {binary}; "
            "build it first with `cargo build --release` (./test.sh does)",
            pytrace=False,
        )
    state = base / "state"
    share = base / "share"
    state.mkdir()
    share.mkdir()
    if prepare_share is not None:
        prepare_share(share)

    for name, password in ((TEST_USER, TEST_PASSWORD), *extra_users):
        user_add = subprocess.run(
            [str(binary), "user", "add", name, *unix_user_args(), "--password-stdin",
             "--state-dir", str(state)],
            input=password + "\n",
            capture_output=True,
            text=True,
            timeout=30,
        )
        if user_add.returncode != 0:
            pytest.fail(
                f"`copyless user add {name}` failed with status {user_add.returncode}\n"
                f"stdout:\n{user_add.stdout}\nstderr:\n{user_add.stderr}",
                pytrace=False,
            )
    if os.geteuid() == 0:
        # Each user acts as its own Unix account on disk, as under Samba:
        # the share belongs to the test user, and is open to the others a
        # test adds.
        owner = pwd.getpwnam(TEST_USER)
        os.chown(share, owner.pw_uid, owner.pw_gid)
        if extra_users:
            share.chmod(0o777)

    # The tracing interface, in this test's directory: the control socket
    # for `copyless top` and a Prometheus endpoint on a port of its own.
    control = base / "control.sock"
    config = base / "copyless.toml"
    # A JSON string is a valid TOML basic string.
    config.write_text(
        f"control = {json.dumps(str(control))}\n\n[metrics]\nlisten = {json.dumps(metrics_listen)}\n"
        + extra_config
    )

    stderr_path = base / "copyless.stderr"
    stdout_path = base / "copyless.stdout"
    argv = [
        str(binary),
        "serve",
        "--config",
        str(config),
        "--listen",
        listen,
        "--state-dir",
        str(state),
    ]
    if share_flag:
        argv += ["--share", f"{SHARE_NAME}={share}"]
    # The whole suite runs once per engine (test.sh sets this).
    if os.environ.get("COPYLESS_ENGINE"):
        argv += ["--engine", os.environ["COPYLESS_ENGINE"]]
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=base,
            preexec_fn=preexec_fn,
        )

    # A reader thread so that the timeout holds even if the server prints
    # nothing, and so that later output never fills the pipe and blocks it.
    lines: queue.Queue = queue.Queue()

    def drain():
        with open(stdout_path, "w") as copy:
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                copy.write(line + "\n")
                copy.flush()
                lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()

    port = None
    host = "127.0.0.1"
    metrics_url = None
    seen = []
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while port is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        match = LISTENING_RE.match(line)
        if match:
            host, port = match.group(1), int(match.group(2))
        match = METRICS_RE.match(line)
        if match:
            metrics_url = match.group(1)

    if port is None:
        if proc.poll() is None:
            state_text = "still running, killed"
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
            timed_out = True
        else:
            state_text = f"exited with status {proc.returncode}"
            timed_out = False
        time.sleep(0.1)  # let the drain thread copy the last lines
        message = (
            f"copyless did not print 'copyless listening on 127.0.0.1:PORT' within "
            f"{STARTUP_TIMEOUT:.0f} s ({state_text})\n"
            f"command: {' '.join(argv)}\n"
            "stdout so far:\n" + "\n".join(seen) + "\n" + _read_logs([stderr_path])
        )
        if timed_out:
            # Every later test would wait just as long; fail them at once.
            _startup_timeouts.append(message)
        pytest.fail(message, pytrace=False)

    info = Server(host, port, SHARE_NAME, share, TEST_USER, TEST_PASSWORD,
                  control, metrics_url)
    return RunningServer(info, proc, (stdout_path, stderr_path))


@contextlib.contextmanager
def copyless_on_btrfs(share_keys: str = ""):
    """copyless serving its share from a fresh btrfs image, loop-mounted
    (which needs root); `share_keys` are lines of TOML for the share's
    table. Yields the running server."""
    if os.geteuid() != 0:
        pytest.fail("mounting a btrfs image needs root", pytrace=False)
    base = make_temp_dir("btrfs")
    image = base / "image"
    share = base / "share"

    def mount(folder):
        subprocess.run(["truncate", "-s", "1G", str(image)], check=True)
        subprocess.run(["mkfs.btrfs", "-q", "-f", str(image)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(folder)], check=True)

    table = f"\n[[share]]\nname = {json.dumps(SHARE_NAME)}\npath = {json.dumps(str(share))}\n"
    try:
        running = _start_copyless(base, prepare_share=mount, share_flag=False,
                                  extra_config=table + share_keys + "\n")
    except BaseException:
        subprocess.run(["umount", "-l", str(share)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        raise
    try:
        yield running
    finally:
        _stop_copyless(running)
        subprocess.run(["umount", "-l", str(share)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _stop_copyless(running: RunningServer) -> None:
    proc = running.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(
            f"copyless did not exit within {STOP_TIMEOUT:.0f} s of SIGTERM\n" + running.logs(),
            pytrace=False,
        )
    assert status == 0, (
        f"copyless exited with status {status} after SIGTERM (expected 0)\n" + running.logs()
    )


# --------------------------------------------------------------------------
# Samba


def _ensure_unix_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(name)


SAMBA_CONF = """\
[global]
    server role = standalone server
    workgroup = WORKGROUP
    netbios name = COPYLESSTEST
    security = user
    map to guest = never
    passdb backend = tdbsam:{private}/passdb.tdb
    smb ports = {port}
    interfaces = lo
    bind interfaces only = yes
    disable netbios = yes
    server min protocol = SMB2_02
    server signing = mandatory
    private dir = {private}
    lock directory = {lock}
    state directory = {state}
    cache directory = {cache}
    pid directory = {pid}
    ncalrpc dir = {ncalrpc}
    log file = {log}
    log level = 1
    max log size = 0
    load printers = no
    printing = bsd
    printcap name = /dev/null
    disable spoolss = yes
    kernel oplocks = no
    # Samba's defaults, spelled out because the symlink tests rely on them.
    follow symlinks = yes
    wide links = no

[{share}]
    path = {share_path}
    read only = no
    valid users = {user}
    # NT ACLs kept as set, as on Windows (and as copyless keeps them),
    # rather than mapped onto POSIX ACLs.
    vfs objects = acl_xattr streams_xattr
    acl_xattr:ignore system acls = yes
"""


def _start_samba(base: Path) -> RunningServer:
    if os.geteuid() != 0:
        pytest.fail("COPYLESS_TEST_SERVER=samba needs root (smbd, useradd)", pytrace=False)
    smbd = shutil.which("smbd") or "/usr/sbin/smbd"
    if not os.path.exists(smbd):
        pytest.fail("smbd not found; install the Debian package 'samba'", pytrace=False)
    user = _ensure_unix_user(TEST_USER)

    dirs = {}
    for name in ("private", "lock", "state", "cache", "pid", "ncalrpc"):
        dirs[name] = base / name
        dirs[name].mkdir()
    share = base / "share"
    share.mkdir()
    os.chown(share, user.pw_uid, user.pw_gid)
    log = base / "smbd.log"
    output = base / "smbd.output"
    port = free_port()

    conf = base / "smb.conf"
    conf.write_text(
        SAMBA_CONF.format(
            port=port,
            log=log,
            share=SHARE_NAME,
            share_path=share,
            user=TEST_USER,
            **dirs,
        )
    )

    subprocess.run(
        ["smbpasswd", "-c", str(conf), "-a", "-s", TEST_USER],
        input=f"{TEST_PASSWORD}\n{TEST_PASSWORD}\n",
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )

    with open(output, "wb") as out:
        proc = subprocess.Popen(
            [smbd, "--foreground", "--no-process-group", "-s", str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=base,
            # smbd forks a child per connection and samba-dcerpcd on demand;
            # a session of their own lets teardown stop them all together.
            start_new_session=True,
        )
    running = RunningServer(
        Server("127.0.0.1", port, SHARE_NAME, share, TEST_USER, TEST_PASSWORD),
        proc,
        (output, log),
    )
    try:
        wait_for_port("127.0.0.1", port, proc, STARTUP_TIMEOUT)
    except RuntimeError as exc:
        _stop_samba(running)
        pytest.fail(f"smbd failed to start: {exc}\n{running.logs()}", pytrace=False)
    return running


def _samba_helpers(conf: Path) -> list[int]:
    """Processes started with our private config, e.g. samba-dcerpcd.

    smbd starts samba-dcerpcd on demand in a session of its own, so it
    escapes the process group; its command line names our config file.
    """
    needle = f"--configfile={conf}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _stop_samba(running: RunningServer) -> None:
    conf = running.info.share_path.parent / "smb.conf"
    pgid = running.proc.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _signal_all(_samba_helpers(conf), signal.SIGTERM)
    try:
        running.proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    running.proc.wait()
    deadline = time.monotonic() + STOP_TIMEOUT
    while (helpers := _samba_helpers(conf)) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_all(helpers, signal.SIGKILL)


# --------------------------------------------------------------------------
# fixtures


@pytest.fixture
def running_server():
    """A fresh server with an empty share, stopped at teardown."""
    base = make_temp_dir("server")
    start, stop = (_start_samba, _stop_samba) if SERVER_KIND == "samba" else (
        _start_copyless, _stop_copyless)
    try:
        running = start(base)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    try:
        yield running
    finally:
        try:
            stop(running)
        finally:
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def server(running_server) -> Server:
    """(host, port, share name, share path, user, password) of a fresh server."""
    return running_server.info


class BigFile(NamedTuple):
    path: Path
    size: int
    sha256: str


@pytest.fixture(scope="session")
def big_file():
    """A 100 MiB file of random bytes, made once per test session."""
    base = make_temp_dir("big")
    path = base / "big.bin"
    digest = hashlib.sha256()
    chunk_size = 4 * 1024 * 1024
    with open(path, "wb") as out:
        for _ in range(BIG_FILE_SIZE // chunk_size):
            chunk = os.urandom(chunk_size)
            digest.update(chunk)
            out.write(chunk)
    path.chmod(0o644)
    yield BigFile(path, BIG_FILE_SIZE, digest.hexdigest())
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def client_conf():
    """An empty smb.conf so that smbclient ignores the machine's own config."""
    base = make_temp_dir("client")
    conf = base / "client.conf"
    conf.write_text("[global]\n")
    yield conf
    shutil.rmtree(base, ignore_errors=True)
