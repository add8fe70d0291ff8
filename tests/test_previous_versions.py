"""Previous Versions (issue 29): a share's snapshots are listed for each
file that is in them (FSCTL_SRV_ENUMERATE_SNAPSHOTS, which smbclient's
`allinfo` asks for, as Explorer's Previous Versions tab does) and opened
read-only through an @GMT token (smbclient sends it as a TWrp create
context): a btrfs snapshot of the share's subvolume, and a folder of
@GMT-… copies as rsnapshot-style tools leave them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from conftest import (SERVER_KIND, _start_copyless, _stop_copyless, copyless_on_btrfs,
                      make_temp_dir)
from support import smbclient, smbclient_ok

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless",
                                reason="copyless's snapshots key (Samba has shadow_copy2)")


def gmt_token() -> str:
    return time.strftime("@GMT-%Y.%m.%d-%H.%M.%S", time.gmtime())


def versions_in(allinfo: str) -> list[str]:
    return [line.strip() for line in allinfo.splitlines() if line.strip().startswith("@GMT-")]


def check_versions(server, client_conf, token: str, old: bytes, temp_dir):
    """doc.txt shows `token` as its one previous version, which reads back
    as `old`; nothing can be written there (write-protected media, as on
    Windows); the snapshots' own folder is not listed."""
    info = smbclient_ok(server, client_conf, "allinfo doc.txt").output
    assert versions_in(info) == [token], info
    local = temp_dir / "old.txt"
    smbclient_ok(server, client_conf, f'get "{token}\\doc.txt" {local}')
    assert local.read_bytes() == old
    refused = smbclient(server, client_conf, f'put /etc/hostname "{token}\\new.txt"')
    assert "NT_STATUS_MEDIA_WRITE_PROTECTED" in refused.output, refused.describe()
    listing = smbclient_ok(server, client_conf, "ls").output
    assert "doc.txt" in listing
    assert ".snapshots" not in listing


def test_a_btrfs_snapshot_is_a_previous_version(client_conf, temp_dir):
    with copyless_on_btrfs('snapshots = "btrfs"') as running:
        server = running.info
        share = server.share_path
        old = b"the first draft\n"
        (share / "doc.txt").write_bytes(old)
        (share / ".snapshots").mkdir()
        token = gmt_token()
        subprocess.run(["btrfs", "subvolume", "snapshot", "-r", str(share),
                        str(share / ".snapshots" / token)], check=True, capture_output=True)
        (share / "doc.txt").write_bytes(b"the second draft, longer\n")
        os.chmod(share / "doc.txt", 0o644)
        check_versions(server, client_conf, token, old, temp_dir)
        # A file made after the snapshot has no previous version.
        (share / "later.txt").write_bytes(b"new\n")
        os.chmod(share / "later.txt", 0o644)
        info = smbclient_ok(server, client_conf, "allinfo later.txt").output
        assert versions_in(info) == []


def test_a_folder_of_gmt_copies_are_previous_versions(client_conf, temp_dir):
    base = make_temp_dir("versions")
    snaps = base / "snaps"
    token = gmt_token()
    old = b"yesterday's numbers\n"
    (snaps / token).mkdir(parents=True)
    (snaps / token / "doc.txt").write_bytes(old)
    os.chmod(snaps / token / "doc.txt", 0o644)
    for d in (snaps, snaps / token):
        d.chmod(0o755)
    table = (f'\n[[share]]\nname = "share"\npath = {json.dumps(str(base / "share"))}\n'
             f'snapshots = {json.dumps("dir:" + str(snaps))}\n')
    running = _start_copyless(base, share_flag=False, extra_config=table)
    try:
        server = running.info
        (server.share_path / "doc.txt").write_bytes(b"today's numbers\n")
        os.chmod(server.share_path / "doc.txt", 0o644)
        check_versions(server, client_conf, token, old, temp_dir)
        # A time no snapshot was taken at is not found.
        missing = smbclient(server, client_conf, 'get "@GMT-2001.01.01-00.00.00\\doc.txt" /dev/null')
        assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in missing.output, missing.describe()
    finally:
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)


TWRP_SNAPSHOT = "@GMT-2015.10.31-19.40.30"


def test_smbtorture_twrp_on_a_folder_of_snapshots():
    """smbtorture's smb2.twrp tests with the layout and options Samba's
    own blackbox test gives them (source3/script/tests/
    test_shadow_copy_torture.sh): a snapshot folder in the share, a file
    with a stream in it, and a hard link shared with the live tree."""
    base = make_temp_dir("twrp")
    share = base / "data"
    share.mkdir()
    snap = share / ".snapshots" / TWRP_SNAPSHOT
    (snap / "subdir").mkdir(parents=True)
    (share / "subdir").mkdir()
    for tree in (share, snap):
        (tree / "foo").write_bytes(b"content\n")
    (share / "subdir" / "hardlink").touch()
    os.link(share / "subdir" / "hardlink", snap / "subdir" / "hardlink")
    os.setxattr(snap / "foo", "user.copyless.stream.bar", b"baz")
    for root, dirs, files in os.walk(base):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o777)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666)
    table = (f'\n[[share]]\nname = "share"\npath = {json.dumps(str(share))}\n'
             'snapshots = "dir:.snapshots"\n')
    running = _start_copyless(base, share_flag=False, extra_config=table)
    try:
        server = running.info
        options = {
            "smb2.twrp.write": {"twrp_file": "foo"},
            "smb2.twrp.stream": {"twrp_file": "foo", "twrp_stream": "bar",
                                 "twrp_stream_size": "3"},
            "smb2.twrp.openroot": {},
            "smb2.twrp.listdir": {},
        }
        for test, extra in options.items():
            argv = ["smbtorture", f"//{server.host}/{server.share}", "-p", str(server.port),
                    "-U", f"{server.user}%{server.password}",
                    f"--option=torture:twrp_snapshot={TWRP_SNAPSHOT}"]
            argv += [f"--option=torture:{k}={v}" for k, v in extra.items()]
            r = subprocess.run([*argv, test], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0 and "success:" in r.stdout, f"{test}:\n{r.stdout}{r.stderr}"
    finally:
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)
