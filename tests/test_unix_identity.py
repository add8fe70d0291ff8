"""Each user acts on disk as its own Unix account (issue 11).

The server runs as root with users alice and bob linked to separate system
accounts, both in the group copyless-family: the kernel's own rules (mode
bits, group membership, sticky directories, ownership of new files) apply
to each of them, and a stored DACL tells them apart.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import subprocess
import uuid

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.header import NtStatus
from smbprotocol.file_info import FileInformationClass
from smbprotocol.open import (CreateDisposition, CreateOptions, FileAttributes,
                              ImpersonationLevel, Open, ShareAccess)
from smbprotocol.security_descriptor import (AccessAllowedAce, AccessDeniedAce, AclPacket,
                                             SDControl, SIDPacket, SMB2CreateSDBuffer)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import SERVER_KIND, SHARE_NAME, _start_copyless, _stop_copyless, make_temp_dir
from support import parse_allinfo, parse_ls, rename, run, smbclient, smbclient_argv
from test_acl import DACL, open_, set_sd, status_of

pytestmark = [
    pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own users and config"),
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="acting as other Unix accounts needs a server running as root"),
]

ALICE = ("alice", "Alice-Passw0rd")
BOB = ("bob", "Bob-Passw0rd")
GROUP = "copyless-family"
GROUP_COMMENT = "Family folder: what one saves, all may change"
HOME_COMMENT = "Your own files"

READ = 0x00120089  # FILE_GENERIC_READ
WRITE = 0x00120116  # FILE_GENERIC_WRITE
DELETE = 0x00010000
READ_CONTROL = 0x00020000
WRITE_DAC = 0x00040000


def ensure_accounts() -> None:
    """alice and bob as system accounts, both in copyless-family, before the
    server starts (`copyless user add --create-unix-user` then links them)."""
    subprocess.run(["groupadd", "-f", "--system", GROUP], check=True, capture_output=True)
    for name, _ in (ALICE, BOB):
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                            "--shell", "/usr/sbin/nologin", name],
                           check=True, capture_output=True)
        subprocess.run(["usermod", "-a", "-G", GROUP, name], check=True, capture_output=True)


def uid(name: str) -> int:
    return pwd.getpwnam(name).pw_uid


def lay_out(share) -> None:
    """The share as an administrator would set it up: a folder of alice's
    own, a folder the family group shares (setgid, so new files stay in the
    group), a sticky folder everyone may add to, and a public folder only
    root writes to."""
    share.chmod(0o755)
    a = pwd.getpwnam("alice")
    family = grp.getgrnam(GROUP).gr_gid
    for name, owner, group, mode in (("alice", a.pw_uid, a.pw_gid, 0o755),
                                     ("family", a.pw_uid, family, 0o2770),
                                     ("sticky", 0, 0, 0o1777),
                                     ("public", 0, 0, 0o755)):
        d = share / name
        d.mkdir()
        os.chown(d, owner, group)
        d.chmod(mode)
    (share / "public" / "readme.txt").write_bytes(b"for everyone")


@pytest.fixture
def family():
    ensure_accounts()
    base = make_temp_dir("identity")
    (base / "homes").mkdir()
    (base / "homes").chmod(0o755)
    # The same tree as two more shares: alice's alone, and one guests may use.
    path = base / "share"
    running = _start_copyless(base, extra_users=(ALICE, BOB), share_flag=False, extra_config=(
        '[security]\nguest = true\nmap_to_guest = "bad user"\n'
        f'[[share]]\nname = "{SHARE_NAME}"\npath = "{path}"\n'
        f'[[share]]\nname = "alices"\npath = "{path}"\nvalid_users = ["alice"]\n'
        'access_based_share_enum = true\n'
        f'[[share]]\nname = "guests"\npath = "{path}"\nguest_ok = true\n'
        f'[[share]]\nname = "abe"\npath = "{path}"\naccess_based_enumeration = true\n'
        f'[[share]]\nname = "forced"\npath = "{path}"\nforce_user = "nobody"\n'
        f'[[share]]\nname = "group"\npath = "{path}"\ninherit_permissions = true\n'
        f'comment = "{GROUP_COMMENT}"\n'
        f'[[share]]\nname = "masked"\npath = "{path}"\ncreate_mask = "0770"\n'
        'force_create_mode = 0o660\ndirectory_mask = "0770"\nforce_directory_mode = "2770"\n'
        f'[[share]]\nname = "tidy"\npath = "{path}"\nveto_files = ["Thumbs.db", "._*"]\n'
        'hide_files = ["desktop.ini"]\nhide_dot_files = true\ndelete_veto_files = true\n'
        f'[[share]]\nname = "vetoonly"\npath = "{path}"\nveto_files = ["Thumbs.db", "._*"]\n'
        f'[homes]\npath = "{base}/homes/%U"\ncomment = "{HOME_COMMENT}"\n'))
    try:
        lay_out(running.info.share_path)
        yield running.info
    finally:
        _stop_copyless(running)


def connect(server, user, share=None) -> TreeConnect:
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(Dialects.SMB_3_1_1, timeout=30)
    session = Session(connection, user[0], user[1], require_encryption=False,
                      auth_protocol="ntlm")
    session.connect()
    tree = TreeConnect(session, f"\\\\{server.host}\\{share or server.share}")
    try:
        tree.connect()
    except BaseException:
        connection.disconnect()
        raise
    return tree


def write_file(tree, name, data: bytes) -> None:
    h = open_(tree, name, WRITE, CreateDisposition.FILE_OVERWRITE_IF)
    h.write(data, 0)
    h.close()


def test_users_act_as_their_own_accounts(family):
    share = family.share_path
    alice, bob = connect(family, ALICE), connect(family, BOB)
    try:
        # New files belong to their creator.
        write_file(alice, "alice\\new.txt", b"mine")
        st = (share / "alice" / "new.txt").stat()
        assert (st.st_uid, st.st_gid) == (uid("alice"), pwd.getpwnam("alice").pw_gid)

        # Mode 0600 keeps bob out; alice still reads it.
        write_file(alice, "alice\\private.txt", b"secret")
        (share / "alice" / "private.txt").chmod(0o600)
        assert status_of(lambda: open_(bob, "alice\\private.txt", READ)) \
            == NtStatus.STATUS_ACCESS_DENIED
        h = open_(alice, "alice\\private.txt", READ)
        assert h.read(0, 6) == b"secret"
        h.close()
        # Nor may bob write into alice's folder.
        assert status_of(lambda: write_file(bob, "alice\\bob.txt", b"x")) \
            == NtStatus.STATUS_ACCESS_DENIED
        assert not (share / "alice" / "bob.txt").exists()

        # The family folder: a file alice makes there is readable by bob,
        # a member of its group, though not by the rest of the world.
        write_file(alice, "family\\plan.txt", b"holidays")
        plan = share / "family" / "plan.txt"
        plan.chmod(0o640)
        assert plan.stat().st_gid == grp.getgrnam(GROUP).gr_gid
        h = open_(bob, "family\\plan.txt", READ)
        assert h.read(0, 8) == b"holidays"
        h.close()
        assert status_of(lambda: open_(bob, "family\\plan.txt", WRITE)) \
            == NtStatus.STATUS_ACCESS_DENIED

        # A sticky folder: bob may not delete what alice put there; alice may.
        write_file(alice, "sticky\\alice.txt", b"keep")
        assert status_of(lambda: open_(
            bob, "sticky\\alice.txt", DELETE, options=CreateOptions.FILE_DELETE_ON_CLOSE,
        )) == NtStatus.STATUS_ACCESS_DENIED
        assert (share / "sticky" / "alice.txt").read_bytes() == b"keep"
        h = open_(alice, "sticky\\alice.txt", DELETE, options=CreateOptions.FILE_DELETE_ON_CLOSE)
        h.close()
        assert not (share / "sticky" / "alice.txt").exists()
    finally:
        alice.session.connection.disconnect()
        bob.session.connection.disconnect()


def mode_of(path) -> int:
    return path.stat().st_mode & 0o7777


def make_folder(tree, name) -> None:
    open_(tree, name, READ, CreateDisposition.FILE_CREATE, directory=True).close()


def test_a_shared_folder_stays_shared(family):
    """With inherit_permissions, what alice saves in the family folder
    (0o2770, group copyless-family) gets the folder's mode, so bob, in the
    group, may change it and add to the folders she makes; on a share with
    Samba's default masks he may only read it."""
    share = family.share_path
    family_gid = grp.getgrnam(GROUP).gr_gid
    alice, bob = connect(family, ALICE, "group"), connect(family, BOB, "group")
    try:
        write_file(alice, "family\\list.txt", b"milk")
        make_folder(alice, "family\\photos")
        assert mode_of(share / "family" / "list.txt") == 0o660
        assert mode_of(share / "family" / "photos") == 0o2770
        assert (share / "family" / "photos").stat().st_gid == family_gid
        write_file(bob, "family\\list.txt", b"milk, eggs")
        assert (share / "family" / "list.txt").read_bytes() == b"milk, eggs"
        write_file(bob, "family\\photos\\beach.txt", b"sand")
        assert mode_of(share / "family" / "photos" / "beach.txt") == 0o660
    finally:
        alice.session.connection.disconnect()
        bob.session.connection.disconnect()

    alice, bob = connect(family, ALICE), connect(family, BOB)
    try:
        write_file(alice, "family\\own.txt", b"alice's")
        assert mode_of(share / "family" / "own.txt") == 0o644
        assert status_of(lambda: open_(bob, "family\\own.txt", WRITE)) \
            == NtStatus.STATUS_ACCESS_DENIED
    finally:
        alice.session.connection.disconnect()
        bob.session.connection.disconnect()


def test_smbclient_lists_a_share_s_comment(family, client_conf):
    result = run(smbclient_argv(family, client_conf, user=ALICE[0], password=ALICE[1]))
    assert result.returncode == 0, result.describe()
    listed = re.findall(r"^[ \t]+(\S+)[ \t]+Disk[ \t]*(.*?)[ \t]*$", result.output, re.MULTILINE)
    assert ("group", GROUP_COMMENT) in listed, result.describe()
    assert ("masked", "") in listed, result.describe()


def test_vetoed_names_are_not_there_and_hidden_ones_are_hidden(family, client_conf):
    public = family.share_path / "public"
    for name in ("Thumbs.db", "._photo.jpg", "desktop.ini", ".profile", "photo.jpg"):
        (public / name).write_bytes(b"x")

    def listed(share):
        r = smbclient(family, client_conf, "ls public\\*", share=share,
                      user=ALICE[0], password=ALICE[1])
        assert r.returncode == 0, r.describe()
        return {name: attrs for name, (attrs, _) in parse_ls(r.output).items()
                if name not in (".", "..")}

    tidy = listed("tidy")
    assert set(tidy) == {"readme.txt", "photo.jpg", "desktop.ini", ".profile"}, tidy
    assert "H" in tidy["desktop.ini"] and "H" in tidy[".profile"], tidy
    assert "H" not in tidy["photo.jpg"], tidy
    plain = listed(family.share)
    assert {"Thumbs.db", "._photo.jpg"} <= set(plain), plain
    assert "H" not in plain[".profile"], plain

    alice = connect(family, ALICE, "tidy")
    try:
        assert status_of(lambda: open_(alice, "public\\Thumbs.db", READ)) \
            == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
        assert status_of(lambda: write_file(alice, "alice\\._notes.txt", b"x")) \
            == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
        assert not (family.share_path / "alice" / "._notes.txt").exists()
        # Nor is a name made vetoed by a rename.
        write_file(alice, "alice\\pic.jpg", b"x")
        h = open_(alice, "alice\\pic.jpg", DELETE)
        try:
            assert status_of(lambda: rename(h, "alice\\Thumbs.db")) \
                == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND
        finally:
            h.close()
        assert (family.share_path / "alice" / "pic.jpg").exists()
    finally:
        alice.session.connection.disconnect()
    # What is hidden by name says so when asked about directly, too.
    r = smbclient(family, client_conf, "allinfo public\\desktop.ini", share="tidy",
                  user=ALICE[0], password=ALICE[1])
    assert "H" in parse_allinfo(r.output).attributes, r.describe()


def test_a_folder_holding_only_vetoed_names_goes_where_the_share_says(family, client_conf):
    a = pwd.getpwnam("alice")
    for folder in ("old", "kept"):
        base = family.share_path / "alice" / folder
        (base / "._cache").mkdir(parents=True)
        (base / "._cache" / "blob").write_bytes(b"x")
        (base / "Thumbs.db").write_bytes(b"x")
        for p in (base, base / "._cache", base / "._cache" / "blob", base / "Thumbs.db"):
            os.chown(p, a.pw_uid, a.pw_gid)
    # Listed empty, and removed with what it held.
    r = smbclient(family, client_conf, "ls alice\\old\\*; rmdir alice\\old", share="tidy",
                  user=ALICE[0], password=ALICE[1])
    assert "NT_STATUS" not in r.output and r.returncode == 0, r.describe()
    assert set(parse_ls(r.output)) == {".", ".."}, r.describe()
    assert not (family.share_path / "alice" / "old").exists()
    # Without delete_veto_files the folder is not empty, as Samba says.
    r = smbclient(family, client_conf, "rmdir alice\\kept", share="vetoonly",
                  user=ALICE[0], password=ALICE[1])
    assert "NT_STATUS_DIRECTORY_NOT_EMPTY" in r.output, r.describe()
    assert (family.share_path / "alice" / "kept" / "Thumbs.db").exists()


def disk_shares(server, client_conf, user) -> dict[str, str]:
    """The disk shares `smbclient -L` lists to `user`, with their comments."""
    result = run(smbclient_argv(server, client_conf, user=user[0], password=user[1]))
    assert result.returncode == 0, result.describe()
    listed = re.findall(r"^[ \t]+(\S+)[ \t]+Disk[ \t]*(.*?)[ \t]*$", result.output, re.MULTILINE)
    return dict(listed)


def test_a_share_bob_may_not_use_is_not_listed_to_him(family, client_conf):
    assert "alices" in disk_shares(family, client_conf, ALICE)
    bobs = disk_shares(family, client_conf, BOB)
    assert "alices" not in bobs and "group" in bobs, bobs


def test_each_user_has_a_home_share_of_their_own(family, client_conf):
    home = family.share_path.parent / "homes" / "alice"
    assert not home.exists()
    # Made at her first logon, as pam_mkhomedir makes one: hers, and
    # private; offered to her alone.
    assert disk_shares(family, client_conf, ALICE).get("alice") == HOME_COMMENT
    st = home.stat()
    assert (st.st_uid, st.st_gid) == (uid("alice"), pwd.getpwnam("alice").pw_gid)
    assert st.st_mode & 0o7777 == 0o700
    bobs = disk_shares(family, client_conf, BOB)
    assert "alice" not in bobs and bobs.get("bob") == HOME_COMMENT

    alice = connect(family, ALICE, "alice")
    try:
        write_file(alice, "diary.txt", b"dear diary")
    finally:
        alice.session.connection.disconnect()
    assert (home / "diary.txt").read_bytes() == b"dear diary"

    # Still not bob's to see or use, nor a guest's.
    assert "alice" not in disk_shares(family, client_conf, BOB)
    guest = run(["smbclient", "-L", f"//{family.host}", "-s", str(client_conf),
                 "-p", str(family.port), "-N", "--option=client signing=off",
                 "--option=client ipc signing=off"], timeout=60)
    assert guest.returncode == 0, guest.describe()
    listed = re.findall(r"^[ \t]+(\S+)[ \t]+Disk", guest.output, re.MULTILINE)
    assert "guests" in listed and "alice" not in listed and "bob" not in listed, \
        guest.describe()
    assert status_of(lambda: connect(family, BOB, "alice")) == NtStatus.STATUS_ACCESS_DENIED
    # Her second visit finds what she left.
    alice = connect(family, ALICE, "alice")
    try:
        h = open_(alice, "diary.txt", READ)
        assert h.read(0, 10) == b"dear diary"
        h.close()
    finally:
        alice.session.connection.disconnect()


def test_masks_and_forced_modes_decide_new_modes(family):
    share = family.share_path
    alice = connect(family, ALICE, "masked")
    try:
        write_file(alice, "alice\\notes.txt", b"x")
        make_folder(alice, "alice\\work")
        assert mode_of(share / "alice" / "notes.txt") == 0o660
        # setgid, which mkdir alone would not give.
        assert mode_of(share / "alice" / "work") == 0o2770
    finally:
        alice.session.connection.disconnect()


def test_a_stored_dacl_tells_alice_from_bob(family):
    alice, bob = connect(family, ALICE), connect(family, BOB)
    try:
        write_file(alice, "alice\\notes.txt", b"for alice")
        # The mode lets everyone read; the DACL grants alice and denies bob.
        (family.share_path / "alice" / "notes.txt").chmod(0o644)
        h = open_(alice, "alice\\notes.txt", READ_CONTROL | WRITE_DAC)
        set_sd(h, DACL, grant_alice_deny_bob(family))
        h.close()
        h = open_(alice, "alice\\notes.txt", READ)
        assert h.read(0, 9) == b"for alice"
        h.close()
        assert status_of(lambda: open_(bob, "alice\\notes.txt", READ)) \
            == NtStatus.STATUS_ACCESS_DENIED
    finally:
        alice.session.connection.disconnect()
        bob.session.connection.disconnect()


def sid(text: str) -> SIDPacket:
    packet = SIDPacket()
    packet.from_string(text)
    return packet


def grant_alice_deny_bob(server) -> bytes:
    """Denies bob by his Unix SID, grants alice by her own SID: the
    machine SID the server keeps in its state directory, and her RID."""
    machine = (server.share_path.parent / "state" / "machine-sid").read_text().strip()
    deny = AccessDeniedAce()
    deny["mask"] = READ
    deny["sid"] = sid(f"S-1-22-1-{uid('bob')}")
    allow = AccessAllowedAce()
    allow["mask"] = 0x001F01FF
    allow["sid"] = sid(f"{machine}-{uid('alice') * 2 + 1000}")
    acl = AclPacket()
    acl["aces"] = [deny, allow]
    sd = SMB2CreateSDBuffer()
    sd["control"].set_flag(SDControl.SELF_RELATIVE)
    sd.set_dacl(acl)
    return sd.pack()


def test_force_user_makes_everyone_that_account(family):
    alice = connect(family, ALICE, "forced")
    try:
        write_file(alice, "sticky\\forced.txt", b"as nobody")
    finally:
        alice.session.connection.disconnect()
    assert (family.share_path / "sticky" / "forced.txt").stat().st_uid == uid("nobody")


def test_valid_users_refuse_bob_at_tree_connect(family):
    alice = connect(family, ALICE, "alices")
    alice.session.connection.disconnect()
    assert status_of(lambda: connect(family, BOB, "alices")) == NtStatus.STATUS_ACCESS_DENIED


def names_in(tree, folder: str) -> set[str]:
    d = Open(tree, folder)
    d.create(ImpersonationLevel.Impersonation, READ, FileAttributes.FILE_ATTRIBUTE_DIRECTORY,
             ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE,
             CreateDisposition.FILE_OPEN, CreateOptions.FILE_DIRECTORY_FILE)
    try:
        entries = d.query_directory("*", FileInformationClass.FILE_NAMES_INFORMATION)
        return {e["file_name"].get_value().decode("utf-16-le") for e in entries} - {".", ".."}
    finally:
        d.close()


def test_access_based_enumeration_hides_what_bob_may_not_read(family):
    alice = connect(family, ALICE)
    try:
        write_file(alice, "alice\\open.txt", b"anyone")
        write_file(alice, "alice\\closed.txt", b"alice only")
        (family.share_path / "alice" / "closed.txt").chmod(0o600)
    finally:
        alice.session.connection.disconnect()
    for share, bob_sees in ((family.share, {"open.txt", "closed.txt"}), ("abe", {"open.txt"})):
        alice, bob = connect(family, ALICE, share), connect(family, BOB, share)
        try:
            assert names_in(alice, "alice") == {"open.txt", "closed.txt"}, share
            assert names_in(bob, "alice") == bob_sees, share
        finally:
            alice.session.connection.disconnect()
            bob.session.connection.disconnect()


def anonymous(server, client_conf, commands: str, cwd, share="guests"):
    """smbclient without a user: a guest session (it cannot sign)."""
    return run(["smbclient", f"//{server.host}/{share}", "-s", str(client_conf),
                "-p", str(server.port), "-N", "--option=client signing=off",
                "--option=client ipc signing=off", "-c", commands], timeout=60, cwd=cwd)


def test_an_unknown_user_name_logs_on_as_a_guest(family, client_conf):
    def as_user(user: str):
        return run(["smbclient", f"//{family.host}/guests", "-s", str(client_conf),
                    "-p", str(family.port), "-U", user, "--option=client signing=off",
                    "--option=client ipc signing=off", "-c", "ls public\\readme.txt"],
                   timeout=60)
    r = as_user("nosuchuser%whatever")
    assert r.returncode == 0 and "readme.txt" in r.output, r.describe()
    # A known user's wrong password stays a failure, never a guest.
    r = as_user("alice%wrong")
    assert "NT_STATUS_LOGON_FAILURE" in r.output, r.describe()


def test_guests_act_as_nobody(family, client_conf, temp_dir):
    share = family.share_path
    # Only where guest_ok says so.
    r = anonymous(family, client_conf, "ls", temp_dir, share=family.share)
    assert "NT_STATUS_ACCESS_DENIED" in r.output, r.describe()
    r = anonymous(family, client_conf, "get public\\readme.txt readme.txt", temp_dir)
    assert (temp_dir / "readme.txt").read_bytes() == b"for everyone", r.describe()
    (temp_dir / "up.txt").write_bytes(b"guest was here")
    r = anonymous(family, client_conf, "put up.txt public\\up.txt", temp_dir)
    assert "NT_STATUS_ACCESS_DENIED" in r.output, r.describe()
    assert not (share / "public" / "up.txt").exists()
    # Where nobody may write, a guest may, as nobody.
    r = anonymous(family, client_conf, "put up.txt sticky\\up.txt", temp_dir)
    st = (share / "sticky" / "up.txt").stat()
    assert st.st_uid == uid("nobody"), r.describe()


# CAP_CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, SETGID, SETUID and
# NET_BIND_SERVICE: what README says the server keeps.
KEPT_CAPABILITIES = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 6) | (1 << 7) | (1 << 10)


def test_the_server_keeps_only_the_capabilities_it_needs(running_server):
    pid = running_server.proc.pid
    for task in os.listdir(f"/proc/{pid}/task"):
        status = open(f"/proc/{pid}/task/{task}/status").read()
        caps = dict(line.split(":\t") for line in status.splitlines()
                    if line.startswith("Cap"))
        for kind in ("CapEff", "CapPrm", "CapBnd"):
            assert int(caps[kind], 16) == KEPT_CAPABILITIES, (task, kind, caps)
        assert int(caps["CapInh"], 16) == 0 and int(caps["CapAmb"], 16) == 0, (task, caps)
