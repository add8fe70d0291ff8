"""Access checks that hold on every path (issue 25, findings 1-4).

A hostile user of the same NAS, two users with Unix accounts of their own
(alice and bob, both in copyless-family) and an anonymous guest, against
the real server: emptying another user's file through an overwrite that
asks for nothing, taking a file over through its group, renaming around a
stored DACL, and writing streams where writing is not allowed.
"""

from __future__ import annotations

import grp
import os

import pytest
from smbprotocol.header import NtStatus
from smbprotocol.open import CreateDisposition, Open
from smbprotocol.security_descriptor import (AccessAllowedAce, AccessDeniedAce, AclPacket,
                                             SDControl, SMB2CreateSDBuffer)

from conftest import SERVER_KIND, SHARE_NAME, _start_copyless, _stop_copyless, make_temp_dir
from hostile import FILE_OPEN_IF, RawSmb
from support import rename
from test_acl import DACL, OWNER, open_, set_sd, status_of
from test_unix_identity import (ALICE, BOB, GROUP, READ, WRITE, connect, ensure_accounts,
                                lay_out, sid, uid, write_file)

pytestmark = [
    pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own users and config"),
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="acting as other Unix accounts needs a server running as root"),
]

READ_ATTRIBUTES = 0x80
DELETE = 0x10000
WRITE_DAC = 0x40000
WRITE_OWNER = 0x80000
FULL = 0x001F01FF
ADD_FILE = 0x2
DELETE_CHILD = 0x40
# FILE_LIST_DIRECTORY | FILE_TRAVERSE | FILE_READ_ATTRIBUTES | READ_CONTROL | SYNCHRONIZE
LIST = 0x001200A9
STATUS_INVALID_OWNER = 0xC000005A
TRUNCATING = (CreateDisposition.FILE_OVERWRITE, CreateDisposition.FILE_OVERWRITE_IF,
              CreateDisposition.FILE_SUPERSEDE)


@pytest.fixture
def nas():
    """The family NAS of test_unix_identity, plus a read-only share that
    guests may read."""
    ensure_accounts()
    base = make_temp_dir("access")
    path = base / "share"
    running = _start_copyless(base, extra_users=(ALICE, BOB), share_flag=False, extra_config=(
        "[security]\nguest = true\n"
        f'[[share]]\nname = "{SHARE_NAME}"\npath = "{path}"\n'
        f'[[share]]\nname = "library"\npath = "{path}"\nguest_ok = true\nread_only = true\n'))
    try:
        lay_out(running.info.share_path)
        yield running.info
    finally:
        _stop_copyless(running)


def unix_sid(name: str) -> str:
    return f"S-1-22-1-{uid(name)}"


def descriptor(aces, owner: str | None = None) -> bytes:
    """A DACL of (allow, sid, mask) in order, and the owner when given."""
    acl = AclPacket()
    entries = []
    for allow, who, mask in aces:
        ace = AccessAllowedAce() if allow else AccessDeniedAce()
        ace["mask"] = mask
        ace["sid"] = sid(who)
        entries.append(ace)
    acl["aces"] = entries
    sd = SMB2CreateSDBuffer()
    sd["control"].set_flag(SDControl.SELF_RELATIVE)
    if owner:
        sd.set_owner(sid(owner))
    sd.set_dacl(acl)
    return sd.pack()


def protect(tree, name: str, raw: bytes, directory: bool = False) -> None:
    h = open_(tree, name, WRITE_DAC, directory=directory)
    set_sd(h, DACL, raw)
    h.close()


def disconnect(*trees) -> None:
    for t in trees:
        t.session.connection.disconnect()


def test_an_overwrite_asking_for_nothing_empties_no_file_it_may_not_write(nas):
    share = nas.share_path
    alice, bob = connect(nas, ALICE), connect(nas, BOB)
    try:
        # The mode lets bob write; the DACL lets only alice near it.
        write_file(alice, "family\\ledger.txt", b"alice's ledger")
        (share / "family" / "ledger.txt").chmod(0o666)
        protect(alice, "family\\ledger.txt",
                descriptor([(True, unix_sid("alice"), FULL)]))
        for disposition in TRUNCATING:
            assert status_of(lambda: open_(bob, "family\\ledger.txt", READ_ATTRIBUTES,
                                           disposition)) == NtStatus.STATUS_ACCESS_DENIED, disposition
        assert (share / "family" / "ledger.txt").read_bytes() == b"alice's ledger"

        # Without a DACL, a file both may write, held by alice sharing
        # nothing: emptying it is writing it.
        write_file(alice, "family\\shared.txt", b"in use")
        (share / "family" / "shared.txt").chmod(0o666)
        held = Open(alice, "family\\shared.txt")
        held.create(2, READ | WRITE, 0x80, 0, CreateDisposition.FILE_OPEN, 0x40)
        try:
            for disposition in TRUNCATING:
                h = Open(bob, "family\\shared.txt")
                assert status_of(lambda: h.create(2, READ_ATTRIBUTES, 0x80, 7, disposition, 0x40)) \
                    == NtStatus.STATUS_SHARING_VIOLATION, disposition
        finally:
            held.close()
        assert (share / "family" / "shared.txt").read_bytes() == b"in use"

        # Where he may write, he still may.
        h = open_(bob, "family\\shared.txt", READ_ATTRIBUTES, CreateDisposition.FILE_OVERWRITE)
        h.close()
        assert (share / "family" / "shared.txt").read_bytes() == b""
    finally:
        disconnect(alice, bob)


def test_a_group_member_may_not_take_a_file_or_folder_over(nas):
    share = nas.share_path
    alice, bob = connect(nas, ALICE), connect(nas, BOB)
    try:
        write_file(alice, "family\\photos.txt", b"alice's")
        (share / "family" / "photos.txt").chmod(0o660)
        # bob may write it through the group, but not change who owns it
        # or who may use it: the file's, nor the 2770 folder's.
        for name, directory in (("family\\photos.txt", False), ("family", True)):
            for right in (WRITE_DAC, WRITE_OWNER):
                assert status_of(lambda: open_(bob, name, right, directory=directory)) \
                    == NtStatus.STATUS_ACCESS_DENIED, (name, right)
        h = open_(bob, "family\\photos.txt", WRITE)
        h.close()

        # alice may, but only to make herself or her group the owner.
        h = open_(alice, "family\\photos.txt", WRITE_OWNER | WRITE_DAC)
        try:
            raw = descriptor([(True, unix_sid("alice"), FULL)], owner=unix_sid("bob"))
            assert status_of(lambda: set_sd(h, OWNER, raw)) == STATUS_INVALID_OWNER
            family_sid = f"S-1-22-2-{grp.getgrnam(GROUP).gr_gid}"
            set_sd(h, OWNER, descriptor([], owner=family_sid))
        finally:
            h.close()
        # Her group owning it shares the owner's implicit rights with its
        # members, as on Windows: bob may now change its DACL, still not
        # its owner.
        open_(bob, "family\\photos.txt", WRITE_DAC).close()
        assert status_of(lambda: open_(bob, "family\\photos.txt", WRITE_OWNER)) \
            == NtStatus.STATUS_ACCESS_DENIED
    finally:
        disconnect(alice, bob)


def test_renames_keep_to_the_folders_dacls(nas):
    share = nas.share_path
    alice, bob = connect(nas, ALICE), connect(nas, BOB)
    try:
        # A folder bob may list but not add to, by its DACL (the mode
        # would let him).
        for name in ("locked", "keep"):
            h = open_(alice, f"family\\{name}", WRITE, CreateDisposition.FILE_CREATE,
                      directory=True)
            h.close()
            (share / "family" / name).chmod(0o2777)
        protect(alice, "family\\locked", descriptor([
            (True, unix_sid("alice"), FULL), (True, unix_sid("bob"), LIST)]), directory=True)
        write_file(bob, "family\\bobs.txt", b"bob's")
        assert status_of(lambda: open_(bob, "family\\locked\\new.txt", WRITE,
                                       CreateDisposition.FILE_CREATE)) == NtStatus.STATUS_ACCESS_DENIED
        h = open_(bob, "family\\bobs.txt", DELETE)
        try:
            assert status_of(lambda: rename(h, "family\\locked\\bobs.txt")) \
                == NtStatus.STATUS_ACCESS_DENIED
        finally:
            h.close()
        assert (share / "family" / "bobs.txt").exists()
        assert not (share / "family" / "locked" / "bobs.txt").exists()

        # A folder that lets bob add files but delete none, and alice's
        # file in it, whose DACL denies him DELETE: he may not replace it.
        protect(alice, "family\\keep", descriptor([
            (True, unix_sid("alice"), FULL), (True, unix_sid("bob"), LIST | ADD_FILE)]),
            directory=True)
        write_file(alice, "family\\keep\\will.txt", b"alice's will")
        (share / "family" / "keep" / "will.txt").chmod(0o666)
        protect(alice, "family\\keep\\will.txt", descriptor([
            (False, unix_sid("bob"), DELETE), (True, "S-1-1-0", FULL)]))
        h = open_(bob, "family\\bobs.txt", DELETE)
        try:
            assert status_of(lambda: rename(h, "family\\keep\\will.txt", replace_if_exists=True)) \
                == NtStatus.STATUS_ACCESS_DENIED
            # Adding a new name there he may.
            rename(h, "family\\keep\\bobs.txt")
        finally:
            h.close()
        assert (share / "family" / "keep" / "will.txt").read_bytes() == b"alice's will"
        assert (share / "family" / "keep" / "bobs.txt").read_bytes() == b"bob's"
    finally:
        disconnect(alice, bob)


def streams_of(path) -> list[str]:
    return [n for n in os.listxattr(path) if n.startswith("user.copyless.stream.")]


def test_streams_are_written_only_where_writing_is_allowed(nas):
    share = nas.share_path
    alice, bob = connect(nas, ALICE), connect(nas, BOB)
    guest = RawSmb.logged_in(nas.host, nas.port, "", "", "library")
    try:
        # An anonymous guest on a read-only share, asking for attributes
        # only, on a file and on a folder.
        for name in ("public\\readme.txt:note", "public:note"):
            status, _ = guest.create(name, access=READ_ATTRIBUTES, disposition=FILE_OPEN_IF)
            assert status == NtStatus.STATUS_ACCESS_DENIED, name
        assert streams_of(share / "public" / "readme.txt") == []
        assert streams_of(share / "public") == []

        # A file whose DACL denies bob everything, though its mode lets
        # him write.
        write_file(alice, "family\\diary.txt", b"private")
        (share / "family" / "diary.txt").chmod(0o666)
        protect(alice, "family\\diary.txt", descriptor([
            (False, unix_sid("bob"), FULL), (True, unix_sid("alice"), FULL)]))
        assert status_of(lambda: open_(bob, "family\\diary.txt:hidden", READ_ATTRIBUTES,
                                       CreateDisposition.FILE_OPEN_IF)) \
            == NtStatus.STATUS_ACCESS_DENIED
        assert streams_of(share / "family" / "diary.txt") == []

        # alice may.
        h = open_(alice, "family\\diary.txt:hidden", READ_ATTRIBUTES,
                  CreateDisposition.FILE_OPEN_IF)
        h.close()
        assert len(streams_of(share / "family" / "diary.txt")) == 1
    finally:
        guest.close()
        disconnect(alice, bob)
