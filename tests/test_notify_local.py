"""Change notification of what local processes do on the share's
filesystem (issue 12): a client waits on a folder while the test, as any
local program would, creates, writes, renames and deletes in the share
directory on disk. What another client does through the server is still
reported exactly once."""

from __future__ import annotations

import os
import time

import pytest
from smbprotocol.change_notify import ChangeNotifyFlags, CompletionFilter, FileAction, FileSystemWatcher
from smbprotocol.connection import Dialects
from smbprotocol.open import CreateDisposition, CreateOptions, FilePipePrinterAccessMask, ImpersonationLevel, Open

from conftest import SERVER_KIND
from support import rename
from test_acl import connect
from test_notify import NAMES, SHARE_ALL, changes, make_file, open_dir

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's local change watch")

WRITES = CompletionFilter.FILE_NOTIFY_CHANGE_LAST_WRITE | CompletionFilter.FILE_NOTIFY_CHANGE_SIZE


def watch(folder, completion_filter, recursive=False) -> FileSystemWatcher:
    """Starts a CHANGE_NOTIFY and returns once the server answered that it
    waits: from then on the folder is watched."""
    watcher = FileSystemWatcher(folder)
    watcher.start(completion_filter, flags=ChangeNotifyFlags.SMB2_WATCH_TREE if recursive else 0)
    deadline = time.monotonic() + 10
    while watcher._request.async_id is None and not watcher.response_event.is_set():
        assert time.monotonic() < deadline, "the request was never pending"
        time.sleep(0.005)
    return watcher


@pytest.fixture
def client(server):
    tree = connect(server, Dialects.SMB_3_1_1)
    yield tree
    tree.session.connection.disconnect()


def test_local_creation_rename_and_deletion_are_reported(server, client):
    folder = open_dir(client, "local")
    on_disk = server.share_path / "local"

    w = watch(folder, NAMES)
    (on_disk / "a.txt").write_bytes(b"hello")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "a.txt")]

    w = watch(folder, NAMES)
    os.rename(on_disk / "a.txt", on_disk / "b.txt")
    assert changes(w) == [(FileAction.FILE_ACTION_RENAMED_OLD_NAME, "a.txt"),
                          (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "b.txt")]

    w = watch(folder, NAMES)
    os.unlink(on_disk / "b.txt")
    assert changes(w) == [(FileAction.FILE_ACTION_REMOVED, "b.txt")]

    w = watch(folder, NAMES)
    os.mkdir(on_disk / "sub")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "sub")]

    w = watch(folder, NAMES)
    os.rmdir(on_disk / "sub")
    assert changes(w) == [(FileAction.FILE_ACTION_REMOVED, "sub")]
    folder.close()


def test_a_rename_out_of_sight_is_a_removal_and_into_sight_an_addition(server, client):
    folder = open_dir(client, "watched")
    open_dir(client, "elsewhere").close()
    watched, elsewhere = server.share_path / "watched", server.share_path / "elsewhere"
    (elsewhere / "in.txt").write_bytes(b"")

    w = watch(folder, NAMES)
    os.rename(elsewhere / "in.txt", watched / "in.txt")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "in.txt")]

    w = watch(folder, NAMES)
    os.rename(watched / "in.txt", elsewhere / "out.txt")
    assert changes(w) == [(FileAction.FILE_ACTION_REMOVED, "in.txt")]
    folder.close()


def test_local_writes_are_reported_as_modified(server, client):
    on_disk = server.share_path / "writes"
    on_disk.mkdir()
    (on_disk / "log.txt").write_bytes(b"first\n")
    folder = open_dir(client, "writes")

    w = watch(folder, WRITES)
    with open(on_disk / "log.txt", "ab") as f:
        f.write(b"second\n")
    assert changes(w)[0] == (FileAction.FILE_ACTION_MODIFIED, "log.txt")
    folder.close()


def test_a_tree_watch_sees_local_changes_in_old_and_new_subfolders(server, client):
    on_disk = server.share_path / "tree"
    (on_disk / "old" / "inner").mkdir(parents=True)
    folder = open_dir(client, "tree")

    w = watch(folder, NAMES, recursive=True)
    (on_disk / "old" / "inner" / "x.txt").write_bytes(b"")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "old\\inner\\x.txt")]

    w = watch(folder, NAMES, recursive=True)
    os.mkdir(on_disk / "new")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "new")]

    # The new folder was watched before its addition was reported.
    w = watch(folder, NAMES, recursive=True)
    (on_disk / "new" / "y.txt").write_bytes(b"")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "new\\y.txt")]

    # A folder renamed locally: what happens in it carries its new name.
    w = watch(folder, NAMES, recursive=True)
    os.rename(on_disk / "new", on_disk / "renamed")
    assert changes(w) == [(FileAction.FILE_ACTION_RENAMED_OLD_NAME, "new"),
                          (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "renamed")]
    w = watch(folder, NAMES, recursive=True)
    (on_disk / "renamed" / "z.txt").write_bytes(b"")
    assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "renamed\\z.txt")]
    folder.close()


def rename_through(tree, old, new) -> None:
    h = Open(tree, old)
    h.create(ImpersonationLevel.Impersonation,
             FilePipePrinterAccessMask.DELETE | FilePipePrinterAccessMask.FILE_READ_ATTRIBUTES,
             0, SHARE_ALL, CreateDisposition.FILE_OPEN, CreateOptions.FILE_NON_DIRECTORY_FILE)
    rename(h, new)
    h.close()


def write_through(tree, name, data) -> None:
    h = Open(tree, name)
    h.create(ImpersonationLevel.Impersonation, 0x0013019F, 0, SHARE_ALL,
             CreateDisposition.FILE_OPEN_IF, CreateOptions.FILE_NON_DIRECTORY_FILE)
    h.write(data, 0)
    h.close()


def test_what_another_client_does_is_reported_once(server, client):
    """The kernel sees the server's own changes too: they must not come a
    second time. After each, a local change is the marker: had a second
    report of the client's change come, it would stand before the marker
    in the next answer (the kernel queues events in order)."""
    other = connect(server, Dialects.SMB_3_1_1)
    try:
        # Made through the server, so that its user may write in it.
        names = open_dir(client, "shared")
        writes = open_dir(client, "shared")
        on_disk = server.share_path / "shared"
        (on_disk / "written-marker").touch()

        w = watch(names, NAMES)
        make_file(other, "shared\\doc.txt")
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "doc.txt")]
        w = watch(names, NAMES)
        (on_disk / "marker1").touch()
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "marker1")]

        w = watch(writes, WRITES)
        write_through(other, "shared\\doc.txt", b"contents")
        assert changes(w) == [(FileAction.FILE_ACTION_MODIFIED, "doc.txt")]
        w = watch(writes, WRITES)
        with open(on_disk / "written-marker", "ab") as f:
            f.write(b"local")
        assert changes(w)[0] == (FileAction.FILE_ACTION_MODIFIED, "written-marker")

        w = watch(names, NAMES)
        rename_through(other, "shared\\doc.txt", "shared\\renamed.txt")
        assert changes(w) == [(FileAction.FILE_ACTION_RENAMED_OLD_NAME, "doc.txt"),
                              (FileAction.FILE_ACTION_RENAMED_NEW_NAME, "renamed.txt")]
        w = watch(names, NAMES)
        (on_disk / "marker2").touch()
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "marker2")]

        w = watch(names, NAMES)
        make_file(other, "shared\\renamed.txt", delete=True)
        assert changes(w) == [(FileAction.FILE_ACTION_REMOVED, "renamed.txt")]
        w = watch(names, NAMES)
        (on_disk / "marker3").touch()
        assert changes(w) == [(FileAction.FILE_ACTION_ADDED, "marker3")]
        names.close()
        writes.close()
    finally:
        other.session.connection.disconnect()
