"""Malformed requests on one connection must not disturb other clients.

The garbage is sent over plain sockets; the bystander is an smbprotocol
session opened before the garbage and used again afterwards.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import NamedTuple

import pytest
import smbclient

from support import make_share_file

REACTION_TIMEOUT = 10.0

SMB2_NEGOTIATE = 0x0000
# SMB 2.0.2 to 3.0.2: without 3.1.1 the request needs no negotiate contexts.
DIALECTS = (0x0202, 0x0210, 0x0300, 0x0302)


def smb2_header(command: int, message_id: int = 0, protocol_id: bytes = b"\xfeSMB") -> bytes:
    return (
        protocol_id
        + struct.pack(
            "<HHIHHIIQIIQ",
            64,  # StructureSize
            0,  # CreditCharge
            0,  # Status
            command,
            1,  # CreditRequest
            0,  # Flags
            0,  # NextCommand
            message_id,
            0xFEFF,  # Reserved (process id)
            0,  # TreeId
            0,  # SessionId
        )
        + bytes(16)  # Signature
    )


def negotiate_body(dialects=DIALECTS, dialect_count=None) -> bytes:
    count = len(dialects) if dialect_count is None else dialect_count
    return (
        struct.pack("<HHHHI", 36, count, 0x0001, 0, 0)  # signing enabled, no capabilities
        + bytes(range(16))  # ClientGuid
        + bytes(8)  # ClientStartTime
        + b"".join(struct.pack("<H", d) for d in dialects)
    )


def negotiate_request(message_id: int = 0) -> bytes:
    return smb2_header(SMB2_NEGOTIATE, message_id) + negotiate_body()


def frame(message: bytes) -> bytes:
    """Direct-TCP transport: a zero byte and a 24-bit big-endian length."""
    return struct.pack(">I", len(message)) + message


class Reaction(NamedTuple):
    closed: bool  # the server closed or reset the connection
    status: int | None  # NTSTATUS of the first SMB2 reply, if one came
    detail: str


def recv_exact(sock: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def read_reaction(sock: socket.socket, timeout: float = REACTION_TIMEOUT) -> Reaction:
    """Wait for the server to close the connection or send one reply."""
    sock.settimeout(timeout)
    try:
        prefix = recv_exact(sock, 4)
        if prefix is None:
            return Reaction(True, None, "connection closed")
        length = struct.unpack(">I", prefix)[0] & 0xFFFFFF
        body = recv_exact(sock, length)
        if body is None:
            return Reaction(True, None, "connection closed in the middle of a reply")
    except (ConnectionResetError, BrokenPipeError):
        return Reaction(True, None, "connection reset")
    except socket.timeout:
        return Reaction(False, None, f"no reaction within {timeout:.0f} s")
    if len(body) < 64 or body[:4] != b"\xfeSMB":
        return Reaction(False, None, f"reply is not an SMB2 message: {body[:16]!r}")
    status = struct.unpack_from("<I", body, 8)[0]
    return Reaction(False, status, f"SMB2 reply with status 0x{status:08x}")


def send_all(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass  # the server may hang up before it has read everything


class Garbage(NamedTuple):
    data: bytes
    # False when the frame's end cannot be known to the server (its length
    # prefix promises more than was sent), so we half-close the socket and
    # only then expect the server to give up on the connection.
    complete: bool = True
    # Send a valid NEGOTIATE first and expect a successful reply to it.
    negotiate_first: bool = False


def _garbage_cases() -> dict[str, Garbage]:
    rng = random.Random(0xC0FFEE)
    negotiate = negotiate_request()
    return {
        "length-prefix-too-short": Garbage(struct.pack(">I", 20) + negotiate),
        "length-prefix-too-long": Garbage(struct.pack(">I", len(negotiate) + 100) + negotiate,
                                          complete=False),
        "length-prefix-huge": Garbage(b"\x00\xff\xff\xff" + negotiate, complete=False),
        "length-prefix-bad-type": Garbage(b"\x42" + frame(negotiate)[1:]),
        "random-bytes": Garbage(bytes(rng.getrandbits(8) for _ in range(4096)), complete=False),
        "random-message": Garbage(frame(bytes(rng.getrandbits(8) for _ in range(200)))),
        "bad-protocol-id": Garbage(frame(smb2_header(SMB2_NEGOTIATE, protocol_id=b"\xfeSMX")
                                         + negotiate_body())),
        "header-only": Garbage(frame(smb2_header(SMB2_NEGOTIATE))),
        "truncated-header": Garbage(frame(negotiate[:40])),
        "truncated-body": Garbage(frame(smb2_header(SMB2_NEGOTIATE) + negotiate_body()[:10])),
        "dialect-count-too-large": Garbage(frame(smb2_header(SMB2_NEGOTIATE)
                                                 + negotiate_body(dialect_count=200))),
        "zero-dialects": Garbage(frame(smb2_header(SMB2_NEGOTIATE)
                                       + negotiate_body(dialects=(), dialect_count=0))),
        "bad-protocol-id-after-negotiate": Garbage(
            frame(smb2_header(SMB2_NEGOTIATE, 1, protocol_id=b"\xfeSMX") + negotiate_body()),
            negotiate_first=True,
        ),
        "random-message-after-negotiate": Garbage(
            frame(b"\xfeSMB" + bytes(rng.getrandbits(8) for _ in range(120))),
            negotiate_first=True,
        ),
    }


GARBAGE = _garbage_cases()


def test_valid_raw_negotiate_is_answered(server):
    """Control for the builders above: a well-formed NEGOTIATE succeeds."""
    with socket.create_connection((server.host, server.port), timeout=REACTION_TIMEOUT) as sock:
        sock.sendall(frame(negotiate_request()))
        reaction = read_reaction(sock)
    assert reaction.status == 0, f"valid NEGOTIATE was not answered with success: {reaction.detail}"


def test_frames_split_anywhere_or_sent_together_are_answered(server):
    """A frame may arrive in pieces cut anywhere, and several may arrive in
    one piece: each is answered once, whole. (ECHO before a session is
    answered; its message ids follow NEGOTIATE's.)"""
    def echo(mid: int) -> bytes:
        return frame(smb2_header(13, message_id=mid) + struct.pack("<HH", 4, 0))

    with socket.create_connection((server.host, server.port), timeout=REACTION_TIMEOUT) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        negotiate = frame(negotiate_request())
        for i in range(len(negotiate)):
            sock.sendall(negotiate[i:i + 1])
            time.sleep(0.002)
        assert read_reaction(sock).status == 0
        # Three frames in one send, the last cut in two sends.
        both = echo(1) + echo(2) + echo(3)
        sock.sendall(both[:-5])
        time.sleep(0.05)
        sock.sendall(both[-5:])
        for _ in range(3):
            reaction = read_reaction(sock)
            assert reaction.status == 0, reaction.detail

@pytest.mark.parametrize("case", sorted(GARBAGE))
def test_garbage_drops_connection_not_server(server, case):
    garbage = GARBAGE[case]
    payload = b"bystander data\n" * 100
    make_share_file(server, "bystander.txt", payload)
    unc = f"\\\\{server.host}\\{server.share}"

    smbclient.reset_connection_cache()
    smbclient.register_session(server.host, username=server.user, password=server.password,
                               port=server.port, require_signing=True, auth_protocol="ntlm")
    try:
        assert smbclient.listdir(unc, port=server.port) == ["bystander.txt"]

        with socket.create_connection((server.host, server.port), timeout=REACTION_TIMEOUT) as sock:
            if garbage.negotiate_first:
                sock.sendall(frame(negotiate_request()))
                first = read_reaction(sock)
                assert first.status == 0, f"valid NEGOTIATE before the garbage failed: {first.detail}"
            send_all(sock, garbage.data)
            # A server may rightly wait for the rest of an incomplete frame.
            reaction = read_reaction(sock, REACTION_TIMEOUT if garbage.complete else 1.0)
            if not garbage.complete and not reaction.closed and reaction.status is None:
                sock.shutdown(socket.SHUT_WR)
                reaction = read_reaction(sock)
            assert reaction.closed or (reaction.status is not None and reaction.status != 0), (
                f"server neither dropped the connection nor answered with an error "
                f"after {case}: {reaction.detail}"
            )

        # The bystander session opened before the garbage still works.
        assert smbclient.listdir(unc, port=server.port) == ["bystander.txt"], (
            f"listing the share failed after {case}"
        )
        with smbclient.open_file(f"{unc}\\bystander.txt", mode="rb", port=server.port) as f:
            assert f.read() == payload, f"reading a file after {case} returned wrong data"
    finally:
        smbclient.reset_connection_cache()

    # And new connections are still accepted.
    deadline = time.monotonic() + REACTION_TIMEOUT
    with socket.create_connection((server.host, server.port), timeout=REACTION_TIMEOUT) as sock:
        sock.sendall(frame(negotiate_request()))
        reaction = read_reaction(sock, timeout=max(1.0, deadline - time.monotonic()))
    assert reaction.status == 0, f"a new connection after {case} failed: {reaction.detail}"
