"""Alternate data streams ("file:stream"), as Windows clients use them for
Zone.Identifier and macOS for Finder metadata."""

from __future__ import annotations

import re

import smbclient as smbprotocol_client

from support import smbclient, smbclient_ok

STREAM_RE = re.compile(r"^stream: \[(?P<name>[^\]]+)\], (?P<size>\d+) bytes$", re.MULTILINE)


def streams_of(server, client_conf, name: str) -> dict[str, int]:
    result = smbclient_ok(server, client_conf, f'allinfo "{name}"')
    return {m["name"]: int(m["size"]) for m in STREAM_RE.finditer(result.output)}


def test_streams_with_smbclient(server, client_conf, temp_dir):
    data = temp_dir / "data.txt"
    data.write_bytes(b"main data\n")
    zone = temp_dir / "zone.txt"
    zone.write_bytes(b"[ZoneTransfer]\r\nZoneId=3\r\n")
    fetched = temp_dir / "fetched.txt"

    smbclient_ok(server, client_conf,
                 f'put "{data}" doc.txt; put "{zone}" "doc.txt:Zone.Identifier"')
    assert streams_of(server, client_conf, "doc.txt") == {
        "::$DATA": 10,
        ":Zone.Identifier:$DATA": 26,
    }
    # Stream names match in any case; the type suffix may be given.
    smbclient_ok(server, client_conf, f'get "doc.txt:zone.identifier:$DATA" "{fetched}"')
    assert fetched.read_bytes() == zone.read_bytes()
    smbclient_ok(server, client_conf, f'get doc.txt "{fetched}"')
    assert fetched.read_bytes() == b"main data\n", "writing a stream changed the file's data"

    # A stream travels with its file through a rename.
    smbclient_ok(server, client_conf, "rename doc.txt moved.txt")
    assert streams_of(server, client_conf, "moved.txt")[":Zone.Identifier:$DATA"] == 26

    # Writing a stream of a file that does not exist creates the file.
    smbclient_ok(server, client_conf, f'put "{zone}" "new.txt:meta"')
    assert streams_of(server, client_conf, "new.txt") == {"::$DATA": 0, ":meta:$DATA": 26}

    # A missing stream is not found.
    missing = smbclient(server, client_conf, f'get "moved.txt:nothere" "{fetched}"')
    assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in missing.output, missing.describe()

    # Deleting the file takes its streams with it.
    smbclient_ok(server, client_conf, "del moved.txt")
    smbclient_ok(server, client_conf, f'put "{data}" moved.txt')
    assert streams_of(server, client_conf, "moved.txt") == {"::$DATA": 10}


def test_stream_read_write_truncate_and_delete_with_smbprotocol(server):
    smbprotocol_client.reset_connection_cache()
    smbprotocol_client.register_session(
        server.host, username=server.user, password=server.password, port=server.port,
        require_signing=True, auth_protocol="ntlm",
    )
    base = f"\\\\{server.host}\\{server.share}\\s.bin"
    stream = base + ":blob"
    try:
        with smbprotocol_client.open_file(base, mode="wb", port=server.port) as f:
            f.write(b"x" * 100)
        with smbprotocol_client.open_file(stream, mode="wb", port=server.port) as f:
            f.write(b"0123456789")
            f.seek(20)
            f.write(b"end")
        with smbprotocol_client.open_file(stream, mode="rb", port=server.port) as f:
            assert f.read() == b"0123456789" + bytes(10) + b"end"
        with smbprotocol_client.open_file(stream, mode="r+b", port=server.port) as f:
            f.truncate(4)
        with smbprotocol_client.open_file(stream, mode="rb", port=server.port) as f:
            assert f.read() == b"0123"
        with smbprotocol_client.open_file(base, mode="rb", port=server.port) as f:
            assert f.read() == b"x" * 100
        assert smbprotocol_client.stat(stream, port=server.port).st_size == 4

        smbprotocol_client.remove(stream, port=server.port)
        assert not smbprotocol_client.path.exists(stream, port=server.port)
        assert smbprotocol_client.stat(base, port=server.port).st_size == 100
    finally:
        smbprotocol_client.reset_connection_cache()
