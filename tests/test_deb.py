"""The Debian package: built with cargo-deb from the release binary,
installed with apt on this machine, checked, and purged again."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, SERVER_KIND, Server, make_temp_dir
from support import Serve, smbclient_ok

pytestmark = [
    pytest.mark.skipif(SERVER_KIND == "samba", reason="copyless's own package"),
    pytest.mark.skipif(os.geteuid() != 0, reason="installing a package needs root (CI runs as root)"),
]


def run(*argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{' '.join(argv)}: status {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def installed() -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "copyless"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "installed" in r.stdout.split()


def serve_as_installed(monkeypatch, client_conf):
    """The installed server with its defaults (only the port moved off
    445), started as the unit starts it, without a terminal: the first
    user it makes, with the password from its file, puts a file into the
    packaged share; `copyless status` and `copyless user list` find it
    without flags."""
    monkeypatch.setenv("COPYLESS_BIN", "/usr/bin/copyless")
    base = make_temp_dir("deb")
    serve = Serve(base, "--config", "/etc/copyless/copyless.toml")
    try:
        secret = Path("/var/lib/copyless/initial-password")
        said = "\n".join(serve.stdout)
        assert f"created user copyless; its password is in {secret}" in said, said
        password = secret.read_text().strip()
        share = Path("/srv/copyless")
        (base / "hello.txt").write_text("from the first user")
        server = Server("127.0.0.1", serve.port, "share", share, "copyless", password)
        smbclient_ok(server, client_conf, "put hello.txt", cwd=base, timeout=60)
        put = share / "hello.txt"
        assert put.read_text() == "from the first user"
        assert put.stat().st_uid == pwd.getpwnam("copyless").pw_uid
        assert "cannot add files" not in serve.stderr(), serve.stderr()
        r = subprocess.run(["/usr/bin/copyless", "status", "--json"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["/usr/bin/copyless", "user", "list"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("copyless\tunix copyless (uid "), \
            r.stdout + r.stderr
        put.unlink()
    finally:
        assert serve.stop() == 0, serve.stderr()
        shutil.rmtree(base, ignore_errors=True)


def test_the_package_installs_checks_its_config_and_purges_cleanly(tmp_path, monkeypatch,
                                                                  client_conf):
    assert not installed(), "copyless is already installed here; the test would replace it"
    assert not Path("/usr/bin/copyless").exists()
    out_dir = tmp_path / "deb"
    # The binary the other tests ran (test.sh builds it); --no-build
    # packages exactly that.
    run("cargo", "deb", "-p", "copyless", "--no-build", "--fast", "--output", str(out_dir),
        cwd=REPO_ROOT)
    debs = list(out_dir.glob("copyless_*.deb"))
    assert len(debs) == 1, debs
    contents = run("dpkg-deb", "--contents", str(debs[0]))
    for path in ("./usr/bin/copyless", "./etc/copyless/copyless.toml",
                 "systemd/system/copyless.service"):
        assert path in contents, contents

    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        run("apt-get", "install", "-y", "-q", str(debs[0]), env=env)
        assert installed()
        assert os.access("/usr/bin/copyless", os.X_OK)
        unit = next(p for p in (Path("/lib/systemd/system/copyless.service"),
                                Path("/usr/lib/systemd/system/copyless.service")) if p.exists())
        assert unit.read_text() == (REPO_ROOT / "dist" / "copyless.service").read_text()
        state = Path("/var/lib/copyless")
        assert state.is_dir() and stat.S_IMODE(state.stat().st_mode) == 0o700
        assert Path("/srv/copyless").is_dir()
        # The share is the account's that the first user acts as.
        assert Path("/srv/copyless").stat().st_uid == pwd.getpwnam("copyless").pw_uid
        assert "/etc/copyless/copyless.toml: ok" in run(
            "/usr/bin/copyless", "check-config", "/etc/copyless/copyless.toml")
        # The unit as installed, with the binary where it names it.
        r = subprocess.run(["systemd-analyze", "verify", str(unit)],
                           capture_output=True, text=True, timeout=60)
        complaints = [line for line in (r.stdout + r.stderr).splitlines()
                      if line.strip() and "sysinit.target" not in line]
        assert not complaints, "\n".join(complaints)
        serve_as_installed(monkeypatch, client_conf)
    finally:
        run("apt-get", "purge", "-y", "-q", "copyless", env=env)
    assert not installed()
    for gone in ("/usr/bin/copyless", "/etc/copyless/copyless.toml", "/var/lib/copyless",
                 "/lib/systemd/system/copyless.service", "/usr/lib/systemd/system/copyless.service"):
        assert not os.path.exists(gone), f"{gone} is still there after purge"
    # The share's files are the users'; an empty default share may go.
    if Path("/srv/copyless").exists() and not any(Path("/srv/copyless").iterdir()):
        shutil.rmtree("/srv/copyless")
