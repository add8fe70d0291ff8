"""The audit trail (`audit = [...]` per share, `[audit]`) and `[log] level`.

Two users work on an audited share as a family would, with smbclient and
smbprotocol; each change they make is one line in the audit file (who, from
where, which share, which file, what became of it), a refused open is one
line too, nothing is kept of a share that keeps nothing, and `copyless
status --audit` shows the latest lines. Without `[audit] file` the lines go
to the journal (standard error). `[log] level` hides the lines below it
and a reload changes it at once.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import signal
import subprocess
import pytest

from conftest import (SERVER_KIND, SHARE_NAME, TEST_PASSWORD, TEST_USER, _start_copyless,
                      _stop_copyless, copyless_binary, make_temp_dir)
from hostile import wait_until
from smbprotocol.connection import Dialects

from support import run, smbclient, smbclient_ok
from test_acl import (DACL, FULL, OWNER, READ_CONTROL, WRITE_DAC, connect, open_,
                      owner_only_dacl, query_sd, set_sd)

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own audit log")

BOB = ("auditbob", "Bob-Audit-Passw0rd")
KINDS = '["create", "write", "rename", "delete", "set_security", "denied"]'

LINE_RE = re.compile(
    r'^(?:(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) |copyless: )audit (?P<kind>\w+) '
    r'(?P<result>ok|failed) user="(?P<user>[^"]*)" client=(?P<ip>[\d.]+):(?P<port>\d+) '
    r'share="(?P<share>[^"]*)" path="(?P<path>[^"]*)"(?: to="(?P<to>[^"]*)")? '
    r"status=(?P<status>STATUS_\w+)$",
    re.MULTILINE,
)


def events(text: str) -> list[tuple]:
    return [(m["kind"], m["result"], m["user"], m["share"], m["path"], m["to"], m["status"])
            for m in LINE_RE.finditer(text)]


def status_audit(running, *args):
    return run([str(copyless_binary()), "status", "--audit", "--control",
                str(running.info.control), *args])


def test_each_change_is_one_line_with_who_where_and_what(client_conf):
    base = make_temp_dir("audit")
    log = base / "audit.log"
    share = base / "share"
    extra = (f'[audit]\nfile = "{log}"\n'
             f'[[share]]\nname = "{SHARE_NAME}"\npath = "{share}"\naudit = {KINDS}\n'
             f'[[share]]\nname = "quiet"\npath = "{share}"\n')
    running = _start_copyless(base, extra_users=(BOB,), extra_config=extra, share_flag=False)
    try:
        info = running.info
        share.chmod(0o777)
        smbclient_ok(info, client_conf, "mkdir docs; put /etc/hostname docs\\a.txt; "
                     "rename docs\\a.txt docs\\b.txt; put /etc/hostname gone.txt; "
                     "del gone.txt", share=SHARE_NAME)
        # A file of the test user's that bob may not read.
        secret = share / "secret.txt"
        secret.write_bytes(b"mine")
        if os.geteuid() == 0:
            owner = pwd.getpwnam(TEST_USER)
            os.chown(secret, owner.pw_uid, owner.pw_gid)
            secret.chmod(0o600)
        denied = smbclient(info, client_conf, "get secret.txt /dev/null", share=SHARE_NAME,
                           user=BOB[0], password=BOB[1])
        if os.geteuid() == 0:
            assert "NT_STATUS_ACCESS_DENIED" in denied.output, denied.describe()
        # The same work on a share that keeps nothing.
        smbclient_ok(info, client_conf, "put /etc/hostname quiet.txt; del quiet.txt",
                     share="quiet")
        # A descriptor set by a client (as Explorer's Security tab does).
        tree = connect(info, Dialects.SMB_3_1_1)
        try:
            h = open_(tree, "docs\\b.txt", READ_CONTROL | WRITE_DAC)
            owner = query_sd(h, OWNER).get_owner()
            set_sd(h, DACL, owner_only_dacl(owner, FULL))
            h.close()
        finally:
            tree.session.connection.disconnect()

        expected = [
            ("create", "ok", TEST_USER, SHARE_NAME, "docs", None, "STATUS_SUCCESS"),
            ("create", "ok", TEST_USER, SHARE_NAME, "docs/a.txt", None, "STATUS_SUCCESS"),
            ("write", "ok", TEST_USER, SHARE_NAME, "docs/a.txt", None, "STATUS_SUCCESS"),
            ("rename", "ok", TEST_USER, SHARE_NAME, "docs/a.txt", "docs/b.txt", "STATUS_SUCCESS"),
            ("create", "ok", TEST_USER, SHARE_NAME, "gone.txt", None, "STATUS_SUCCESS"),
            ("write", "ok", TEST_USER, SHARE_NAME, "gone.txt", None, "STATUS_SUCCESS"),
            ("delete", "ok", TEST_USER, SHARE_NAME, "gone.txt", None, "STATUS_SUCCESS"),
        ]
        if os.geteuid() == 0:
            expected.append(("open", "failed", BOB[0], SHARE_NAME, "secret.txt", None,
                             "STATUS_ACCESS_DENIED"))
        expected.append(("set_security", "ok", TEST_USER, SHARE_NAME, "docs/b.txt", None,
                         "STATUS_SUCCESS"))
        wait_until(lambda: log.exists() and len(events(log.read_text())) >= len(expected), 20)
        text = log.read_text()
        got = events(text)
        # The path separator is the server's own; compare with '/'.
        got = [(k, r, u, s, p.replace("\\", "/"), t and t.replace("\\", "/"), st)
               for (k, r, u, s, p, t, st) in got]
        assert got == expected, text
        assert all(m["ip"] == "127.0.0.1" and m["time"] for m in LINE_RE.finditer(text)), text
        assert "quiet" not in text
        assert (log.stat().st_mode & 0o777) == 0o640

        # The same lines from the running server, newest last.
        shown = status_audit(running, "--json")
        assert shown.returncode == 0, shown.describe()
        lines = json.loads(shown.output)["lines"]
        assert lines == text.splitlines()[-50:]
        two = status_audit(running, "--lines", "2")
        assert two.output.splitlines() == text.splitlines()[-2:], two.describe()
    finally:
        _stop_copyless(running)


def test_without_a_file_the_lines_go_to_the_journal(client_conf):
    base = make_temp_dir("audit")
    share = base / "share"
    running = _start_copyless(base, share_flag=False, extra_config=(
        f'[[share]]\nname = "{SHARE_NAME}"\npath = "{share}"\naudit = ["create", "delete"]\n'))
    try:
        share.chmod(0o777)
        smbclient_ok(running.info, client_conf, "put /etc/hostname j.txt; del j.txt",
                     share=SHARE_NAME)
        stderr = running.log_paths[1]
        wait_until(lambda: len(events(stderr.read_text())) >= 2, 20)
        got = events(stderr.read_text())
        assert [(k, p) for (k, _, _, _, p, _, _) in got] == [("create", "j.txt"),
                                                             ("delete", "j.txt")]
        assert "copyless: audit create ok user=" in stderr.read_text()
    finally:
        _stop_copyless(running)


def test_a_bad_audit_key_names_its_file_and_line():
    base = make_temp_dir("audit")
    config = base / "bad.toml"
    config.write_text(f'[[share]]\nname = "s"\npath = "{base}"\naudit = ["create", "unlink"]\n')
    checked = run([str(copyless_binary()), "check-config", str(config)])
    assert checked.returncode == 2
    assert f"{config}:4" in checked.output and '"unlink"' in checked.output, checked.output
    config.write_text('[audit]\nkeep = 3\n')
    checked = run([str(copyless_binary()), "check-config", str(config)])
    assert checked.returncode == 2 and "file" in checked.output, checked.output
    config.write_text('[log]\nlevel = "loud"\n')
    checked = run([str(copyless_binary()), "check-config", str(config)])
    assert checked.returncode == 2 and "error, warning, info or debug" in checked.output


def test_the_log_level_hides_lines_below_it_and_a_reload_changes_it(client_conf):
    base = make_temp_dir("loglevel")
    running = _start_copyless(base, extra_config='[log]\nlevel = "warning"\n')
    try:
        info = running.info
        stderr = running.log_paths[1]
        smbclient_ok(info, client_conf, "ls", share=SHARE_NAME)
        bad = smbclient(info, client_conf, "ls", share=SHARE_NAME, password="wrong")
        assert "NT_STATUS_LOGON_FAILURE" in bad.output, bad.describe()
        wait_until(lambda: "logon failed" in stderr.read_text(), 20)
        text = stderr.read_text()
        # Warnings (what fail2ban reads) stay; the successful logon and
        # what the server does at start go.
        assert "logon ok" not in text and "engine " not in text, text
        assert "connection from" not in text

        config = base / "copyless.toml"
        config.write_text(config.read_text().replace('level = "warning"', 'level = "debug"'))
        running.proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "[log] level is now debug" in stderr.read_text(), 20)
        smbclient_ok(info, client_conf, "ls", share=SHARE_NAME)
        wait_until(lambda: "logon ok" in stderr.read_text(), 20)
        text = stderr.read_text()
        assert re.search(r"^copyless: connection from 127\.0\.0\.1:\d+$", text, re.M), text
    finally:
        _stop_copyless(running)
