"""Coming from Samba: `copyless import smb.conf` turns a Samba config into
one that `copyless check-config` accepts and lists what it leaves out, line
by line; `copyless user import --pdbedit` takes the users a real Samba
exported, and they log on to copyless with their old passwords."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import (SERVER_KIND, Server, _ensure_unix_user, copyless_binary,
                      make_temp_dir)
from support import NT_STATUS_RE, Serve, smbclient

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="copyless's own commands"
)

def copyless(*args, stdin=None):
    return subprocess.run([str(copyless_binary()), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def base():
    path = make_temp_dir("samba-import")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def line_of(lines: list[str], text: str) -> int:
    """The 1-based number of the line holding `text`."""
    return next(i for i, line in enumerate(lines, 1) if text in line)


def a_group() -> str:
    """A group that exists here and is not root's (which copyless refuses
    in share lists): ours, else `users`, else any."""
    if os.getgid() != 0:
        return grp.getgrgid(os.getgid()).gr_name
    names = [g.gr_name for g in grp.getgrall() if g.gr_gid != 0]
    return "users" if "users" in names else names[0]


def nas_conf(base: Path) -> list[str]:
    """The lines of a small office NAS's smb.conf, its shares under `base`."""
    group = a_group()
    return f"""\
# Samba configuration of the office NAS
[global]
    workgroup = OFFICE
    server string = Office NAS
    netbios name = officenas
    server role = standalone server
    security = user
    passdb backend = tdbsam
    map to guest = never
    server signing = auto
    server smb encrypt = desired
    log file = /var/log/samba/log.%m
    max log size = 1000
    load printers = no
    hosts allow = 192.168.10. 127.
    vfs objects = acl_xattr
    fruit:model = MacSamba

[homes]
    comment = Home Directories
    browseable = no
    read only = no

[printers]
    path = /var/spool/samba
    printable = yes

[print$]
    path = /var/lib/samba/printers

[projects]
    comment = Projects of everyone in the office
    path = {base}/projects
    writeable = yes
    valid users = alice, bob, @{group}, +copyless-no-such-group
    read list = carol
    create mask = 0660
    directory mask = 2770
    vfs objects = acl_xattr streams_xattr recycle fruit
    recycle:repository = .recycle/%U
    fruit:metadata = stream

[public]
    path = {base}/public
    public = yes
    read only = yes
    write list = alice
    browsable = yes
    hide unreadable = yes

[archive]
    path = {base}/archive
    read only = yes
    browseable = no
    force user = nobody
    veto files = /*.tmp/
    shadow:snapdir = .snapshots
    vfs objects = shadow_copy2
""".splitlines()


def test_an_office_smb_conf_becomes_a_config_check_config_accepts(base):
    # check-config refuses a share folder that is not there.
    for name in ("projects", "public", "archive"):
        (base / name).mkdir()
    lines = nas_conf(base)
    conf = base / "smb.conf"
    conf.write_text("\n".join(lines) + "\n")
    out = base / "copyless.toml"

    r = copyless("import", "smb.conf", str(conf), "--output", str(out))
    assert r.returncode == 0, r.stderr
    checked = copyless("check-config", str(out))
    assert checked.returncode == 0, f"{checked.stderr}\n{out.read_text()}"
    assert checked.stdout.strip() == f"{out}: ok"

    config = tomllib.loads(out.read_text())
    assert config["server_name"] == "OFFICENAS"
    assert config["security"] == {"signing": "enabled", "encryption": "desired", "guest": True,
                                  "hosts_allow": ["192.168.10.0/24", "127.0.0.0/8", "::1"]}
    assert config["discovery"] == {"workgroup": "OFFICE", "model": "MacSamba"}
    shares = {share["name"]: share for share in config["share"]}
    assert list(shares) == ["projects", "public", "archive"]
    group = a_group()
    assert shares["projects"] == {
        "name": "projects",
        "path": f"{base}/projects",
        "read_only": False,
        "valid_users": ["alice", "bob", f"@{group}"],
        "read_only_users": ["carol"],
        "create_mask": "0660",
        "directory_mask": "2770",
        "comment": "Projects of everyone in the office",
        "hide_dot_files": True,
        "recycle": True,
    }
    assert shares["public"] == {
        "name": "public",
        "path": f"{base}/public",
        "read_only": True,
        "write_users": ["alice"],
        "guest_ok": True,
        "browseable": True,
        "access_based_enumeration": True,
        "hide_dot_files": True,
    }
    assert shares["archive"] == {
        "name": "archive",
        "path": f"{base}/archive",
        "read_only": True,
        "browseable": False,
        "force_user": "nobody",
        "hide_dot_files": True,
        "veto_files": ["*.tmp"],
        "snapshots": "dir:.snapshots",
    }

    # Every option left out is listed with its line, in file order.
    said = r.stderr.splitlines()
    prefix = f"{conf}:"

    def note(marker: str, what: str) -> str:
        return f"{prefix}{line_of(lines, marker)}: {what}"

    expected = [
        note("passdb backend", "option `passdb backend` not carried over: "),
        note("log file", "option `log file` not carried over: "),
        note("max log size", "option `max log size` not carried over: "),
        note("hosts allow", "option `hosts allow` carried over in part: ::1 added: Samba lets "
             "local clients in"),
        note("vfs objects = acl_xattr", "option `vfs objects` (`acl_xattr`) needs nothing: "),
        note("[homes]", "share [homes] not carried over: "),
        note("[printers]", "share [printers] not carried over: copyless serves no printers"),
        note("[print$]", "share [print$] not carried over: "),
        note("valid users", "option `valid users` carried over in part: "
             "`+copyless-no-such-group` left out: no Unix group"),
        note("streams_xattr", "option `vfs objects` (`acl_xattr`) needs nothing: "),
        note("streams_xattr", "option `vfs objects` (`streams_xattr`) needs nothing: "),
        note("streams_xattr", "option `vfs objects` (`recycle`) needs nothing: copyless keeps "
             "a recycle bin natively"),
        note("streams_xattr", "option `vfs objects` (`fruit`) not carried over: "),
        note("fruit:metadata", "option `fruit:metadata` not carried over: "),
        note("shadow:snapdir", "option `shadow:snapdir` carried over in part: a folder not "
             "absolute is taken as in the share"),
        note("shadow_copy2", "option `vfs objects` (`shadow_copy2`) needs nothing: copyless "
             "shows snapshots as previous versions"),
        f"copyless: wrote {out} (3 shares); check it with `copyless check-config {out}`",
    ]
    assert len(said) == len(expected), r.stderr
    for line, start in zip(said, expected):
        assert line.startswith(start), f"{line!r} does not start with {start!r}"

    # Without --output the same config goes to standard output.
    r = copyless("import", "smb.conf", str(conf))
    assert r.returncode == 0, r.stderr
    assert r.stdout == out.read_text()


def test_check_config_on_an_smb_conf_points_to_import(base):
    conf = base / "smb.conf"
    conf.write_text("[global]\n    workgroup = HOME\n[data]\n    path = /srv/data\n")
    r = copyless("check-config", str(conf))
    assert r.returncode == 2
    assert r.stderr.startswith(f"copyless: {conf}:2: "), r.stderr
    assert f"convert it with `copyless import smb.conf {conf}`" in r.stderr, r.stderr


def test_a_broken_smb_conf_is_refused_naming_its_line(base):
    conf = base / "smb.conf"
    out = base / "copyless.toml"
    conf.write_text("[global]\n    workgroup = X\n[data\n    path = /srv/data\n")
    r = copyless("import", "smb.conf", str(conf), "--output", str(out))
    assert r.returncode == 2
    assert r.stderr.strip() == f"copyless: {conf}:3: a `[` without its `]`"
    assert not out.exists()

    conf.write_text("[data]\n    path = /srv/data\n    read only = sometimes\n")
    r = copyless("import", "smb.conf", str(conf))
    assert r.returncode == 2
    assert r.stderr.startswith(f"copyless: {conf}:3: `read only = sometimes`: expected yes or no")
    assert r.stdout == ""

    r = copyless("import", "smb.conf", str(base / "missing.conf"))
    assert r.returncode == 2
    assert r.stderr.startswith(f"copyless: {base / 'missing.conf'}: cannot read")


# ---------------------------------------------------------------------------
# Users exported from a real Samba

SAMBA_USER, SAMBA_PASSWORD = "cltsamba", "Samba-Old-Pass1"
DISABLED_USER = "cltsambaoff"

# A private Samba: every directory of its own in the test's directory.
SAMBA_CONF = """\
[global]
    server role = standalone server
    security = user
    passdb backend = tdbsam:{dirs[private]}/passdb.tdb
    private dir = {dirs[private]}
    lock directory = {dirs[lock]}
    state directory = {dirs[state]}
    cache directory = {dirs[cache]}
    pid directory = {dirs[pid]}
    ncalrpc dir = {dirs[ncalrpc]}
    log file = {base}/samba.log
    interfaces = lo
    bind interfaces only = yes
    smb ports = 4445
    server signing = mandatory
    load printers = no

[data]
    path = {base}/data
    read only = no
    valid users = {user}
"""


def samba_tool(argv, stdin=None):
    tool = shutil.which(argv[0])
    if tool is None:
        pytest.fail(f"{argv[0]} not found: install the Debian package samba (./test.sh does)",
                    pytrace=False)
    r = subprocess.run([tool, *argv[1:]], input=stdin, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, f"{' '.join(argv)}: {r.stdout}{r.stderr}"
    return r.stdout


@pytest.mark.skipif(os.geteuid() != 0,
                    reason="Samba's users need Unix accounts (useradd), and so root")
def test_samba_users_log_on_to_copyless_with_their_old_passwords(base, client_conf):
    account = _ensure_unix_user(SAMBA_USER)
    _ensure_unix_user(DISABLED_USER)
    dirs = {name: base / "samba" / name
            for name in ("private", "lock", "state", "cache", "pid", "ncalrpc")}
    for path in dirs.values():
        path.mkdir(parents=True)
    data = base / "data"
    data.mkdir()
    os.chown(data, account.pw_uid, account.pw_gid)
    smb_conf = base / "smb.conf"
    smb_conf.write_text(SAMBA_CONF.format(dirs=dirs, base=base, user=SAMBA_USER))

    # Samba's own tools make the users and export them.
    for user in (SAMBA_USER, DISABLED_USER):
        samba_tool(["smbpasswd", "-c", str(smb_conf), "-a", "-s", user],
                   stdin=f"{SAMBA_PASSWORD}\n{SAMBA_PASSWORD}\n")
    samba_tool(["smbpasswd", "-c", str(smb_conf), "-d", DISABLED_USER])
    exported = samba_tool(["pdbedit", "-s", str(smb_conf), "-L", "-w"])
    exported_lines = exported.splitlines()
    assert len(exported_lines) == 2, exported

    # The config and the users, into a fresh state directory.
    config = base / "copyless.toml"
    r = copyless("import", "smb.conf", str(smb_conf), "--output", str(config))
    assert r.returncode == 0, r.stderr
    converted = tomllib.loads(config.read_text())
    assert "127.0.0.1:4445" in converted["listen"]
    assert converted["share"] == [{"name": "data", "path": str(data), "read_only": False,
                                   "valid_users": [SAMBA_USER], "hide_dot_files": True}]
    assert f"{smb_conf}:4: option `passdb backend` not carried over" in r.stderr

    # Its own control socket, not the one of a server that may run here.
    control = f"control = \"{base}/control.sock\"\n"
    config.write_text(control + config.read_text())

    state = base / "state"
    r = copyless("user", "import", "--pdbedit", "-", "--state-dir", str(state), stdin=exported)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        f"user {SAMBA_USER} imported, linked to Unix account {SAMBA_USER} "
        f"(uid {account.pw_uid})"
    )
    disabled_line = line_of(exported_lines, DISABLED_USER)
    assert r.stderr == (f"standard input:{disabled_line}: user {DISABLED_USER} not imported: "
                        "disabled in Samba (D flag)\n")
    listed = copyless("user", "list", "--state-dir", str(state))
    assert listed.stdout.splitlines() == [f"{SAMBA_USER}\tunix {SAMBA_USER} (uid {account.pw_uid})"]

    # Importing again leaves the user alone.
    again = copyless("user", "import", "--pdbedit", "-", "--state-dir", str(state),
                     stdin=exported)
    assert again.returncode == 0
    assert f"user {SAMBA_USER} not imported: exists already" in again.stderr

    serve = Serve(base, "--config", str(config), "--state-dir", str(state))
    try:
        server = Server("127.0.0.1", serve.port, "data", data, SAMBA_USER, SAMBA_PASSWORD)
        r = smbclient(server, client_conf, "mkdir from-samba; ls", timeout=60)
        assert r.returncode == 0 and not NT_STATUS_RE.findall(r.output), r.describe()
        made = data / "from-samba"
        assert made.is_dir()
        assert made.stat().st_uid == account.pw_uid, "made as the user's Unix account"

        wrong = smbclient(server, client_conf, "ls", password="not-the-password", timeout=60)
        assert "NT_STATUS_LOGON_FAILURE" in wrong.output, wrong.describe()
        disabled = smbclient(server, client_conf, "ls", user=DISABLED_USER, timeout=60)
        assert "NT_STATUS_LOGON_FAILURE" in disabled.output, disabled.describe()
    finally:
        status = serve.stop()
    assert status == 0, serve.stderr()
