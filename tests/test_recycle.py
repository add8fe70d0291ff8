"""The recycle bin (issue 29): with `recycle = true` a file deleted over
SMB is moved to `.recycle/USER/`, under the folders it was in, owned by
its user as before; a name already in the bin is numbered; excluded names
go for good; what stayed longer than `recycle_keep_days` is removed by the
server itself (at start, hourly, and at a reload)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import time

import pytest

from conftest import SERVER_KIND, TEST_USER, _start_copyless, _stop_copyless, make_temp_dir
from support import smbclient, smbclient_ok

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless",
                                reason="copyless's recycle keys (Samba has vfs_recycle)")


@pytest.fixture
def recycling():
    """copyless whose share keeps a recycle bin (7 days, not *.tmp)."""
    base = make_temp_dir("recycle")
    table = (f'\n[[share]]\nname = "share"\npath = {json.dumps(str(base / "share"))}\n'
             'recycle = true\nrecycle_exclude = ["*.tmp"]\nrecycle_keep_days = 7\n')
    running = _start_copyless(base, share_flag=False, extra_config=table)
    try:
        yield running
    finally:
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)


def test_deleted_files_go_to_the_bin_with_their_folders(recycling, client_conf, temp_dir):
    server = recycling.info
    local = temp_dir / "report.txt"
    local.write_bytes(b"quarterly figures\n")
    smbclient_ok(server, client_conf,
                 f'mkdir work; put {local} work\\report.txt; del work\\report.txt')
    bin_dir = server.share_path / ".recycle" / TEST_USER
    kept = bin_dir / "work" / "report.txt"
    assert kept.read_bytes() == b"quarterly figures\n"
    assert not (server.share_path / "work" / "report.txt").exists()
    # The same name again: numbered, the first kept.
    local.write_bytes(b"second draft\n")
    smbclient_ok(server, client_conf, f'put {local} work\\report.txt; del work\\report.txt')
    assert (bin_dir / "work" / "Copy #1 of report.txt").read_bytes() == b"second draft\n"
    assert kept.read_bytes() == b"quarterly figures\n"
    # Excluded names go for good.
    smbclient_ok(server, client_conf, f'put {local} scratch.tmp; del scratch.tmp')
    assert not (server.share_path / "scratch.tmp").exists()
    assert not (bin_dir / "scratch.tmp").exists()
    # The bin is shown hidden; a client may still go in and take a file back.
    listing = smbclient_ok(server, client_conf, "ls").output
    line = next(l for l in listing.splitlines() if l.split()[:1] == [".recycle"])
    assert "H" in line.split()[1], listing
    back = temp_dir / "back.txt"
    smbclient_ok(server, client_conf, f'get .recycle\\{TEST_USER}\\work\\report.txt {back}')
    assert back.read_bytes() == b"quarterly figures\n"
    if os.geteuid() == 0:
        # The server's bin, each user's part theirs alone.
        user = pwd.getpwnam(TEST_USER)
        top = (server.share_path / ".recycle").stat()
        assert (top.st_uid, top.st_mode & 0o7777) == (0, 0o755)
        mine = bin_dir.stat()
        assert (mine.st_uid, mine.st_mode & 0o7777) == (user.pw_uid, 0o700)
        assert kept.stat().st_uid == user.pw_uid


def test_what_stayed_too_long_leaves_the_bin(recycling, client_conf, temp_dir):
    server = recycling.info
    local = temp_dir / "f.txt"
    local.write_bytes(b"x\n")
    smbclient_ok(server, client_conf,
                 f'put {local} old.txt; put {local} new.txt; del old.txt; del new.txt')
    bin_dir = server.share_path / ".recycle" / TEST_USER
    old, new = bin_dir / "old.txt", bin_dir / "new.txt"
    assert old.exists() and new.exists()
    # old.txt came into the bin eight days ago (its last access time says
    # when a file came in).
    eight_days = time.time() - 8 * 86400
    os.utime(old, (eight_days, old.stat().st_mtime))
    recycling.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while old.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not old.exists()
    assert new.exists()
    assert bin_dir.is_dir()


def test_deleting_from_the_bin_removes_for_good(recycling, client_conf, temp_dir):
    server = recycling.info
    local = temp_dir / "f.txt"
    local.write_bytes(b"x\n")
    smbclient_ok(server, client_conf, f'put {local} f.txt; del f.txt')
    smbclient_ok(server, client_conf, f'del .recycle\\{TEST_USER}\\f.txt')
    assert not (server.share_path / ".recycle" / TEST_USER / "f.txt").exists()
    assert list((server.share_path / ".recycle" / TEST_USER).iterdir()) == []
    # A folder is removed, not kept (its files were kept one by one).
    r = smbclient(server, client_conf, "mkdir empty; rmdir empty")
    assert r.returncode == 0, r.describe()
    assert not (server.share_path / ".recycle" / TEST_USER / "empty").exists()
