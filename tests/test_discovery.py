"""Discovery: the server announces itself over mDNS/DNS-SD (`_smb._tcp` and
`_device-info._tcp`, what Finder and avahi-browse list) and answers
WS-Discovery (what Windows Explorer's Network folder uses), checked with
real clients: the `zeroconf` package's DNS-SD resolver, and a WS-Discovery
client written with the socket module (tests/discovery_client.py).

Multicast needs a real interface, so the server runs in a network
namespace of its own, joined to the client's namespace by a veth pair:
nothing leaks onto the machine's network, and nothing on the machine (an
avahi-daemon, wsdd, another test's server) answers in its place. That takes
root, which CI has; iproute2 makes the namespaces.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import (SERVER_KIND, STARTUP_TIMEOUT, STOP_TIMEOUT, TEST_PASSWORD, TEST_USER,
                      copyless_binary, make_temp_dir, unix_user_args)

pytestmark = [
    pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own announcements"),
    pytest.mark.skipif(os.geteuid() != 0,
                       reason="network namespaces need root (CI runs the suite as root)"),
]

CLIENT_SCRIPT = Path(__file__).with_name("discovery_client.py")
SERVER_IP, CLIENT_IP = "10.213.7.1", "10.213.7.2"
SERVER_NAME = "DISCOTEST"
LISTENING_RE = re.compile(r"^copyless listening on (\S+):(\d+)$")
# Long enough for any answer on an idle veth link (they come in well
# under a second); only a failing test waits this long.
ANSWER_WITHIN = 10


def run(*argv, check=True, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(argv)}: status {result.returncode}\n{result.stdout}"
                    f"{result.stderr}", pytrace=False)
    return result


class Namespaces:
    """Two network namespaces, the server's and the client's, joined by a
    veth pair with an address on each end."""

    def __init__(self):
        tag = os.getpid()
        self.server, self.client = f"copyless-srv-{tag}", f"copyless-cli-{tag}"
        if shutil.which("ip") is None:
            pytest.fail("`ip` not found: install iproute2", pytrace=False)
        run("ip", "netns", "add", self.server)
        run("ip", "netns", "add", self.client)
        run("ip", "link", "add", "cl-srv0", "netns", self.server, "type", "veth",
            "peer", "name", "cl-cli0", "netns", self.client)
        for ns, dev, ip in ((self.server, "cl-srv0", SERVER_IP),
                            (self.client, "cl-cli0", CLIENT_IP)):
            run("ip", "-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            run("ip", "-n", ns, "link", "set", dev, "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def remove(self):
        for ns in (self.server, self.client):
            run("ip", "netns", "del", ns, check=False)

    def client_command(self, *args) -> list[str]:
        return ["ip", "netns", "exec", self.client, sys.executable, str(CLIENT_SCRIPT),
                *map(str, args)]

    def ask(self, *args) -> list:
        """Runs a client command to its end; returns what it printed."""
        result = run(*self.client_command(*args))
        return [json.loads(line) for line in result.stdout.splitlines()]

    def ports(self) -> set[int]:
        """The ports of the server namespace's listening sockets."""
        listing = run("ip", "netns", "exec", self.server, "ss", "-Hlntu").stdout
        # Netid State Recv-Q Send-Q Local-Address:Port Peer-Address:Port
        return {int(line.split()[4].rpartition(":")[2]) for line in listing.splitlines()}

    def eventually_ports(self, check) -> set[int]:
        """The ports, once `check` holds for them: the mDNS responder opens
        its sockets on a thread of its own, a moment after the start."""
        deadline = time.monotonic() + ANSWER_WITHIN
        while not check(ports := self.ports()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return ports


class Watcher:
    """A client command that keeps running (a listener); its lines are
    read as they come."""

    def __init__(self, netns: Namespaces, *args):
        self.proc = subprocess.Popen(netns.client_command(*args), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.next() == "ready", self.proc.stderr.read()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)

    def next(self):
        try:
            return self.lines.get(timeout=ANSWER_WITHIN + 5)
        except queue.Empty:
            pytest.fail("the client saw nothing", pytrace=False)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Server:
    """copyless serving in the server's namespace, listening on 0.0.0.0 (so
    announcing on every interface but the loopback, here the veth end)."""

    def __init__(self, netns: Namespaces, base: Path, extra_config: str = "",
                 listen: str = "0.0.0.0:0"):
        self.base = base
        state, share = base / "state", base / "share"
        share.mkdir(exist_ok=True)
        if not state.exists():
            run(str(copyless_binary()), "user", "add", TEST_USER, *unix_user_args(),
                "--password-stdin", "--state-dir", str(state), input=TEST_PASSWORD + "\n")
        config = base / "copyless.toml"
        config.write_text(f'server_name = "{SERVER_NAME}"\n'
                          f"control = {json.dumps(str(base / 'control.sock'))}\n" + extra_config)
        self.stderr_path = base / "copyless.stderr"
        argv = ["ip", "netns", "exec", netns.server, str(copyless_binary()), "serve",
                "--config", str(config), "--listen", listen, "--state-dir", str(state),
                "--share", f"share={share}"]
        if os.environ.get("COPYLESS_ENGINE"):
            argv += ["--engine", os.environ["COPYLESS_ENGINE"]]
        with open(self.stderr_path, "w") as stderr:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in self.proc.stdout],
                         daemon=True).start()
        try:
            line = lines.get(timeout=STARTUP_TIMEOUT)
        except queue.Empty:
            line = ""
        m = LISTENING_RE.match(line.strip())
        if not m:
            self.proc.kill()
            pytest.fail(f"no listening line: {line!r}\n{self.stderr()}", pytrace=False)
        self.port = int(m.group(2))
        # The engine says which it is after discovery has started, so
        # from then on the WS-Discovery sockets are open, or will never be.
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while "copyless: engine " not in self.stderr():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.proc.kill()
                pytest.fail(f"the engine did not start\n{self.stderr()}", pytrace=False)
            time.sleep(0.05)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("copyless did not stop on SIGTERM\n" + self.stderr(), pytrace=False)
        assert status == 0, f"exit status {status}\n{self.stderr()}"


@pytest.fixture(scope="module")
def netns():
    namespaces = Namespaces()
    try:
        yield namespaces
    finally:
        namespaces.remove()


@pytest.fixture
def base():
    path = make_temp_dir("discovery")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def server(netns, base):
    serving = Server(netns, base)
    yield serving
    serving.stop()


def test_dns_sd_finds_the_smb_service_and_its_port(netns, server, client_conf):
    found = netns.ask("mdns-browse", CLIENT_IP, "_smb._tcp.local.", ANSWER_WITHIN)
    assert [f["name"] for f in found] == [f"{SERVER_NAME}._smb._tcp.local."], found
    smb = found[0]
    assert smb["resolved"], smb
    assert smb["port"] == server.port
    assert smb["addresses"] == [SERVER_IP]
    assert smb["server"] == f"{SERVER_NAME.lower()}.local."

    # Finder's icon comes from the model of the same name's device info.
    found = netns.ask("mdns-browse", CLIENT_IP, "_device-info._tcp.local.", ANSWER_WITHIN)
    assert [f["name"] for f in found] == [f"{SERVER_NAME}._device-info._tcp.local."], found
    assert found[0]["properties"] == {"model": "RackMac"}

    # What was announced is where the server is: a real client lists its
    # shares there.
    listing = run("ip", "netns", "exec", netns.client, "smbclient", "-s", str(client_conf),
                  "-L", f"//{smb['addresses'][0]}", "-p", str(smb["port"]),
                  "-U", f"{TEST_USER}%{TEST_PASSWORD}", "-m", "SMB3", check=False)
    assert listing.returncode == 0 and "share" in listing.stdout, listing.stdout + listing.stderr


def test_ws_discovery_probe_resolve_and_metadata(netns, server):
    # Two seconds are enough for every copy of every answer to come: a
    # second ProbeMatch would mean the repeated Probe was answered twice.
    matches = netns.ask("wsd-probe", CLIENT_IP, 2)
    assert len(matches) == 1, matches
    match = matches[0]
    assert match["action"] == "http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches"
    assert match["from"] == f"{SERVER_IP}:3702"
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", match["endpoint"]), match
    assert match["types"] == ["wsdp:Device", "pub:Computer"]
    endpoint = match["endpoint"]
    xaddr = f"http://{SERVER_IP}:5357/{endpoint.removeprefix('urn:uuid:')}"
    assert match["xaddrs"] == [xaddr]

    # Windows resolves an endpoint it knows without the address.
    resolved = netns.ask("wsd-resolve", CLIENT_IP, endpoint, ANSWER_WITHIN, 1)
    assert [(r["endpoint"], r["xaddrs"]) for r in resolved] == [(endpoint, [xaddr])], resolved
    assert netns.ask("wsd-resolve", CLIENT_IP, "urn:uuid:00000000-0000-4000-8000-000000000000",
                     1) == []

    # The metadata exchange names the computer as Explorer lists it.
    [meta] = netns.ask("wsd-get", xaddr, endpoint)
    assert meta["status"] == 200
    assert meta["content_type"].startswith("application/soap+xml")
    assert meta["action"] == "http://schemas.xmlsoap.org/ws/2004/09/transfer/GetResponse"
    assert meta["relates_to"] == meta["message_id"]
    assert meta["computer"] == f"{SERVER_NAME}/Workgroup:WORKGROUP"
    assert meta["host_endpoint"] == endpoint
    assert meta["host_types"] == ["pub:Computer"]
    assert meta["friendly_name"] == SERVER_NAME


def test_hello_and_goodbyes(netns, base):
    """Hello when the server starts; Bye and mDNS goodbyes when it stops, so
    clients drop it at once; the same endpoint after a restart."""
    wsd = Watcher(netns, "wsd-listen", CLIENT_IP, 60)
    mdns = Watcher(netns, "mdns-watch", CLIENT_IP, "_smb._tcp.local.", 60)
    try:
        serving = Server(netns, base)
        try:
            hello = wsd.next()
            assert hello["action"] == "http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello"
            assert hello["xaddrs"][0].startswith(f"http://{SERVER_IP}:5357/")
            added = mdns.next()
            assert (added["event"], added["name"], added["port"]) == (
                "added", f"{SERVER_NAME}._smb._tcp.local.", serving.port)
        finally:
            serving.stop()
        bye = wsd.next()
        assert bye["action"] == "http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye"
        assert bye["endpoint"] == hello["endpoint"]
        assert mdns.next() == {"event": "removed", "name": f"{SERVER_NAME}._smb._tcp.local."}
    finally:
        wsd.close()
        mdns.close()

    serving = Server(netns, base)
    try:
        [match] = netns.ask("wsd-probe", CLIENT_IP, ANSWER_WITHIN, 1)
        assert match["endpoint"] == hello["endpoint"]
    finally:
        serving.stop()


MDNS, WSD, WSD_HTTP = 5353, 3702, 5357


def test_switched_off_or_nothing_to_announce(netns, base):
    assert not {MDNS, WSD, WSD_HTTP} & netns.ports()

    serving = Server(netns, base, "[discovery]\nmdns = false\nwsd = false\n")
    try:
        ports = netns.ports()
        assert serving.port in ports
        assert not {MDNS, WSD, WSD_HTTP} & ports, ports
    finally:
        serving.stop()

    # A server only on the loopback has nobody to announce itself to.
    serving = Server(netns, base, listen="127.0.0.1:0")
    try:
        assert not {MDNS, WSD, WSD_HTTP} & netns.ports()
        assert "loopback addresses only; nothing to announce" in serving.stderr()
    finally:
        serving.stop()

    # Each switch on its own.
    serving = Server(netns, base, "[discovery]\nwsd = false\n")
    try:
        ports = netns.eventually_ports(lambda p: MDNS in p)
        assert MDNS in ports and not {WSD, WSD_HTTP} & ports, ports
    finally:
        serving.stop()
    serving = Server(netns, base, "[discovery]\nmdns = false\n")
    try:
        ports = netns.ports()
        assert {WSD, WSD_HTTP} <= ports and MDNS not in ports, ports
    finally:
        serving.stop()
