"""hosts_allow and hosts_deny: for the whole server, a refused client is
dropped as soon as it connects; for a share, it gets ACCESS_DENIED at tree
connect while other shares serve it; a reload applies new lists to new
connections and tree connects.

All of 127.0.0.0/8 is loopback on Linux, so a client can come from
127.0.0.2 while another comes from 127.0.0.1.
"""

from __future__ import annotations

import json
import shutil
import signal

import pytest

from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir
from hostile import NEGOTIATE, RawSmb, SmbError, connect_from, frame, header, negotiate_body, \
    wait_until
from support import run, smbclient, smbclient_argv

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own settings")


def start(security: str = "", share: str = "", other: str = ""):
    """A server whose share `share` carries `share` keys, beside a share
    `other` (with `other` keys), and whose [security] carries `security`."""
    base = make_temp_dir("hosts")
    (base / "other").mkdir()
    (base / "other").chmod(0o755)
    config = (f"\n[security]\n{security}\n"
              f"[[share]]\nname = \"share\"\npath = {json.dumps(str(base / 'share'))}\n{share}\n"
              f"[[share]]\nname = \"other\"\npath = {json.dumps(str(base / 'other'))}\n{other}\n")
    try:
        return base, _start_copyless(base, share_flag=False, extra_config=config)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


def stop(base, running):
    try:
        _stop_copyless(running)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def reload(running, base, old: str, new: str, says: str) -> None:
    """Replaces `old` by `new` in the config file, sends SIGHUP and waits
    until the server says `says`."""
    config = base / "copyless.toml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))
    running.proc.send_signal(signal.SIGHUP)
    stderr = running.log_paths[1]
    assert wait_until(lambda: says in stderr.read_text(errors="replace"), 20), running.logs()


def dropped_at_once(server, source: str = "127.0.0.1") -> bool:
    """Whether a connection from `source` is closed with no answer to its
    NEGOTIATE."""
    sock = connect_from(source, server.host, server.port, 10)
    try:
        try:
            sock.sendall(frame(header(NEGOTIATE, 0) + negotiate_body()))
            return sock.recv(4) == b""
        except ConnectionError:
            return True
    finally:
        sock.close()


def logs_on(server, source: str, share: str) -> bool:
    """Whether a client at `source` logs on and connects to `share`."""
    client = RawSmb(server.host, server.port, source=source)
    try:
        client.negotiate()
        client.session_setup(server.user, server.password)
        try:
            client.tree_connect(share)
        except SmbError as e:
            assert "ACCESS_DENIED" in str(e), e
            return False
        return True
    finally:
        client.close()


def test_hosts_deny_drops_a_client_at_once_and_others_are_served(client_conf):
    base, running = start(security='hosts_deny = ["127.0.0.1"]')
    server = running.info
    try:
        assert dropped_at_once(server)
        result = smbclient(server, client_conf, "ls")
        assert result.returncode != 0 and "NT_STATUS_OK" not in result.output, result.describe()
        assert logs_on(server, "127.0.0.2", "share")
        stderr = running.log_paths[1]
        assert wait_until(lambda: "refused a connection from 127.0.0.1:" in
                          stderr.read_text(errors="replace"), 20), running.logs()
        # The refused never got as far as a logon.
        assert "logon failed" not in stderr.read_text(errors="replace")

        # A reload lets it in, from the next connection on.
        reload(running, base, 'hosts_deny = ["127.0.0.1"]', "",
               "[security] hosts_allow and hosts_deny changed")
        assert not dropped_at_once(server)
        assert logs_on(server, "127.0.0.1", "share")
    finally:
        stop(base, running)


def test_hosts_allow_of_another_network_refuses_the_client():
    base, running = start(security='hosts_allow = ["10.0.0.0/8", "fd00::/8"]')
    try:
        assert dropped_at_once(running.info)
        assert dropped_at_once(running.info, "127.0.0.2")
    finally:
        stop(base, running)


def test_a_share_refuses_by_address_at_tree_connect(client_conf):
    base, running = start(share='hosts_deny = ["127.0.0.1"]',
                          other='hosts_allow = ["127.0.0.1", "192.0.2.0/24"]')
    server = running.info
    try:
        denied = smbclient(server, client_conf, "ls")
        assert "NT_STATUS_ACCESS_DENIED" in denied.output, denied.describe()
        # The refused client still lists the shares, and uses the other.
        listed = run(smbclient_argv(server, client_conf))
        assert "share" in listed.output and "other" in listed.output, listed.describe()
        other = smbclient(server, client_conf, "ls", share="other")
        assert other.returncode == 0, other.describe()
        assert (logs_on(server, "127.0.0.1", "share"),
                logs_on(server, "127.0.0.1", "other")) == (False, True)
        # 127.0.0.2 is not on the other share's hosts_allow.
        assert (logs_on(server, "127.0.0.2", "share"),
                logs_on(server, "127.0.0.2", "other")) == (True, False)

        # A reload that changes the share's list holds for tree connects
        # made from then on.
        reload(running, base, 'hosts_deny = ["127.0.0.1"]', 'hosts_deny = ["127.0.0.2"]',
               "share share changed")
        assert (logs_on(server, "127.0.0.1", "share"),
                logs_on(server, "127.0.0.2", "share")) == (True, False)
        ok = smbclient(server, client_conf, "ls")
        assert ok.returncode == 0, ok.describe()
    finally:
        stop(base, running)
