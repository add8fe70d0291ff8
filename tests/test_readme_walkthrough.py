"""README.md's family walkthrough ("Who a session is on disk"), as written:
its shell commands and its TOML are taken from the README itself and run
as root, in a mount namespace of their own (a copy of /etc, and empty
/srv and /var/lib), so that the machine is left as it was; then alice, bob
and a guest work through smbclient, and what the README promises must
hold: both edit what the other saved in `family`, each has a home share
nobody else is shown or may open, made at the first logon, theirs and
mode 0700, and `public` hides what Windows and Macs leave.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import (REPO_ROOT, SERVER_KIND, STARTUP_TIMEOUT, copyless_binary, free_port,
                      make_temp_dir, wait_for_port)
from test_unix_identity import ensure_accounts

pytestmark = [
    pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's README"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the walkthrough runs as root"),
]

PASSWORDS = {"alice": "Alice-Walk-1", "bob": "Bob-Walk-2"}


def readme_parts() -> tuple[str, str, list[str]]:
    """The walkthrough's shell block, its TOML block, and the commands its
    text names in passing."""
    text = (REPO_ROOT / "README.md").read_text()
    shell = text.split("A family's private and shared folders, as root:\n\n```\n", 1)[1]
    shell = shell.split("```", 1)[0]
    toml = text.split("A share only some may use, and one guests may read:\n\n```toml\n", 1)[1]
    toml = toml.split("```", 1)[0]
    inline = [re.search(r"With `(install -d -m 755 /srv/nas/homes)`", text).group(1),
              re.search(r"let her: `(install -d -o alice -m 755 /srv/public)`", text).group(1)]
    return shell, toml, inline


def in_namespace(pid: int, path: str) -> Path:
    return Path(f"/proc/{pid}/root") / path.lstrip("/")


def names_by_id(pid: int, table: str) -> dict[int, str]:
    out = {}
    for line in in_namespace(pid, f"/etc/{table}").read_text().splitlines():
        fields = line.split(":")
        out[int(fields[2])] = fields[0]
    return out


def smbclient(port, conf, who, target, commands, cwd):
    argv = ["smbclient", "-s", str(conf), "-p", str(port)]
    argv += ["-N"] if who is None else ["-U", f"{who}%{PASSWORDS[who]}"]
    argv += ["-L", "//127.0.0.1"] if target is None else [f"//127.0.0.1/{target}"]
    if commands:
        argv += ["-c", commands]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd)
    return r.stdout + r.stderr


def test_the_family_walkthrough_works_as_written(client_conf):
    ensure_accounts()
    shell, toml, inline = readme_parts()
    base = make_temp_dir("walkthrough")
    (base / "walk.sh").write_text("set -e\n" + shell)
    (base / "passwords").write_text(
        "".join(f"{PASSWORDS[u]}\n{PASSWORDS[u]}\n" for u in ("alice", "bob")))
    port = free_port()
    # The /srv/nas share the text describes, the TOML as written, and
    # guests let in ("with [security] guest = true").
    config = base / "copyless.toml"
    config.write_text(f'listen = ["127.0.0.1:{port}"]\ncontrol = "{base}/control.sock"\n\n'
                      '[[share]]\nname = "nas"\npath = "/srv/nas"\ninherit_permissions = true\n'
                      + toml + "\n[security]\nguest = true\n")
    binary = copyless_binary()
    setup = f"""set -e
etc=$(mktemp -d {base}/etc.XXXXXX)
cp -a /etc/. "$etc"/
rm -rf "$etc"/copyless
mount --bind "$etc" /etc
mkdir -p /srv
mount -t tmpfs tmpfs /srv
mount -t tmpfs tmpfs /var/lib
export PATH={binary.parent}:$PATH
cd {base}
script -qec "bash {base}/walk.sh" /dev/null < {base}/passwords > {base}/walk.out 2>&1
{inline[0]}
{inline[1]}
printf 'left by Windows' > /srv/public/Thumbs.db
exec copyless serve --config {config}
"""
    stderr = base / "copyless.stderr"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                                 setup], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
    try:
        try:
            wait_for_port("127.0.0.1", port, proc, STARTUP_TIMEOUT + 30)
        except RuntimeError as e:
            walked = (base / "walk.out").read_text(errors="replace") if (
                base / "walk.out").exists() else ""
            pytest.fail(f"{e}\n{stderr.read_text(errors='replace')}\n{walked}", pytrace=False)
        pid = proc.pid
        users, groups = names_by_id(pid, "passwd"), names_by_id(pid, "group")

        def owner(path: str) -> tuple[str, str, str]:
            st = in_namespace(pid, path).stat()
            return users[st.st_uid], groups[st.st_gid], oct(st.st_mode & 0o7777)

        # Nobody has logged on: no home folder yet.
        homes = in_namespace(pid, "/srv/nas/homes")
        assert sorted(p.name for p in homes.iterdir()) == []

        work = base / "work"
        work.mkdir()
        (work / "list.txt").write_bytes(b"milk, eggs")
        (work / "edit.txt").write_bytes(b"milk, eggs, bread")

        # Both work in family: what alice saves, bob may change.
        out = smbclient(port, client_conf, "alice", "family", "put list.txt", work)
        assert "NT_STATUS" not in out, out
        assert owner("/srv/nas/family/list.txt") == ("alice", "family", "0o660")
        out = smbclient(port, client_conf, "bob", "family", "put edit.txt list.txt", work)
        assert "NT_STATUS" not in out, out
        assert in_namespace(pid, "/srv/nas/family/list.txt").read_bytes() == b"milk, eggs, bread"
        out = smbclient(port, client_conf, "alice", "family", "mkdir plans", work)
        assert owner("/srv/nas/family/plans") == ("alice", "family", "0o2770"), out

        # Each sees the other's folder in the nas share, but cannot enter.
        out = smbclient(port, client_conf, "bob", "nas", "ls alice\\*", work)
        assert "NT_STATUS_ACCESS_DENIED" in out, out

        # alice's home: made at her first logon, theirs and private;
        # listed to her alone.
        assert owner("/srv/nas/homes/alice") == ("alice", "alice", "0o700")
        listing = smbclient(port, client_conf, "alice", None, None, work)
        assert re.search(r"^\s+alice\s+Disk\s+Your own files$", listing, re.M), listing
        assert re.search(r"^\s+public\s+Disk\s+For everyone$", listing, re.M), listing
        assert not re.search(r"^\s+alice\s+Disk",
                             smbclient(port, client_conf, "bob", None, None, work), re.M)
        out = smbclient(port, client_conf, "alice", "alice", "put list.txt", work)
        assert "NT_STATUS" not in out, out
        assert in_namespace(pid, "/srv/nas/homes/alice/list.txt").exists()
        out = smbclient(port, client_conf, "bob", "alice", "ls", work)
        assert "NT_STATUS" in out, out

        # public: guests read, alice writes, Thumbs.db is never listed.
        out = smbclient(port, client_conf, None, "public", "ls", work)
        assert "NT_STATUS" not in out and "Thumbs.db" not in out, out
        out = smbclient(port, client_conf, "alice", "public", "put list.txt", work)
        assert "NT_STATUS" not in out, out
        out = smbclient(port, client_conf, None, "public", "put list.txt guest.txt", work)
        assert "NT_STATUS_ACCESS_DENIED" in out or "NT_STATUS_MEDIA_WRITE_PROTECTED" in out, out
        out = smbclient(port, client_conf, "alice", "public", "put list.txt Thumbs.db", work)
        assert "NT_STATUS_OBJECT_NAME_NOT_FOUND" in out, out
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    shutil.rmtree(base, ignore_errors=True)
