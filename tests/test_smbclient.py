"""Samba's smbclient against the server, with signing required."""

from __future__ import annotations

import re
import time

import pytest

from support import (
    DIALECTS,
    FILE_ATTRIBUTE_ARCHIVE,
    FILE_ATTRIBUTE_DIRECTORY,
    FILE_ATTRIBUTE_READONLY,
    NT_STATUS_RE,
    parse_allinfo,
    parse_ls,
    run,
    sha256_file,
    smbclient,
    smbclient_argv,
    smbclient_ok,
)


def test_list_shares(server, client_conf):
    result = run(smbclient_argv(server, client_conf))
    assert result.returncode == 0, "smbclient -L failed\n" + result.describe()
    # "\tshare           Disk      comment"
    disks = re.findall(r"^\s+(\S+)\s+Disk\b", result.output, re.MULTILINE)
    assert server.share in disks, (
        f"share {server.share!r} not among the listed disk shares {disks}\n" + result.describe()
    )
    assert not NT_STATUS_RE.search(result.output), result.describe()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_put_get_100mib(server, client_conf, big_file, temp_dir, dialect):
    remote_dir = "transfer"
    fetched = temp_dir / "fetched.bin"
    smbclient_ok(
        server, client_conf,
        f'mkdir {remote_dir}; put "{big_file.path}" {remote_dir}\\big.bin; '
        f'get {remote_dir}\\big.bin "{fetched}"',
        dialect=dialect,
    )

    on_disk = server.share_path / remote_dir / "big.bin"
    assert on_disk.is_file(), f"{on_disk} missing on the share after put"
    assert on_disk.stat().st_size == big_file.size, (
        f"file on the share has {on_disk.stat().st_size} bytes, expected {big_file.size}"
    )
    assert sha256_file(on_disk) == big_file.sha256, "file on the share differs from the one put"
    assert fetched.stat().st_size == big_file.size, (
        f"fetched file has {fetched.stat().st_size} bytes, expected {big_file.size}"
    )
    assert sha256_file(fetched) == big_file.sha256, "file fetched with get differs from the one put"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_namespace_operations(server, client_conf, temp_dir, dialect):
    payload = b"copyless namespace test\n" * 1000
    local = temp_dir / "small.txt"
    local.write_bytes(payload)
    share = server.share_path

    # mkdir, put, ls
    smbclient_ok(server, client_conf, f'mkdir dir; put "{local}" file.txt', dialect=dialect)
    assert (share / "dir").is_dir(), "mkdir did not create the directory on disk"
    assert (share / "file.txt").read_bytes() == payload, "put wrote wrong contents to disk"

    listing = smbclient_ok(server, client_conf, "ls", dialect=dialect)
    entries = parse_ls(listing.output)
    assert "file.txt" in entries and "dir" in entries, (
        f"ls does not show file.txt and dir: {entries}\n" + listing.describe()
    )
    assert entries["file.txt"][1] == len(payload), f"ls size of file.txt: {entries['file.txt']}"
    assert "D" in entries["dir"][0], f"ls does not mark dir as a directory: {entries['dir']}"
    assert "D" not in entries["file.txt"][0], f"ls marks file.txt as a directory: {entries}"

    # rename, into the directory and under a new name
    smbclient_ok(server, client_conf, "rename file.txt dir\\renamed.txt", dialect=dialect)
    assert not (share / "file.txt").exists(), "old name still exists on disk after rename"
    assert (share / "dir" / "renamed.txt").read_bytes() == payload, "renamed file lost its contents"

    listing = smbclient_ok(server, client_conf, "ls dir\\*", dialect=dialect)
    entries = parse_ls(listing.output)
    assert entries.get("renamed.txt", (None, None))[1] == len(payload), (
        f"ls dir\\* does not show renamed.txt with its size: {entries}\n" + listing.describe()
    )

    # allinfo: size and attributes
    info = parse_allinfo(
        smbclient_ok(server, client_conf, "allinfo dir\\renamed.txt", dialect=dialect).output
    )
    assert info.size == len(payload), f"allinfo size {info.size}, expected {len(payload)}"
    assert not info.attribute_bits & FILE_ATTRIBUTE_DIRECTORY, f"file has the directory bit: {info}"
    assert not info.attribute_bits & FILE_ATTRIBUTE_READONLY, f"new file is read-only: {info}"

    dir_info = parse_allinfo(smbclient_ok(server, client_conf, "allinfo dir", dialect=dialect).output)
    assert dir_info.attribute_bits & FILE_ATTRIBUTE_DIRECTORY, f"dir lacks the directory bit: {dir_info}"
    assert "D" in dir_info.attributes, f"allinfo does not show D for dir: {dir_info}"

    # setmode +r is visible from a fresh connection, and -r clears it again
    smbclient_ok(server, client_conf, "setmode dir\\renamed.txt +r", dialect=dialect)
    info = parse_allinfo(
        smbclient_ok(server, client_conf, "allinfo dir\\renamed.txt", dialect=dialect).output
    )
    assert info.attribute_bits & FILE_ATTRIBUTE_READONLY, f"setmode +r not visible: {info}"
    assert "R" in info.attributes, f"allinfo letters lack R after setmode +r: {info}"

    # A read-only file cannot be deleted; Windows and Samba both say
    # STATUS_CANNOT_DELETE (smbclient still exits 0 here).
    refused = smbclient(server, client_conf, "del dir\\renamed.txt", dialect=dialect)
    assert "NT_STATUS_CANNOT_DELETE" in refused.output, (
        "deleting a read-only file did not fail with NT_STATUS_CANNOT_DELETE\n" + refused.describe()
    )
    assert (share / "dir" / "renamed.txt").exists(), "read-only file was deleted"

    smbclient_ok(server, client_conf, "setmode dir\\renamed.txt -r", dialect=dialect)
    info = parse_allinfo(
        smbclient_ok(server, client_conf, "allinfo dir\\renamed.txt", dialect=dialect).output
    )
    assert not info.attribute_bits & FILE_ATTRIBUTE_READONLY, f"setmode -r not visible: {info}"

    # del, rmdir
    smbclient_ok(server, client_conf, "del dir\\renamed.txt; rmdir dir", dialect=dialect)
    assert not (share / "dir").exists(), "directory still on disk after del and rmdir"
    assert list(share.iterdir()) == [], f"share not empty at the end: {list(share.iterdir())}"


def test_setmode_archive_and_hidden(server, client_conf, temp_dir):
    local = temp_dir / "a.txt"
    local.write_bytes(b"attributes\n")
    smbclient_ok(server, client_conf, f'put "{local}" a.txt; setmode a.txt +h')
    info = parse_allinfo(smbclient_ok(server, client_conf, "allinfo a.txt").output)
    assert "H" in info.attributes and info.attribute_bits & 0x02, f"setmode +h not visible: {info}"
    smbclient_ok(server, client_conf, "setmode a.txt -a")
    info = parse_allinfo(smbclient_ok(server, client_conf, "allinfo a.txt").output)
    assert not info.attribute_bits & FILE_ATTRIBUTE_ARCHIVE, f"setmode -a not visible: {info}"
    assert info.attribute_bits & 0x02, f"setmode -a also cleared hidden: {info}"


def test_attributes_changed_long_after_a_write_show_at_once(server, client_conf, temp_dir):
    # copyless remembers a file's DOS attributes while its change time is
    # more than 2 s old, and its io_uring engine then opens the file on
    # the ring; a change through the share must show in the next look,
    # by a new connection and in a listing alike.
    local = temp_dir / "old.txt"
    local.write_bytes(b"settled\n")
    smbclient_ok(server, client_conf, f'put "{local}" old.txt')

    def looked() -> tuple[int, str]:
        info = parse_allinfo(smbclient_ok(server, client_conf, "allinfo old.txt").output)
        listed = parse_ls(smbclient_ok(server, client_conf, "ls").output)
        assert "old.txt" in listed, listed
        return info.attribute_bits, listed["old.txt"][0]

    for change, hidden in (("+h", True), ("-h", False)):
        time.sleep(2.5)
        bits, letters = looked()
        assert bool(bits & 0x02) != hidden and ("H" in letters) != hidden, (bits, letters)
        smbclient_ok(server, client_conf, f"setmode old.txt {change}")
        bits, letters = looked()
        assert bool(bits & 0x02) == hidden, f"setmode {change} not seen by allinfo: {bits:#x}"
        assert ("H" in letters) == hidden, f"setmode {change} not seen by ls: {letters}"
    assert (server.share_path / "old.txt").read_bytes() == b"settled\n"


def test_wrong_password(server, client_conf):
    result = smbclient(server, client_conf, "ls", password=server.password + "-wrong")
    assert result.returncode != 0, "smbclient succeeded with a wrong password\n" + result.describe()
    assert "NT_STATUS_LOGON_FAILURE" in result.output, result.describe()


def test_unknown_user(server, client_conf):
    result = smbclient(server, client_conf, "ls", user="nosuchuser")
    assert result.returncode != 0, "smbclient succeeded as an unknown user\n" + result.describe()
    assert "NT_STATUS_LOGON_FAILURE" in result.output, result.describe()


def test_unknown_share(server, client_conf):
    result = smbclient(server, client_conf, "ls", share="nosuchshare")
    assert result.returncode != 0, "smbclient connected to a missing share\n" + result.describe()
    assert "NT_STATUS_BAD_NETWORK_NAME" in result.output, result.describe()
