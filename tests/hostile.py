"""Tools for the hostile-client tests (test_hostile.py).

* A harness that measures the server process from outside: its resident
  memory sampled in the background, its CPU seconds, the size of its logs.
* The well-behaved client: smbclient putting and getting a random file.
* The attackers: sockets that never authenticate, and `RawSmb`, a minimal
  SMB 2.1 client on a socket of its own that logs in with NTLM and signs
  its requests, so that it can send frames no ordinary client would (its
  own compounds, credit charges and lengths) and check every byte the
  server sends back.
"""

from __future__ import annotations

import hashlib
import hmac
import heapq
import os
import random
import resource
import selectors
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, NamedTuple

import spnego
from smbprotocol.header import NtStatus

from support import NT_STATUS_RE, run, smbclient_argv

KIB = 1024
MIB = 1024 * KIB

# --------------------------------------------------------------------------
# The server process, measured from outside


def rss_bytes(pid: int) -> int | None:
    """Resident set size of a process (VmRSS), None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * KIB
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process and all its threads."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name in parentheses may hold spaces; fields count from
    # after it: utime and stime are fields 14 and 15 of the whole line.
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler:
    """Samples a process's RSS every `interval` seconds in a thread, so
    that a short-lived peak during an attack is seen."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            rss = rss_bytes(self.pid)
            if rss is None:
                return  # the process is gone; the liveness check says so
            self.peak = max(self.peak, rss)
            self.samples += 1
            if self._stop.wait(self.interval):
                return

    def start(self) -> RssSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def raise_nofile(needed: int) -> None:
    """Raises this process's descriptor limit to at least `needed` (the
    attackers hold thousands of sockets). Raises OSError or ValueError
    when the hard limit is lower and this process may not raise it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        hard = needed  # only root may do this
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Polls `condition` until it holds or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# --------------------------------------------------------------------------
# The well-behaved client

GOOD_CLIENT_TIMEOUT = 40.0  # smbclient gives up on an unanswered request after 20 s


class GoodClient:
    """smbclient putting a ~1 MiB random file and getting it back."""

    def __init__(self, server, client_conf, user: str, password: str, workdir: Path):
        self.server = server
        self.client_conf = client_conf
        self.user = user
        self.password = password
        self.workdir = workdir
        self.data = os.urandom(MIB + 4321)
        self.local = workdir / "good.bin"
        self.local.write_bytes(self.data)

    def put_get(self, when: str) -> str | None:
        """None if put and get worked and the bytes came back identical,
        else what went wrong."""
        tag = "".join(c if c.isalnum() else "-" for c in when)
        remote = f"good-{tag}.bin"
        back = self.workdir / f"back-{tag}.bin"
        argv = smbclient_argv(self.server, self.client_conf, share=self.server.share,
                              user=self.user, password=self.password,
                              extra=["-c", f"put {self.local} {remote}; get {remote} {back}"])
        started = time.monotonic()
        try:
            result = run(argv, timeout=GOOD_CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            return (f"the good client's put/get {when} did not finish within "
                    f"{GOOD_CLIENT_TIMEOUT:.0f} s")
        took = time.monotonic() - started
        statuses = NT_STATUS_RE.findall(result.output)
        if result.returncode != 0 or statuses:
            tail = result.output.strip().splitlines()[-3:]
            return (f"the good client's put/get {when} failed after {took:.1f} s: exit status "
                    f"{result.returncode}, {', '.join(statuses) or 'no NT status'}; "
                    f"smbclient said: {' | '.join(tail)}")
        got = back.read_bytes() if back.exists() else None
        if got != self.data:
            size = "nothing" if got is None else f"{len(got)} bytes"
            return (f"the good client {when} got back {size} that differ from the "
                    f"{len(self.data)} bytes it put")
        return None


# --------------------------------------------------------------------------
# Sockets

IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


def connect_from(source: str, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection from a chosen loopback source address (all of
    127.0.0.0/8 is loopback on Linux), so that per-address limits of the
    server can be aimed at or avoided."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # Pick the source port at connect time, not at bind: thousands of
        # sockets from one address must not run out of ports.
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((source, 0))
        sock.settimeout(timeout)
        sock.connect((host, port))
        return sock
    except BaseException:
        sock.close()
        raise


def is_closed_by_peer(sock: socket.socket) -> bool:
    """True when the peer closed or reset the connection (without waiting)."""
    # A socket with a timeout would wait for data despite MSG_DONTWAIT.
    sock.setblocking(False)
    try:
        data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return data == b""


def loopback_range(first: int, count: int) -> list[str]:
    return [f"127.0.0.{first + i}" for i in range(count)]


class SocketGroup:
    """Raw TCP connections held open by an attacker."""

    def __init__(self):
        self.sockets: list[socket.socket] = []
        self.failed = 0  # connects refused or timed out
        self.errors: dict[str, int] = {}

    def connect(self, source: str, host: str, port: int, first_bytes: bytes = b"",
                timeout: float = 5.0) -> bool:
        try:
            sock = connect_from(source, host, port, timeout)
        except OSError as exc:
            self.failed += 1
            name = type(exc).__name__
            self.errors[name] = self.errors.get(name, 0) + 1
            return False
        self.sockets.append(sock)
        if first_bytes:
            try:
                sock.sendall(first_bytes)
            except OSError:
                pass  # closed already: counted by open_count()
        return True

    def open_count(self) -> int:
        return sum(not is_closed_by_peer(s) for s in self.sockets)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets.clear()


# --------------------------------------------------------------------------
# SMB2 wire format: just what the attackers need

NEGOTIATE, SESSION_SETUP, TREE_CONNECT, CREATE, READ = 0, 1, 3, 5, 8
ECHO, QUERY_DIRECTORY = 13, 14

STATUS_SUCCESS = 0x00000000
STATUS_PENDING = 0x00000103
STATUS_BUFFER_OVERFLOW = 0x80000005
STATUS_MORE_PROCESSING_REQUIRED = 0xC0000016
STATUS_INSUFFICIENT_RESOURCES = 0xC000009A

FLAG_RESPONSE = 0x01
FLAG_ASYNC = 0x02
FLAG_SIGNED = 0x08

HEADER_LEN = 64
MAX_FRAME = (1 << 24) - 1  # the 24-bit length of the Direct TCP transport

DIALECT_202, DIALECT_210 = 0x0202, 0x0210
FILE_ID_BOTH_DIRECTORY_INFORMATION = 0x25
SMB2_RESTART_SCANS = 0x01
FILE_OPEN, FILE_OPEN_IF = 1, 3
FILE_DIRECTORY_FILE, FILE_NON_DIRECTORY_FILE = 0x01, 0x40
READ_ACCESS = 0x00120089  # read data, EAs, attributes, control; synchronize
READ_WRITE_ACCESS = 0x0012019F


def _status_names() -> dict[int, str]:
    names = {value: name for name, value in vars(NtStatus).items() if name.startswith("STATUS_")}
    names[0xC000011F] = "STATUS_TOO_MANY_OPENED_FILES"
    return names


STATUS_NAMES = _status_names()


def status_name(status: int | None) -> str:
    if status is None:
        return "no failure"
    return STATUS_NAMES.get(status, f"0x{status:08X}")


def frame(payload: bytes) -> bytes:
    """Direct TCP framing: a zero byte and a 24-bit big-endian length."""
    assert len(payload) <= MAX_FRAME, "the test built a frame too large to send"
    return struct.pack(">I", len(payload)) + payload


def header(command: int, message_id: int, *, charge: int = 1, credit_request: int = 1,
           session_id: int = 0, tree_id: int = 0, flags: int = 0) -> bytes:
    return b"\xfeSMB" + struct.pack(
        "<HHIHHIIQIIQ16s", HEADER_LEN, charge, 0, command, credit_request, flags, 0,
        message_id, 0xFEFF, tree_id, session_id, bytes(16))


def negotiate_body(dialects=(DIALECT_202, DIALECT_210)) -> bytes:
    # Signing enabled, no capabilities; without 3.1.1 no negotiate contexts.
    return (struct.pack("<HHHHI", 36, len(dialects), 0x0001, 0, 0) + os.urandom(16) + bytes(8)
            + b"".join(struct.pack("<H", d) for d in dialects))


def echo_body() -> bytes:
    return struct.pack("<HH", 4, 0)


def session_setup_body(token: bytes) -> bytes:
    return struct.pack("<HBBIIHHQ", 25, 0, 0x01, 0, 0, HEADER_LEN + 24, len(token), 0) + token


def tree_connect_body(unc: str) -> bytes:
    path = unc.encode("utf-16-le")
    return struct.pack("<HHHH", 9, 0, HEADER_LEN + 8, len(path)) + path


def create_body(name: str, *, access: int, disposition: int, options: int) -> bytes:
    encoded = name.encode("utf-16-le")
    fixed = struct.pack("<HBBIQQIIIIIHHII", 57, 0, 0, 2, 0, 0, access, 0, 0x7, disposition,
                        options, HEADER_LEN + 56, len(encoded), 0, 0)
    return fixed + (encoded or b"\0")


def read_body(file_id: bytes, length: int, offset: int = 0) -> bytes:
    return struct.pack("<HBBIQ16sIIIHHB", 49, 0, 0, length, offset, file_id, 0, 0, 0, 0, 0, 0)


def query_directory_body(file_id: bytes, pattern: str, output_length: int, *,
                         flags: int = SMB2_RESTART_SCANS,
                         info_class: int = FILE_ID_BOTH_DIRECTORY_INFORMATION) -> bytes:
    encoded = pattern.encode("utf-16-le")
    fixed = struct.pack("<HBBI16sHHI", 33, info_class, flags, 0, file_id, HEADER_LEN + 32,
                        len(encoded), output_length)
    return fixed + (encoded or b"\0")


class Malformed(Exception):
    """The server sent bytes that are not a well-formed SMB2 reply frame."""


class Reply(NamedTuple):
    command: int
    status: int
    flags: int
    credits: int
    message_id: int
    tree_id: int
    session_id: int
    body: bytes  # the bytes after the header, up to the next reply
    size: int  # header and body of this reply
    async_id: int = 0  # of an asynchronous reply (FLAG_ASYNC)


def _u16(b, o):
    return struct.unpack_from("<H", b, o)[0]


def _u32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def parse_replies(payload: bytes, keep_bodies: bool = True) -> list[Reply]:
    """Splits one received frame into its replies, checking that each is
    a well-formed SMB2 response: the magic, the header size, a NextCommand
    that stays inside the frame, and a body holding at least its fixed part
    and, for READ and QUERY_DIRECTORY, the data it says it holds."""
    payload = memoryview(payload)
    replies = []
    offset = 0
    while True:
        where = f"reply {len(replies) + 1} at byte {offset} of a {len(payload)}-byte frame"
        if len(payload) - offset < HEADER_LEN:
            raise Malformed(f"{where}: {len(payload) - offset} bytes, less than an SMB2 header")
        if payload[offset:offset + 4] != b"\xfeSMB":
            raise Malformed(f"{where}: protocol id {bytes(payload[offset:offset + 4])!r}")
        (size, _charge, status, command, credits, flags, next_command, message_id, _pid,
         tree_id, session_id) = struct.unpack_from("<HHIHHIIQIIQ", payload, offset + 4)
        if size != HEADER_LEN:
            raise Malformed(f"{where}: header StructureSize {size}")
        if not flags & FLAG_RESPONSE:
            raise Malformed(f"{where}: the response flag is not set")
        if next_command:
            if next_command % 8 or next_command < HEADER_LEN or offset + next_command > len(payload):
                raise Malformed(f"{where}: NextCommand {next_command} does not point at a "
                                f"reply inside the frame")
            end = offset + next_command
        else:
            end = len(payload)
        body = payload[offset + HEADER_LEN:end]
        _check_body(where, command, status, body)
        async_id = struct.unpack_from("<Q", payload, offset + 32)[0] if flags & FLAG_ASYNC else 0
        replies.append(Reply(command, status, flags, credits, message_id, tree_id, session_id,
                             bytes(body) if keep_bodies else b"", end - offset, async_id))
        if not next_command:
            return replies
        offset = end


def _check_body(where: str, command: int, status: int, body: bytes) -> None:
    if len(body) < 2:
        raise Malformed(f"{where}: body of {len(body)} bytes (command {command}, "
                        f"status {status_name(status)})")
    # The StructureSize counts one byte of the variable part when there is one.
    fixed = _u16(body, 0) & ~1
    if len(body) < fixed:
        raise Malformed(f"{where}: body of {len(body)} bytes, its StructureSize says {fixed}")
    if status not in (STATUS_SUCCESS, STATUS_BUFFER_OVERFLOW) or fixed == 8:
        return  # an error response (StructureSize 9): checked above
    if command == READ:
        data_offset, data_length = body[2], _u32(body, 4)
        if data_length and data_offset - HEADER_LEN + data_length > len(body):
            raise Malformed(f"{where}: READ reply says {data_length} bytes at offset "
                            f"{data_offset}, but the reply holds {len(body) + HEADER_LEN}")
    elif command == QUERY_DIRECTORY:
        out_offset, out_length = _u16(body, 2), _u32(body, 4)
        if out_length and out_offset - HEADER_LEN + out_length > len(body):
            raise Malformed(f"{where}: QUERY_DIRECTORY reply says {out_length} bytes at offset "
                            f"{out_offset}, but the reply holds {len(body) + HEADER_LEN}")


class ServerClosed(Exception):
    """The server closed the connection between frames."""


class SmbError(Exception):
    """A step of logging in failed."""


class Outcome(NamedTuple):
    """What an attacker saw after sending a frame."""

    statuses: dict[int, int]  # message id -> status of its final reply
    frames: int
    largest_frame: int
    closed: bool  # the server closed the connection
    malformed: str | None  # the first malformed bytes received, if any
    timed_out: bool

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for status in self.statuses.values():
            counts[status_name(status)] = counts.get(status_name(status), 0) + 1
        parts = [f"{len(self.statuses)} replies ({counts or 'none'}) in {self.frames} frames, "
                 f"largest frame {self.largest_frame} bytes"]
        if self.closed:
            parts.append("then the server closed the connection")
        if self.malformed:
            parts.append(f"MALFORMED: {self.malformed}")
        if self.timed_out:
            parts.append("then nothing more came (timed out)")
        return "; ".join(parts)


class RawSmb:
    """A minimal SMB 2.1 client: NTLM login, HMAC-SHA256 signing, credits
    counted, every received frame checked by `parse_replies`.

    SMB 2.1 keeps signing simple (the session key signs, no key derivation)
    and has large MTU, so credit charges matter as they do on 3.x."""

    CREDIT_REQUEST = 256

    def __init__(self, host: str, port: int, *, source: str = "127.0.0.1",
                 timeout: float = 10.0):
        self.host = host
        self.timeout = timeout
        self.sock = connect_from(source, host, port, timeout)
        self.next_message_id = 0
        self.credits = 1  # a new connection may use message id 0 only
        self.session_id = 0
        self.tree_id = 0
        self.signing_key: bytes | None = None
        self.sent = threading.Event()  # set once `exchange` has sent its frame

    @classmethod
    def logged_in(cls, host: str, port: int, user: str, password: str, share: str,
                  **kwargs) -> RawSmb:
        client = cls(host, port, **kwargs)
        try:
            client.negotiate()
            if user:
                client.session_setup(user, password)
            else:
                client.anonymous_session_setup()
            client.tree_connect(share)
        except BaseException:
            client.close()
            raise
        return client

    def close(self) -> None:
        self.sock.close()

    # -- building and sending

    def message(self, command: int, body: bytes, *, charge: int = 1,
                credit_request: int | None = None) -> bytes:
        """One request with the next message ids (a charge of N uses N)."""
        message_id = self.next_message_id
        self.next_message_id += max(charge, 1)
        self.credits -= max(charge, 1)
        return header(command, message_id, charge=charge,
                      credit_request=self.CREDIT_REQUEST if credit_request is None else credit_request,
                      session_id=self.session_id, tree_id=self.tree_id) + body

    def compound(self, messages: list[bytes]) -> bytes:
        """The frame payload holding `messages` as one compound: each but the
        last padded to 8 bytes and pointing at the next, each signed over
        its own bytes, padding included (MS-SMB2 3.2.4.1.4)."""
        parts = []
        for i, msg in enumerate(messages):
            part = bytearray(msg)
            if i + 1 < len(messages):
                part += bytes(-len(part) % 8)
                struct.pack_into("<I", part, 20, len(part))
            if self.signing_key is not None:
                struct.pack_into("<I", part, 16, _u32(part, 16) | FLAG_SIGNED)
                part[48:64] = hmac.new(self.signing_key, bytes(part), hashlib.sha256).digest()[:16]
            parts.append(bytes(part))
        return b"".join(parts)

    def send(self, messages: list[bytes]) -> None:
        self.sock.sendall(frame(self.compound(messages)))

    # -- receiving

    def _recv_exact(self, count: int, deadline: float) -> bytes | None:
        chunks = []
        remaining = count
        while remaining:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(min(remaining, 4 * MIB))
            except ConnectionError:  # reset: as good as closed
                chunk = b""
            if not chunk:
                return None
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def recv_frame(self, timeout: float | None = None, keep_bodies: bool = True) -> list[Reply]:
        """The replies of the next frame. Raises ServerClosed, Malformed or
        socket.timeout."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        prefix = self._recv_exact(4, deadline)
        if prefix is None:
            raise ServerClosed()
        if prefix[0] != 0:
            raise Malformed(f"frame prefix {prefix.hex()}: the first byte is not zero")
        length = int.from_bytes(prefix[1:], "big")
        payload = self._recv_exact(length, deadline)
        if payload is None:
            raise Malformed(f"the connection closed inside a frame announced as {length} bytes")
        replies = parse_replies(payload, keep_bodies)
        for reply in replies:
            self.credits += reply.credits
        return replies

    def call(self, command: int, body: bytes, **kwargs) -> Reply:
        """Sends one request and returns its final reply."""
        msg = self.message(command, body, **kwargs)
        message_id = struct.unpack_from("<Q", msg, 24)[0]
        self.send([msg])
        while True:
            for reply in self.recv_frame():
                if reply.message_id != message_id:
                    raise SmbError(f"reply to message {reply.message_id}, expected {message_id}")
                if not (reply.status == STATUS_PENDING and reply.flags & FLAG_ASYNC):
                    return reply

    def exchange(self, messages: list[bytes], *, timeout: float = 60.0) -> Outcome:
        """Sends `messages` as one compound and reads until every one has a
        final reply, the server closes, a frame is malformed, or `timeout`."""
        pending = {struct.unpack_from("<Q", m, 24)[0] for m in messages}
        payload = self.compound(messages)
        try:
            self.sock.sendall(frame(payload))
        except ConnectionError:
            pass  # closed before it read everything: what came back tells
        finally:
            self.sent.set()
        statuses: dict[int, int] = {}
        frames = largest = 0
        closed = timed_out = False
        malformed = None
        deadline = time.monotonic() + timeout
        while pending:
            try:
                replies = self.recv_frame(max(0.01, deadline - time.monotonic()),
                                          keep_bodies=False)
            except ServerClosed:
                closed = True
                break
            except Malformed as exc:
                malformed = str(exc)
                break
            except socket.timeout:
                timed_out = True
                break
            frames += 1
            largest = max(largest, sum(r.size for r in replies))
            for reply in replies:
                if not (reply.status == STATUS_PENDING and reply.flags & FLAG_ASYNC):
                    statuses[reply.message_id] = reply.status
                    pending.discard(reply.message_id)
        return Outcome(statuses, frames, largest, closed, malformed, timed_out)

    # -- logging in

    def negotiate(self) -> None:
        reply = self.call(NEGOTIATE, negotiate_body())
        if reply.status != STATUS_SUCCESS:
            raise SmbError(f"NEGOTIATE failed: {status_name(reply.status)}")
        dialect = _u16(reply.body, 4)
        if dialect not in (DIALECT_202, DIALECT_210):
            raise SmbError(f"NEGOTIATE chose dialect 0x{dialect:04x}")

    def session_setup(self, user: str, password: str) -> None:
        context = spnego.client(user, password, hostname=self.host, service="cifs",
                                protocol="ntlm")
        token = context.step()
        while True:
            reply = self.call(SESSION_SETUP, session_setup_body(token))
            self.session_id = reply.session_id
            if reply.status == STATUS_SUCCESS:
                break
            if reply.status != STATUS_MORE_PROCESSING_REQUIRED:
                raise SmbError(f"SESSION_SETUP as {user} failed: {status_name(reply.status)}")
            offset, length = _u16(reply.body, 4), _u16(reply.body, 6)
            token = context.step(reply.body[offset - HEADER_LEN:offset - HEADER_LEN + length])
        # SMB 2.x signs with the session key itself (MS-SMB2 3.2.5.3.1).
        self.signing_key = context.session_key[:16].ljust(16, b"\0")

    def anonymous_session_setup(self) -> None:
        """An anonymous logon: raw NTLMSSP, whose AUTHENTICATE names no
        user and answers with an empty NT response and a one-byte LM one
        (MS-NLMP 3.2.5.1.2). It has no session key, so nothing is signed."""
        flags = 0x1 | 0x2 | 0x4 | 0x200 | 0x8000 | 0x80000 | 0x2000000 | 0x20000000 | 0x80000000
        field = lambda length, offset: struct.pack("<HHI", length, length, offset)  # noqa: E731
        negotiate = (b"NTLMSSP\0" + struct.pack("<II", 1, flags) + field(0, 40) * 2
                     + bytes([10, 0, 0x61, 0x4A, 0, 0, 0, 0x0F]))
        reply = self.call(SESSION_SETUP, session_setup_body(negotiate))
        if reply.status != STATUS_MORE_PROCESSING_REQUIRED:
            raise SmbError(f"anonymous NEGOTIATE: {status_name(reply.status)}")
        self.session_id = reply.session_id
        authenticate = (b"NTLMSSP\0" + struct.pack("<I", 3) + field(1, 88) + field(0, 89) * 5
                        + struct.pack("<I", flags | 0x800) + bytes(24) + b"\0")
        reply = self.call(SESSION_SETUP, session_setup_body(authenticate))
        if reply.status != STATUS_SUCCESS:
            raise SmbError(f"anonymous AUTHENTICATE: {status_name(reply.status)}")

    def tree_connect(self, share: str) -> None:
        reply = self.call(TREE_CONNECT, tree_connect_body(f"\\\\{self.host}\\{share}"))
        if reply.status != STATUS_SUCCESS:
            raise SmbError(f"TREE_CONNECT to {share} failed: {status_name(reply.status)}")
        self.tree_id = reply.tree_id

    def create(self, name: str, *, directory: bool = False, disposition: int = FILE_OPEN,
               access: int = READ_ACCESS) -> tuple[int, bytes | None]:
        """(status, file id) of a CREATE; the file id is None on failure."""
        options = FILE_DIRECTORY_FILE if directory else FILE_NON_DIRECTORY_FILE
        reply = self.call(CREATE, create_body(name, access=access, disposition=disposition,
                                              options=options))
        if reply.status != STATUS_SUCCESS:
            return reply.status, None
        return reply.status, bytes(reply.body[64:80])

    def top_up_credits(self, wanted: int) -> None:
        """Asks for credits with ECHOs until `wanted` are held or the server
        stops granting more."""
        while self.credits < wanted:
            before = self.credits
            self.call(ECHO, echo_body(), credit_request=min(wanted - self.credits + 1, 8192))
            if self.credits <= before:
                return


# --------------------------------------------------------------------------
# Connections that never authenticate


class _Squat(NamedTuple):
    sock: socket.socket
    data: bytes  # what it sends, piece by piece
    piece: int  # bytes per send (1: dribble) or the length of one ECHO frame


class Squatters:
    """Many connections that never authenticate and never go quiet, driven
    by one thread: half dribble a NEGOTIATE one byte at a time, half send a
    NEGOTIATE and then a pre-authentication ECHO (SessionId 0), each every
    2-3 s. Counts how many the server closes."""

    def __init__(self, host: str, port: int, sources: list[str], count: int,
                 interval: tuple[float, float] = (2.0, 3.0), seed: int = 7):
        self.host, self.port = host, port
        self.sources = sources
        self.count = count
        self.interval = interval
        self.rng = random.Random(seed)
        self.refused = 0
        self.connected = 0
        self.closed_by_server = 0
        self._squats: dict[int, tuple[_Squat, int]] = {}  # fd -> (squat, bytes sent)
        self._selector = selectors.DefaultSelector()
        self._due: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="squatters", daemon=True)
        self._lock = threading.Lock()

    @property
    def still_open(self) -> int:
        return self.connected - self.closed_by_server

    def start(self, connect_within: float = 10.0) -> None:
        """Opens every connection, sends each its first bytes, then keeps
        them all busy from a thread. Connections not made within
        `connect_within` seconds count as refused."""
        dribble = frame(header(NEGOTIATE, 0) + negotiate_body())
        echoes = b"".join(frame(header(ECHO, mid) + echo_body()) for mid in range(1, 64))
        echo_len = len(frame(header(ECHO, 1) + echo_body()))
        deadline = time.monotonic() + connect_within
        for i in range(self.count):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.refused += self.count - i
                break
            try:
                sock = connect_from(self.sources[i % len(self.sources)], self.host, self.port,
                                    min(remaining, 2.0))
            except OSError:
                self.refused += 1
                continue
            sock.setblocking(False)
            if i % 2:
                squat = _Squat(sock, dribble, 1)
            else:
                squat = _Squat(sock, dribble + echoes, echo_len)
            self.connected += 1
            self._squats[sock.fileno()] = (squat, 0)
            self._selector.register(sock, selectors.EVENT_READ)
            # The first bytes at once (the whole NEGOTIATE for the ECHO kind).
            self._send(sock.fileno(), len(dribble) if squat.piece > 1 else 1)
        self._thread.start()

    def _send(self, fd: int, count: int) -> None:
        with self._lock:
            if fd not in self._squats:
                return
            squat, sent = self._squats[fd]
            piece = squat.data[sent:sent + count]
            try:
                squat.sock.send(piece)
            except BlockingIOError:
                piece = b""
            except OSError:
                self._server_closed(fd)
                return
            self._squats[fd] = (squat, sent + len(piece))
            heapq.heappush(self._due, (time.monotonic() + self.rng.uniform(*self.interval), fd))

    def _server_closed(self, fd: int) -> None:
        squat, _ = self._squats.pop(fd)
        self._selector.unregister(squat.sock)
        squat.sock.close()
        self.closed_by_server += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            wait = 0.2
            if self._due:
                wait = min(wait, max(0.0, self._due[0][0] - time.monotonic()))
            for key, _ in self._selector.select(wait):
                self._drain(key.fd)
            now = time.monotonic()
            while self._due and self._due[0][0] <= now:
                _, fd = heapq.heappop(self._due)
                if fd in self._squats:
                    squat, _sent = self._squats[fd]
                    self._send(fd, squat.piece)

    def _drain(self, fd: int) -> None:
        with self._lock:
            if fd not in self._squats:
                return
            squat, _ = self._squats[fd]
            try:
                while squat.sock.recv(65536):
                    pass  # replies to NEGOTIATE and ECHO: not needed
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                pass
            self._server_closed(fd)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with self._lock:
            for squat, _ in self._squats.values():
                squat.sock.close()
            self._squats.clear()
        self._selector.close()
