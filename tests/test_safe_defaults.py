"""Safe by default (issue 25): a configuration cannot hand out root,
check-config refuses what serve refuses (through the one validation both
use), a first start killed half way does not block the next one, the
commands find the server's state through its config, and a share nobody
allowed to write can write to is said at start and at reload."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import (SERVER_KIND, TEST_PASSWORD, TEST_USER, Server, copyless_binary,
                      make_temp_dir, unix_user_args)
from support import Serve, smbclient_ok

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="copyless's own configuration and commands"
)


def copyless(*args, timeout=60):
    return subprocess.run([str(copyless_binary()), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.fixture
def base():
    path = make_temp_dir("safe")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def add_user(state, name=TEST_USER, password=TEST_PASSWORD, *via):
    """`copyless user add`, the store found by `via` (--state-dir STATE
    unless given)."""
    where = list(via) or ["--state-dir", str(state)]
    r = subprocess.run([str(copyless_binary()), "user", "add", name, *unix_user_args(),
                        "--password-stdin", *where],
                       input=password + "\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def write_config(base, share_keys="", top="", share=None):
    """A config of one share `data` (base/share unless `share`) whose extra
    keys start at line 7."""
    if share is None:
        share = base / "share"
        share.mkdir(exist_ok=True)
    config = base / "copyless.toml"
    config.write_text(
        f"state_dir = {json.dumps(str(base / 'state'))}\n"       # 1
        f"control = {json.dumps(str(base / 'control.sock'))}\n"  # 2
        "\n"                                                     # 3
        "[[share]]\n"                                            # 4
        'name = "data"\n'                                        # 5
        f"path = {json.dumps(str(share))}\n"                     # 6
        + share_keys + top)
    return config


def refused_by_both(base, config, line, said):
    """check-config and serve both refuse `config`, naming its `line` and
    saying `said`, with status 2; serve never listens."""
    r = copyless("check-config", str(config))
    assert r.returncode == 2, f"check-config accepted it:\n{r.stdout}{r.stderr}"
    assert f"{config}:{line}: " in r.stderr and said in r.stderr, r.stderr
    r = copyless("serve", "--config", str(config), "--listen", "127.0.0.1:0", timeout=60)
    assert r.returncode == 2, f"serve: status {r.returncode}\n{r.stdout}{r.stderr}"
    assert f"{config}:{line}: " in r.stderr and said in r.stderr, r.stderr
    assert "listening" not in r.stdout, r.stdout


@pytest.mark.parametrize("key, said", [
    ('force_user = "root"', 'force_user "root" is root (uid 0)'),
    ('force_group = "root"', 'force_group: "root" is the root group (gid 0)'),
    ('valid_users = ["alice", "@root"]', 'valid_users: "@root" is the root group'),
    ('write_users = ["root"]', 'write_users: user "root" would act as the Unix account root'),
])
def test_keys_naming_root_are_refused_with_file_and_line(base, key, said):
    add_user(base / "state")
    config = write_config(base, f"read_only = true\n{key}\n")
    refused_by_both(base, config, 8, said)


def test_a_guest_account_that_is_root_is_refused(base):
    add_user(base / "state")
    config = write_config(base, top='\n[security]\nguest = true\nguest_account = "root"\n')
    refused_by_both(base, config, 10, 'guest_account "root" is root (uid 0)')


@pytest.mark.parametrize("target, said", [
    ("/", "the root of the whole file system"),
    ("/etc", "the system folder /etc"),
    ("/etc/ssh", "inside the system folder /etc"),
])
def test_system_folders_are_refused_even_through_a_symlink(base, target, said):
    if not os.path.isdir(target):
        pytest.skip(f"no {target} here")
    add_user(base / "state")
    link = base / "link"
    link.symlink_to(target)
    refused_by_both(base, write_config(base, share=link), 6,
                    f"(which resolves to {target}) is {said}")
    refused_by_both(base, write_config(base, share=Path(target)), 6, f"{target} is {said}")


def test_a_missing_share_folder_is_refused_by_check_config(base):
    config = write_config(base, share=base / "nothing-here")
    r = copyless("check-config", str(config))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{config}:6: " in r.stderr and "does not exist" in r.stderr, r.stderr


def test_a_guest_account_without_a_unix_account_is_refused_by_check_config(base):
    config = write_config(base, top=('\n[security]\nguest = true\n'
                                     'guest_account = "copyless-no-such-account"\n'))
    r = copyless("check-config", str(config))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{config}:10: " in r.stderr, r.stderr
    assert 'no Unix account "copyless-no-such-account"' in r.stderr, r.stderr


def test_a_guest_share_while_guests_are_off_is_named(base):
    add_user(base / "state")
    config = write_config(base, "guest_ok = true\nvalid_users = [\"ghost\"]\n")
    r = copyless("check-config", str(config))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"{config}: ok"
    assert (f"{config}:7: warning: share \"data\" says guest_ok, but guests are off"
            in r.stderr), r.stderr
    # A user the store does not hold: a warning, since it may be added later.
    assert (f"{config}:8: warning: share \"data\": valid_users names \"ghost\", who is not "
            "in the user store") in r.stderr, r.stderr


def login_ls(port, share_path, password, client_conf, user="copyless"):
    server = Server("127.0.0.1", port, "share", share_path, user, password)
    smbclient_ok(server, client_conf, "ls", timeout=60)


def test_an_initial_password_left_without_a_store_lets_the_next_start_work(base, client_conf):
    # What a first start of an older version left when killed between
    # writing the password and the store.
    state = base / "state"
    state.mkdir(mode=0o700)
    secret = state / "initial-password"
    secret.write_text("Noted-Passw0rd-1\n")
    secret.chmod(0o600)
    (base / "share").mkdir()
    serve = Serve(base, "--share", f"share={base / 'share'}", "--state-dir", str(state))
    try:
        said = "\n".join(serve.stdout)
        assert f"created user copyless with the password in {secret}" in said, said
        login_ls(serve.port, base / "share", "Noted-Passw0rd-1", client_conf)
    finally:
        assert serve.stop() == 0, serve.stderr()


def test_a_first_start_killed_after_the_store_is_completed_by_the_next(base, client_conf):
    state = base / "state"
    account = ["--unix-user", pwd.getpwuid(os.geteuid()).pw_name]
    if os.geteuid() == 0:
        account = ["--create-unix-user"]
    # The store as the killed start saved it, and its password still aside.
    r = subprocess.run([str(copyless_binary()), "user", "add", "copyless", *account,
                        "--password-stdin", "--state-dir", str(state)],
                       input="Pair-Passw0rd-2\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    pending = state / "initial-password.new"
    pending.write_text("Pair-Passw0rd-2\n")
    pending.chmod(0o600)
    (base / "share").mkdir()
    serve = Serve(base, "--share", f"share={base / 'share'}", "--state-dir", str(state))
    try:
        said = "\n".join(serve.stdout)
        assert "a first start was interrupted after it made user copyless" in said, said
        assert (state / "initial-password").read_text() == "Pair-Passw0rd-2\n"
        assert not pending.exists()
        login_ls(serve.port, base / "share", "Pair-Passw0rd-2", client_conf)
    finally:
        assert serve.stop() == 0, serve.stderr()


def test_user_commands_find_the_store_through_the_config(base):
    config = write_config(base)
    add_user(None, "alice-cfg", "Alice-Passw0rd", "--config", str(config))
    r = copyless("user", "list", "--config", str(config))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("alice-cfg\tunix "), r.stdout
    assert (base / "state" / "users").exists()
    # --state-dir still wins.
    other = base / "other"
    r = copyless("user", "list", "--config", str(config), "--state-dir", str(other))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr


def test_status_reaches_the_server_through_its_config(base, client_conf):
    config = write_config(base)
    add_user(base / "state")
    owner = pwd.getpwnam(TEST_USER) if os.geteuid() == 0 else None
    if owner:
        os.chown(base / "share", owner.pw_uid, owner.pw_gid)
    serve = Serve(base, "--config", str(config))
    try:
        r = copyless("status", "--json", "--config", str(config))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["sessions"] == [], r.stdout
    finally:
        assert serve.stop() == 0, serve.stderr()


@pytest.mark.skipif(os.geteuid() != 0, reason="users act as their own accounts only as root")
def test_a_share_nobody_allowed_can_write_to_is_said_at_start_and_reload(base):
    add_user(base / "state")
    share = base / "share"
    share.mkdir()
    os.chown(share, 0, 0)
    share.chmod(0o755)
    mine = base / "mine"
    mine.mkdir()
    owner = pwd.getpwnam(TEST_USER)
    os.chown(mine, owner.pw_uid, owner.pw_gid)
    config = write_config(base, share=share)
    text = config.read_text()
    config.write_text(text + f'\n[[share]]\nname = "mine"\npath = {json.dumps(str(mine))}\n')
    warning = (f'warning: share "data": users may write to it, but {TEST_USER} '
               f"(uid {owner.pw_uid}) cannot add files to {share} (owner root, group root, "
               f"mode 755); give it to them (chown {TEST_USER} {share})")
    serve = Serve(base, "--config", str(config))
    try:
        log = serve.stderr()
        assert "running as root: each session acts on disk as its user's Unix account" in log
        assert log.count(warning) == 1, log
        assert 'share "mine"' not in log, log
        # A reload says it again, and of a share added unwritable.
        config.write_text(config.read_text() + "\n[[share]]\nname = \"more\"\n"
                          f"path = {json.dumps(str(share))}\n")
        serve.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while "share more added" not in serve.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        log = serve.stderr()
        assert "share more added" in log, log
        assert log.count(warning) == 2, log
        assert 'warning: share "more": users may write to it' in log, log
        # Given to the user, the folder is quiet.
        os.chown(share, owner.pw_uid, owner.pw_gid)
        r = copyless("check-config", str(config))
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    finally:
        assert serve.stop() == 0, serve.stderr()
