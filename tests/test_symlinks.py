"""Symbolic links inside a share must not lead a client outside it."""

from __future__ import annotations

import os
import secrets
import shutil

import pytest
import smbclient

from conftest import make_temp_dir
from support import NT_STATUS_RE, make_share_file, smbclient as run_smbclient, smbclient_ok

PASSWD_MARKER = "root:x:0:0:"


@pytest.fixture
def escape_links(server):
    """Links in the share to a secret file outside it and to /etc/passwd.

    Returns {link name in the share: text that must never reach the client}.
    """
    outside = make_temp_dir("outside")
    secret = f"copyless-secret-{secrets.token_hex(16)}"
    secret_file = outside / "secret.txt"
    secret_file.write_text(secret + "\n")
    # World-readable, so that only the server's confinement can stop a read
    # (not the permissions of whichever unix user the server runs as).
    secret_file.chmod(0o644)

    share = server.share_path
    os.symlink(secret_file, share / "abs_secret")
    os.symlink(os.path.relpath(secret_file, share), share / "rel_secret")
    os.symlink(outside, share / "dir_outside")
    os.symlink("/etc/passwd", share / "passwd")
    os.symlink("/etc", share / "etc_dir")
    with open("/etc/passwd") as f:
        assert PASSWD_MARKER in f.read(), "test assumption: /etc/passwd has a root:x:0:0 line"

    yield {
        "abs_secret": secret,
        "rel_secret": secret,
        "dir_outside\\secret.txt": secret,
        "passwd": PASSWD_MARKER,
        "etc_dir\\passwd": PASSWD_MARKER,
    }
    shutil.rmtree(outside, ignore_errors=True)


def test_smbclient_cannot_read_through_escaping_symlinks(server, client_conf, temp_dir, escape_links):
    # Control: an ordinary file in the same share can be fetched.
    make_share_file(server, "plain.txt", b"plain contents\n")
    smbclient_ok(server, client_conf, f'get plain.txt "{temp_dir / "plain.txt"}"')
    assert (temp_dir / "plain.txt").read_bytes() == b"plain contents\n"

    for index, (link, forbidden) in enumerate(escape_links.items()):
        local = temp_dir / f"fetched-{index}"
        result = run_smbclient(server, client_conf, f'get {link} "{local}"')
        leaked = local.exists() and forbidden in local.read_text(errors="replace")
        assert not leaked, f"get {link} copied content from outside the share\n" + result.describe()
        assert forbidden not in result.output, f"output of get {link} shows outside content"
        assert NT_STATUS_RE.search(result.output), (
            f"get {link} through a symlink leaving the share did not fail\n" + result.describe()
        )


def test_smbprotocol_cannot_read_through_escaping_symlinks(server, escape_links):
    smbclient.reset_connection_cache()
    smbclient.register_session(server.host, username=server.user, password=server.password,
                               port=server.port, require_signing=True, auth_protocol="ntlm")
    try:
        for link, forbidden in escape_links.items():
            path = f"\\\\{server.host}\\{server.share}\\{link}"
            data = b""
            error = None
            try:
                with smbclient.open_file(path, mode="rb", port=server.port) as f:
                    data = f.read()
            except OSError as exc:
                error = exc
            assert forbidden.encode() not in data, f"read of {link} returned content from outside"
            assert error is not None, f"opening {link} (leaves the share) succeeded: {data[:80]!r}"
    finally:
        smbclient.reset_connection_cache()
