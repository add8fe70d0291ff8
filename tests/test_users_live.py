"""Users changed while copyless runs: `copyless user add/passwd/del` take
effect without a restart, a deleted user's sessions end, and the user store
is refused when others may read it. Also what a first start and an empty
store do."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
import uuid

import pytest
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBException
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import (SERVER_KIND, Server, copyless_binary, make_temp_dir,
                      unix_user_args)
import support
from support import NT_STATUS_RE, smbclient

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="copyless's own user store and command line"
)

OWNER, OWNER_PASSWORD = "owner", "Owner-pass1"
BOB = "bob"
# How long a change may take to be noticed: the server looks every second.
WITHIN = 15.0


def copyless(*args, stdin=None):
    return subprocess.run([str(copyless_binary()), *args], input=stdin,
                          capture_output=True, text=True, timeout=30)


def user(state, command, name, password=None):
    argv = ["user", command, name, "--state-dir", str(state)]
    if command == "add":
        argv += unix_user_args()
    if password is not None:
        argv.append("--password-stdin")
    r = copyless(*argv, stdin=None if password is None else password + "\n")
    assert r.returncode == 0, f"copyless {' '.join(argv)}: {r.stdout}{r.stderr}"


def eventually(check, what, timeout=WITHIN):
    """Polls `check` until it returns something true; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s", pytrace=False)
        time.sleep(0.2)


class Serve(support.Serve):
    """`copyless serve` of `base`/share with the user store `state`."""

    def __init__(self, base, state):
        self.share = base / "share"
        self.share.mkdir(exist_ok=True)
        super().__init__(base, "--share", f"share={self.share}", "--state-dir", str(state))

    def server(self, name, password):
        return Server("127.0.0.1", self.port, "share", self.share, name, password)

    def stop(self):
        status = super().stop()
        assert status == 0, f"exit status {status}\n{self.stderr()}"


@pytest.fixture
def base():
    path = make_temp_dir("users")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def running(base):
    """A server whose store holds one user besides those the test adds."""
    state = base / "state"
    user(state, "add", OWNER, OWNER_PASSWORD)
    serve = Serve(base, state)
    try:
        yield serve, state
    finally:
        serve.stop()


def login(serve, client_conf, name, password):
    """smbclient as `name`: None when it worked, else the NT status it got."""
    r = smbclient(serve.server(name, password), client_conf, "ls", timeout=60)
    statuses = NT_STATUS_RE.findall(r.output)
    if r.returncode == 0 and not statuses:
        return None
    return statuses[0] if statuses else f"exit status {r.returncode}: {r.output}"


def test_user_changes_take_effect_without_restart(running, client_conf):
    serve, state = running
    assert login(serve, client_conf, BOB, "first-Pass1") == "NT_STATUS_LOGON_FAILURE"

    user(state, "add", BOB, "first-Pass1")
    eventually(lambda: login(serve, client_conf, BOB, "first-Pass1") is None,
               "a user added while the server runs can log in")

    user(state, "passwd", BOB, "second-Pass2")
    eventually(lambda: login(serve, client_conf, BOB, "first-Pass1")
               == "NT_STATUS_LOGON_FAILURE",
               "the old password is refused after `user passwd`")
    assert login(serve, client_conf, BOB, "second-Pass2") is None

    user(state, "del", BOB)
    eventually(lambda: login(serve, client_conf, BOB, "second-Pass2")
               == "NT_STATUS_LOGON_FAILURE",
               "a deleted user can no longer log in")
    # Everyone else is untouched by the reloads.
    assert login(serve, client_conf, OWNER, OWNER_PASSWORD) is None
    # The reload is logged just after it takes effect.
    eventually(lambda: "user store reloaded: 1 user\n" in serve.stderr(),
               "the reload after `user del` is logged")
    assert "user store reloaded: 2 users\n" in serve.stderr(), serve.stderr()


def _tree_connect(session, share):
    tree = TreeConnect(session, share)
    tree.connect()
    tree.disconnect()


def test_a_deleted_users_session_is_ended(running):
    serve, state = running
    user(state, "add", BOB, "bob-Pass1")
    connection = Connection(uuid.uuid4(), "127.0.0.1", serve.port, require_signing=True)
    connection.connect(timeout=30)
    try:
        session = eventually(lambda: _session(connection, BOB, "bob-Pass1"),
                             "a user added while the server runs gets a session")
        share = f"\\\\127.0.0.1\\share"
        _tree_connect(session, share)

        user(state, "del", BOB)

        def refused():
            try:
                _tree_connect(session, share)
            except (SMBException, OSError) as exc:
                return True
            return False

        eventually(refused, "a request on the session of a deleted user fails", timeout=10)
    finally:
        try:
            connection.disconnect()
        except (SMBException, OSError):
            pass


def _session(connection, name, password):
    session = Session(connection, name, password, require_encryption=False,
                      auth_protocol="ntlm")
    try:
        session.connect()
    except SMBException:
        return None
    return session


def test_a_store_others_may_read_is_refused(base):
    state = base / "state"
    user(state, "add", OWNER, OWNER_PASSWORD)
    users = state / "users"
    users.chmod(0o644)
    r = copyless("serve", "--listen", "127.0.0.1:0", "--share", f"share={base}",
                 "--state-dir", str(state))
    assert r.returncode == 1, f"status {r.returncode}\n{r.stdout}{r.stderr}"
    assert f"chmod 600 {users}" in r.stderr, r.stderr
    assert "listening" not in r.stdout, r.stdout
    # The user commands say the same.
    r = copyless("user", "list", "--state-dir", str(state))
    assert r.returncode == 1 and f"chmod 600 {users}" in r.stderr, r.stderr


def test_first_start_without_a_terminal_writes_the_password_to_a_file(base, client_conf):
    state = base / "state"
    serve = Serve(base, state)
    try:
        secret = state / "initial-password"
        assert (f"created user copyless; its password is in {secret}; "
                "delete that file once noted") in serve.stdout, serve.stdout
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        password = secret.read_text().strip()
        assert password, "an empty initial-password"
        for line in serve.stdout:
            assert password not in line, f"the password was printed: {line!r}"
        assert password not in serve.stderr()
        assert login(serve, client_conf, "copyless", password) is None
    finally:
        serve.stop()


def test_an_empty_store_creates_nobody(base, client_conf):
    state = base / "state"
    user(state, "add", BOB, "bob-Pass1")
    user(state, "del", BOB)
    serve = Serve(base, state)
    try:
        assert "nobody can log in" in serve.stderr(), serve.stderr()
        assert f"copyless user add NAME --state-dir {state}" in serve.stderr()
        assert not (state / "initial-password").exists()
        assert not any("created user" in line for line in serve.stdout), serve.stdout
        r = copyless("user", "list", "--state-dir", str(state))
        assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr

        # A user added later is picked up without a restart.
        user(state, "add", "carol", "carol-Pass1")
        eventually(lambda: login(serve, client_conf, "carol", "carol-Pass1") is None,
                   "a user added to an empty store can log in")
    finally:
        serve.stop()


def test_users_without_a_unix_account_are_reported(base):
    state = base / "state"
    user(state, "add", OWNER, OWNER_PASSWORD)
    users = state / "users"
    # Written by hand, as a store from before links or an account removed
    # since would be: linked by name to accounts that do not exist.
    hash_hex = "a4f49c406510bdcab6824ee7c30fd852"
    with open(users, "a") as f:
        f.write(f"copyless-ghost:{hash_hex}\n")

    def said(name):
        line = (f'copyless: user {name}: no Unix account "{name}"; {name} cannot log in '
                f"until linked (copyless user link {name} --unix-user ACCOUNT)")
        return serve.stderr().splitlines().count(line)

    serve = Serve(base, state)
    try:
        assert said("copyless-ghost") == 1, serve.stderr()
        assert said(OWNER) == 0, serve.stderr()
        r = copyless("user", "list", "--state-dir", str(state))
        assert "copyless-ghost\tunix copyless-ghost (missing)\n" in r.stdout, r.stdout

        with open(users, "a") as f:
            f.write(f"copyless-phantom:{hash_hex}\n")
        eventually(lambda: said("copyless-phantom") == 1,
                   "a user without an account, added while the server runs, is reported")
        account = r.stdout.split(f"{OWNER}\tunix ", 1)[1].split(" ", 1)[0]
        r = copyless("user", "link", "copyless-phantom", "--unix-user", account,
                     "--state-dir", str(state))
        assert r.returncode == 0, r.stdout + r.stderr
        r = copyless("user", "list", "--state-dir", str(state))
        assert f"copyless-phantom\tunix {account} (uid " in r.stdout, r.stdout
        # Once when phantom was added, once for the link.
        eventually(lambda: serve.stderr().count("user store reloaded: 3 users\n") == 2,
                   "the link is picked up")
        # Each is said once, not every second nor on every reload.
        assert said("copyless-ghost") == 1, serve.stderr()
        assert said("copyless-phantom") == 1, serve.stderr()
    finally:
        serve.stop()
