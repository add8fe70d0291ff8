"""The Debian package: built with cargo-deb from the release binary,
installed with apt on this machine, checked, and purged again."""

from __future__ import annotations

import gzip
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


# A few of the pages `copyless man` writes, one per command and subcommand
# (crates/copyless/src/man.rs checks that none is missing).
MAN_PAGES = tuple(f"./usr/share/man/man1/{name}.1.gz" for name in (
    "copyless", "copyless-serve", "copyless-user", "copyless-user-add", "copyless-check-config",
    "copyless-import-smb.conf", "copyless-top", "copyless-status", "copyless-bench",
    "copyless-bench-io"))


def run(*argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{' '.join(argv)}: status {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def installed() -> bool:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "copyless"],
                       capture_output=True, text=True)
    return r.returncode == 0 and "installed" in r.stdout.split()


def check_man_pages():
    """The installed pages are the binary's: they name its real options,
    and `man` finds them by name."""
    serve = gzip.decompress(Path("/usr/share/man/man1/copyless-serve.1.gz").read_bytes()).decode()
    assert ".TH copyless-serve 1 " in serve, serve[:300]
    # Roff writes each "-" of an option as "\-".
    for option in ("--config", "--listen", "--share", "--state-dir", "--engine"):
        assert option.replace("-", "\\-") in serve, option
    assert ".BR copyless (1)," in serve  # SEE ALSO
    if shutil.which("man") is None:
        return
    env = dict(os.environ, LC_ALL="C", MANWIDTH="200")
    assert run("man", "-w", "copyless-serve", env=env).strip() == \
        "/usr/share/man/man1/copyless-serve.1.gz"
    # Neither hyphenated nor justified, so that the words read as written.
    shown = " ".join(run("man", "--nh", "--nj", "-P", "cat", "copyless-user-add",
                         env=env).split())
    for text in ("copyless-user-add - Add a user", "--unix-user", "--password-stdin",
                 "SEE ALSO", "copyless-user(1)", "/usr/share/doc/copyless/README.md"):
        assert text in shown, shown


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
    # packages exactly that, with the man pages it writes.
    run(str(REPO_ROOT / "dist" / "build-deb"), "--no-build", "--fast", "--output", str(out_dir),
        cwd=REPO_ROOT)
    debs = list(out_dir.glob("copyless_*.deb"))
    assert len(debs) == 1, debs
    contents = run("dpkg-deb", "--contents", str(debs[0]))
    docs = [f"./usr/share/doc/copyless/docs/{p.name}" for p in (REPO_ROOT / "docs").glob("*.md")]
    assert docs
    for path in ("./usr/bin/copyless", "./etc/copyless/copyless.toml",
                 "systemd/system/copyless.service", "./usr/share/doc/copyless/README.md",
                 *docs, *MAN_PAGES):
        assert path in contents, contents
    # Debian policy: pages gzipped, nothing but pages in man1.
    pages = [line.split()[-1] for line in contents.splitlines() if "/man/" in line
             and not line.startswith("d")]
    assert pages and all(p.startswith("./usr/share/man/man1/copyless") and p.endswith(".1.gz")
                         for p in pages), pages

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
        check_man_pages()
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
                 "/lib/systemd/system/copyless.service", "/usr/lib/systemd/system/copyless.service",
                 "/usr/share/doc/copyless", *(p.lstrip(".") for p in MAN_PAGES)):
        assert not os.path.exists(gone), f"{gone} is still there after purge"
    # The share's files are the users'; an empty default share may go.
    if Path("/srv/copyless").exists() and not any(Path("/srv/copyless").iterdir()):
        shutil.rmtree("/srv/copyless")
