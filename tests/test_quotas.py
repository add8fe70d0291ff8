"""Users' disk quotas over SMB, as smbcquotas and smbprotocol ask for
them, against the real server.

This machine's kernel keeps user quotas on no filesystem it can mount:
it is built without CONFIG_XFS_QUOTA, CONFIG_QFMT_V2 (ext4's quota
feature) and CONFIG_TMPFS_QUOTA, so `mount -o uquota` of XFS and an ext4
made with `-O quota` both fail. Here the server is therefore checked on a
share without quotas, which must answer as Windows does; the entries
themselves, setting limits and the volume's size as a quota bounds it
are tested in the core over a share in memory that counts each user's use
(crates/core/tests/quotas.rs), and the kernel calls are `quotactl_fd`
(crates/engine/src/quotas.rs)."""

from __future__ import annotations

import os
import random
import struct
import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.exceptions import SMBResponseException
from smbprotocol.file_info import InfoType
from smbprotocol.open import (CreateDisposition, FileAttributes, ImpersonationLevel, Open,
                              ShareAccess, SMB2QueryInfoRequest, SMB2QueryInfoResponse,
                              SMB2SetInfoRequest)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import SERVER_KIND, SHARE_NAME, _start_copyless, _stop_copyless, make_temp_dir
from support import run

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="Samba opens the quota "
                                "file to root alone")

QUOTA_FILE = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION"
ADMIN = ("quotaadmin", "Quota-Admin-Passw0rd")
STATUS_NOT_SUPPORTED = 0xC00000BB
STATUS_ACCESS_DENIED = 0xC0000022
FILE_VOLUME_QUOTAS = 0x20
HIDDEN_SYSTEM_DIRECTORY_ARCHIVE = 0x36


@pytest.fixture
def running():
    """copyless with a second user who administers quotas, listening on
    port 445 of a loopback address of its own (smbcquotas takes no port),
    which needs root."""
    if os.geteuid() != 0:
        pytest.fail("serving on port 445 (smbcquotas takes no port) needs root", pytrace=False)
    base = make_temp_dir("quotas")
    host = f"127.0.{random.randint(1, 250)}.{random.randint(2, 250)}"
    running = _start_copyless(base, extra_users=(ADMIN,), listen=f"{host}:445",
                              extra_config=f'\n[security]\nquota_admins = ["{ADMIN[0]}"]\n')
    try:
        yield running.info
    finally:
        _stop_copyless(running)


def tree(server, user=None):
    user, password = user or (server.user, server.password)
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(Dialects.SMB_3_1_1, timeout=30)
    session = Session(connection, user, password, require_encryption=False,
                      auth_protocol="ntlm")
    session.connect()
    t = TreeConnect(session, f"\\\\{server.host}\\{SHARE_NAME}")
    t.connect()
    return t


def open_quota_file(t) -> Open:
    h = Open(t, QUOTA_FILE)
    # GENERIC_READ | GENERIC_WRITE, as smbcquotas asks.
    h.create(ImpersonationLevel.Impersonation, 0xC0000000, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
             CreateDisposition.FILE_OPEN, 0)
    return h


def call(h, req):
    conn = h.connection
    request = conn.send(req, sid=h.tree_connect.session.session_id,
                        tid=h.tree_connect.tree_connect_id)
    return conn.receive(request)


def status_of(fn) -> int:
    with pytest.raises(SMBResponseException) as e:
        fn()
    return e.value.status


def query_quotas(h):
    req = SMB2QueryInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_QUOTA
    req["output_buffer_length"] = 65535
    req["file_id"] = h.file_id
    # SMB2_QUERY_QUOTA_INFO: RestartScan, no SIDs (every entry).
    req["buffer"] = struct.pack("<BBHIII", 0, 1, 0, 0, 0, 0)
    call(h, req)


def set_limit(h, uid: int, limit: int):
    sid = struct.pack("<BB6sII", 1, 2, (22).to_bytes(6, "big"), 1, uid)
    entry = struct.pack("<IIQQQQ", 0, len(sid), 0, 0, limit // 2, limit) + sid
    req = SMB2SetInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_QUOTA
    req["file_id"] = h.file_id
    req["buffer"] = entry
    call(h, req)


def fs_attributes(h) -> int:
    req = SMB2QueryInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_FILESYSTEM
    req["file_info_class"] = 5  # FileFsAttributeInformation
    req["output_buffer_length"] = 1024
    req["file_id"] = h.file_id
    resp = SMB2QueryInfoResponse()
    resp.unpack(call(h, req)["data"].get_value())
    return struct.unpack_from("<I", resp["buffer"].get_value())[0]


def test_the_quota_file_opens_and_a_share_without_quotas_has_none(running):
    t = tree(running)
    try:
        h = open_quota_file(t)
        assert h.file_attributes == HIDDEN_SYSTEM_DIRECTORY_ARCHIVE
        assert fs_attributes(h) & FILE_VOLUME_QUOTAS == 0
        assert status_of(lambda: query_quotas(h)) == STATUS_NOT_SUPPORTED
        # A user who does not administer quotas sets none.
        assert status_of(lambda: set_limit(h, 1000, 1 << 30)) == STATUS_ACCESS_DENIED
        h.close()
    finally:
        t.session.connection.disconnect()
    # An administrator may, where the filesystem keeps quotas.
    t = tree(running, ADMIN)
    try:
        h = open_quota_file(t)
        assert status_of(lambda: set_limit(h, 1000, 1 << 30)) == STATUS_NOT_SUPPORTED
        h.close()
    finally:
        t.session.connection.disconnect()


def test_smbcquotas_is_told_the_share_keeps_no_quotas(running):
    server = running
    for what in (["-L"], ["-u", "S-1-22-1-0"], ["-F"]):
        result = run(["smbcquotas", f"//{server.host}/{SHARE_NAME}", "-m", "SMB3", "-n",
                      "-U", f"{server.user}%{server.password}", *what], timeout=60)
        assert result.returncode == 0, result.describe()
        assert "Quotas are not supported by the server." in result.output, result.describe()
