"""Change notification between two smbprotocol clients, as Explorer and
Finder keep a folder window current: one client watches a folder, the
other creates, renames and deletes in it."""

from __future__ import annotations

from smbprotocol.change_notify import (ChangeNotifyFlags, CompletionFilter, FileAction,
                                       FileSystemWatcher)
from smbprotocol.connection import Dialects
from smbprotocol.open import (CreateDisposition, CreateOptions, DirectoryAccessMask,
                              FileAttributes, ImpersonationLevel, Open, ShareAccess)

from test_acl import connect

SHARE_ALL = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
NAMES = CompletionFilter.FILE_NOTIFY_CHANGE_FILE_NAME | CompletionFilter.FILE_NOTIFY_CHANGE_DIR_NAME


def open_dir(tree, name) -> Open:
    h = Open(tree, name)
    h.create(ImpersonationLevel.Impersonation,
             DirectoryAccessMask.FILE_LIST_DIRECTORY | DirectoryAccessMask.SYNCHRONIZE,
             FileAttributes.FILE_ATTRIBUTE_DIRECTORY, SHARE_ALL, CreateDisposition.FILE_OPEN_IF,
             CreateOptions.FILE_DIRECTORY_FILE)
    return h


def make_file(tree, name, delete=False) -> None:
    h = Open(tree, name)
    h.create(ImpersonationLevel.Impersonation, 0x0013019F, FileAttributes.FILE_ATTRIBUTE_NORMAL,
             SHARE_ALL, CreateDisposition.FILE_OPEN_IF,
             CreateOptions.FILE_NON_DIRECTORY_FILE
             | (CreateOptions.FILE_DELETE_ON_CLOSE if delete else 0))
    h.close()


def changes(watcher) -> list[tuple[int, str]]:
    assert watcher.response_event.wait(10), "no change notification arrived"
    return [(c["action"].get_value(), c["file_name"].get_value()) for c in watcher.result]


def test_a_folder_watcher_hears_what_another_client_does(server):
    first, second = connect(server, Dialects.SMB_3_1_1), connect(server, Dialects.SMB_3_1_1)
    try:
        open_dir(second, "projects").close()
        folder = open_dir(first, "projects")

        watcher = FileSystemWatcher(folder)
        watcher.start(NAMES, flags=ChangeNotifyFlags.SMB2_WATCH_TREE)
        make_file(second, "projects\\plan.txt")
        assert changes(watcher) == [(FileAction.FILE_ACTION_ADDED, "plan.txt")]

        # What happens while no request waits is kept for the next one.
        make_file(second, "projects\\plan.txt", delete=True)
        watcher = FileSystemWatcher(folder)
        watcher.start(NAMES, flags=ChangeNotifyFlags.SMB2_WATCH_TREE)
        assert changes(watcher) == [(FileAction.FILE_ACTION_REMOVED, "plan.txt")]

        # A new folder beneath, and a file in it: the watch takes the tree.
        watcher = FileSystemWatcher(folder)
        watcher.start(NAMES, flags=ChangeNotifyFlags.SMB2_WATCH_TREE)
        open_dir(second, "projects\\2027").close()
        assert changes(watcher) == [(FileAction.FILE_ACTION_ADDED, "2027")]
        watcher = FileSystemWatcher(folder)
        watcher.start(NAMES, flags=ChangeNotifyFlags.SMB2_WATCH_TREE)
        make_file(second, "projects\\2027\\budget.xlsx")
        assert changes(watcher) == [(FileAction.FILE_ACTION_ADDED, "2027\\budget.xlsx")]
        folder.close()
    finally:
        first.session.connection.disconnect()
        second.session.connection.disconnect()


def test_closing_the_folder_ends_a_waiting_request(server):
    tree = connect(server, Dialects.SMB_3_1_1)
    try:
        folder = open_dir(tree, "closing")
        watcher = FileSystemWatcher(folder)
        watcher.start(NAMES)
        folder.close()
        assert watcher.response_event.wait(10), "the request was left waiting"
        assert watcher._request.response["status"].get_value() == 0x0000010B, \
            "STATUS_NOTIFY_CLEANUP"
    finally:
        tree.session.connection.disconnect()
