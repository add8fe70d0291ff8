"""Change notification tells a watcher only what it could have listed
(issue 25): bob watches the whole share (WATCH_TREE) while alice works in
a folder bob may not enter, by its mode bits or by a stored DACL. He
hears nothing of it, made through the server or by a local process, and
still hears of what happens in the folder they share."""

from __future__ import annotations

import os
import pwd

import pytest
from smbprotocol.change_notify import FileAction

from test_acl import DACL, set_sd
from test_notify import NAMES, changes, open_dir
from test_notify_local import watch
from test_unix_identity import (ALICE, BOB, READ_CONTROL, WRITE_DAC, connect,  # noqa: F401
                                family, grant_alice_deny_bob, open_, write_file)

ADDED = FileAction.FILE_ACTION_ADDED


def local_file(path, owner: str) -> None:
    """A file a local program of `owner` makes, beside the server."""
    path.write_bytes(b"made on the server's disk")
    account = pwd.getpwnam(owner)
    os.chown(path, account.pw_uid, account.pw_gid)


@pytest.fixture
def alice_and_bob(family):
    alice, bob = connect(family, ALICE), connect(family, BOB)
    yield alice, bob
    alice.session.connection.disconnect()
    bob.session.connection.disconnect()


def test_a_tree_watcher_hears_nothing_of_a_folder_its_mode_keeps_it_out_of(family,
                                                                           alice_and_bob):
    alice, bob = alice_and_bob
    share = family.share_path
    root = open_dir(bob, "")

    # alice's folder is 0755: bob may list it, and hears of it.
    w = watch(root, NAMES, recursive=True)
    write_file(alice, "alice\\open.txt", b"anyone may see this name")
    assert changes(w) == [(ADDED, "alice\\open.txt")]

    # 0700: bob may not even enter it.
    (share / "alice").chmod(0o700)
    w = watch(root, NAMES, recursive=True)
    write_file(alice, "alice\\salary.xlsx", b"alice only")
    write_file(alice, "family\\plan.txt", b"for both")
    assert changes(w) == [(ADDED, "family\\plan.txt")], \
        "bob heard of a file in alice's 0700 folder"

    # alice, who may list her folder, still hears of it.
    mine = open_dir(alice, "")
    w = watch(mine, NAMES, recursive=True)
    write_file(alice, "alice\\bonus.xlsx", b"alice only")
    assert changes(w) == [(ADDED, "alice\\bonus.xlsx")]


def test_what_a_local_program_does_is_told_only_to_those_who_may_list_it(family,
                                                                        alice_and_bob):
    alice, bob = alice_and_bob
    share = family.share_path
    (share / "alice").chmod(0o700)
    # bob's watch comes first, so his request has the server watch the
    # share's folders for local changes: alice's own is watched all the
    # same, as the server.
    theirs = watch(open_dir(bob, ""), NAMES, recursive=True)
    mine = watch(open_dir(alice, ""), NAMES, recursive=True)
    # The kernel reports changes in order: a leak would come first.
    local_file(share / "alice" / "diary.txt", "alice")
    local_file(share / "family" / "shopping.txt", "alice")
    assert changes(theirs) == [(ADDED, "family\\shopping.txt")], \
        "bob heard of a file a local program made in alice's 0700 folder"
    assert changes(mine)[0] == (ADDED, "alice\\diary.txt"), \
        "alice did not hear of a file a local program made in her own folder"


def test_a_tree_watcher_hears_nothing_of_a_folder_a_stored_dacl_keeps_it_out_of(
        family, alice_and_bob):
    alice, bob = alice_and_bob
    share = family.share_path
    # alice's folder, whose mode bits let everyone in; its DACL lets alice
    # in and denies bob reading (listing) it.
    locked = share / "locked"
    locked.mkdir()
    alice_account = pwd.getpwnam("alice")
    os.chown(locked, alice_account.pw_uid, alice_account.pw_gid)
    locked.chmod(0o777)
    h = open_(alice, "locked", READ_CONTROL | WRITE_DAC, directory=True)
    set_sd(h, DACL, grant_alice_deny_bob(family))
    h.close()

    root = open_dir(bob, "")
    w = watch(root, NAMES, recursive=True)
    write_file(alice, "locked\\secret.txt", b"alice only")
    write_file(alice, "family\\plan.txt", b"for both")
    assert changes(w) == [(ADDED, "family\\plan.txt")], \
        "bob heard of a file in a folder whose DACL denies him listing it"

    w = watch(root, NAMES, recursive=True)
    local_file(locked / "local.txt", "alice")
    local_file(share / "family" / "local.txt", "alice")
    assert changes(w) == [(ADDED, "family\\local.txt")], \
        "bob heard of a file a local program made in the folder the DACL keeps him out of"
