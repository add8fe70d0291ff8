"""Logons on record: every session setup that ends leaves one line in the
server's log (user, domain, client address and port, mechanism, status),
rate-limited per client address; each is counted in Prometheus by
outcome; and the fail2ban filter in dist/ matches the failure lines the
real server wrote, and not the success lines.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from smbprotocol.connection import Connection
from smbprotocol.exceptions import SMBException
from smbprotocol.session import Session

from conftest import (REPO_ROOT, SERVER_KIND, TEST_USER, _start_copyless, _stop_copyless,
                      make_temp_dir)
from hostile import SESSION_SETUP, RawSmb, SmbError, session_setup_body, wait_until
from support import run, smbclient

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own log")

FILTER = REPO_ROOT / "dist" / "fail2ban" / "filter.d" / "copyless.conf"
STATUS_INVALID_PARAMETER = 0xC000000D
# Lines a minute the server logs about one client address.
PER_ADDRESS = 10

LOGON_RE = re.compile(
    r'^copyless: logon (?P<result>ok|failed) user="(?P<user>(?:[^"\\]|\\.)*)" '
    r'domain="(?P<domain>(?:[^"\\]|\\.)*)" client=(?P<ip>[\d.]+):(?P<port>\d+) '
    r"mech=(?P<mech>\S+) kind=(?P<kind>\S+) status=(?P<status>\S+) code=(?P<code>0x[0-9a-f]{8})$",
    re.MULTILINE,
)
HELD_RE = re.compile(r"^copyless: (\d+) more logons from (\S+) not logged", re.MULTILINE)


def logons(text: str) -> list[dict]:
    return [m.groupdict() for m in LOGON_RE.finditer(text)]


def stderr_of(running) -> Path:
    return running.log_paths[1]


def wait_for_logons(running, count: int) -> list[dict]:
    """The logon lines once there are `count` of them (they are written by a
    thread of their own, a moment after the reply)."""
    path = stderr_of(running)
    wait_until(lambda: len(logons(path.read_text(errors="replace"))) >= count, 20)
    return logons(path.read_text(errors="replace"))


def logon_counts(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        if family.name == "copyless_logons":
            return {s.labels["outcome"]: s.value for s in family.samples
                    if s.name == "copyless_logons_total"}
    raise AssertionError(f"no copyless_logons_total in\n{text}")


def smbprotocol_logon(server, user: str, password: str) -> tuple[bool, int]:
    """Logs on with smbprotocol: whether it worked, and the client port."""
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(timeout=10)
    try:
        port = connection.transport._sock.getsockname()[1]
        session = Session(connection, user, password, require_encryption=False,
                          auth_protocol="ntlm")
        try:
            session.connect()
        except SMBException:
            return False, port
        session.disconnect()
        return True, port
    finally:
        connection.disconnect()


class Scenario:
    """One server that saw each kind of logon, its log and its counters."""

    def __init__(self, running, client_conf):
        server = running.info
        self.before = logon_counts(server.metrics_url)
        bad = smbclient(server, client_conf, "ls", password="not-the-password")
        assert "NT_STATUS_LOGON_FAILURE" in bad.output, bad.describe()
        ok, self.mallory_port = smbprotocol_logon(server, "mallory", "guess")
        assert not ok
        good = smbclient(server, client_conf, "ls")
        assert good.returncode == 0, good.describe()
        anonymous = run(["smbclient", "-L", f"//{server.host}", "-s", str(client_conf),
                         "-p", str(server.port), "-N", "-U%"])
        assert "NT_STATUS_LOGON_FAILURE" not in anonymous.output, anonymous.describe()
        # A token that is no mechanism at all.
        raw = RawSmb(server.host, server.port)
        try:
            raw.negotiate()
            assert raw.call(SESSION_SETUP, session_setup_body(b"garbage")).status \
                == STATUS_INVALID_PARAMETER
        finally:
            raw.close()
        self.lines = wait_for_logons(running, 5)
        self.after = logon_counts(server.metrics_url)
        self.text = stderr_of(running).read_text(errors="replace")


@pytest.fixture(scope="module")
def scenario(client_conf):
    base = make_temp_dir("logons")
    running = _start_copyless(base, extra_config="\n[security]\nguest = true\n")
    try:
        yield Scenario(running, client_conf)
    finally:
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)


def test_a_wrong_password_is_logged_with_the_user_and_the_client(scenario):
    failed = [l for l in scenario.lines if l["result"] == "failed"]
    smbclient_line = next(l for l in failed if l["user"] == TEST_USER)
    assert smbclient_line["ip"] == "127.0.0.1"
    assert (smbclient_line["mech"], smbclient_line["kind"], smbclient_line["status"],
            smbclient_line["code"]) == ("ntlm", "new", "STATUS_LOGON_FAILURE", "0xc000006d")
    # smbprotocol's line names the very port it connected from.
    mallory = [l for l in failed if l["user"] == "mallory"]
    assert [(l["ip"], int(l["port"]), l["status"]) for l in mallory] == [
        ("127.0.0.1", scenario.mallory_port, "STATUS_LOGON_FAILURE")], scenario.text


def test_a_good_password_and_an_anonymous_logon_are_logged_too(scenario):
    ok = [(l["user"], l["mech"], l["status"]) for l in scenario.lines if l["result"] == "ok"]
    assert (TEST_USER, "ntlm", "STATUS_SUCCESS") in ok, scenario.text
    assert ("", "anonymous", "STATUS_SUCCESS") in ok, scenario.text
    unknown = [l for l in scenario.lines if l["mech"] == "unknown"]
    assert [(l["result"], l["status"]) for l in unknown] == [
        ("failed", "STATUS_INVALID_PARAMETER")], scenario.text


def test_prometheus_counts_each_outcome(scenario):
    outcomes = {"success", "guest", "anonymous", "bad_credentials", "failed"}
    # Every outcome is there from the start.
    assert scenario.before == {o: 0.0 for o in outcomes}
    moved = {o: scenario.after[o] - scenario.before[o] for o in outcomes}
    lines = scenario.lines
    assert moved == {
        "success": sum(l["result"] == "ok" and l["mech"] == "ntlm" for l in lines),
        "guest": 0,
        "anonymous": sum(l["result"] == "ok" and l["mech"] == "anonymous" for l in lines),
        "bad_credentials": sum(l["status"] == "STATUS_LOGON_FAILURE" for l in lines),
        "failed": sum(l["result"] == "failed" and l["status"] != "STATUS_LOGON_FAILURE"
                      for l in lines),
    }, scenario.text
    assert moved["bad_credentials"] >= 2 and moved["success"] >= 1
    assert moved["anonymous"] >= 1 and moved["failed"] >= 1


def fail2ban_regex(log: Path, *extra: str) -> subprocess.CompletedProcess:
    tool = shutil.which("fail2ban-regex")
    assert tool, "fail2ban-regex is missing: ./test.sh installs the Debian package fail2ban"
    # The filter includes common.conf from its own directory, as it will
    # in /etc/fail2ban/filter.d.
    filters = log.parent / "filter.d"
    filters.mkdir(exist_ok=True)
    shutil.copy(FILTER, filters / "copyless.conf")
    shutil.copy("/etc/fail2ban/filter.d/common.conf", filters / "common.conf")
    return subprocess.run([tool, "-o", "ip", *extra, str(log), str(filters / "copyless.conf")],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("form", ["stderr", "syslog"])
def test_the_fail2ban_filter_matches_the_failures_the_server_wrote(scenario, temp_dir, form):
    written = [line for line in scenario.text.splitlines() if LOGON_RE.match(line)]
    failures = [line for line in written if " logon failed " in line]
    successes = [line for line in written if " logon ok " in line]
    assert failures and successes
    if form == "stderr":
        # As the server wrote them (a file of its standard error): no dates.
        shown, extra = written, ["--datepattern", "{NONE}"]
    else:
        # As fail2ban's journal backend shows them: "HOST copyless[PID]: ".
        stamp = subprocess.run(["date", "+%b %e %H:%M:%S"], capture_output=True,
                               text=True).stdout.strip()
        shown, extra = [f"{stamp} nas copyless[4242]: {line}" for line in written], []
    log = temp_dir / "copyless.log"
    log.write_text("\n".join(shown) + "\n")
    result = fail2ban_regex(log, *extra)
    assert result.returncode == 0, result.stderr
    # One address per matched line: every failure, no success.
    assert result.stdout.split() == ["127.0.0.1"] * len(failures), (result.stdout, written)

    only_successes = temp_dir / "ok.log"
    only_successes.write_text("\n".join(l for l, w in zip(shown, written) if w in successes)
                              + "\n")
    result = fail2ban_regex(only_successes, *extra)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [], result.stdout


def test_a_flood_of_wrong_passwords_is_rate_limited(temp_dir):
    running = _start_copyless(temp_dir)
    server = running.info
    tries = 3 * PER_ADDRESS
    try:
        for i in range(tries):
            raw = RawSmb(server.host, server.port)
            try:
                raw.negotiate()
                with pytest.raises(SmbError, match="LOGON_FAILURE"):
                    raw.session_setup("flooder", f"guess-{i}")
            finally:
                raw.close()
        # Another address is not held back by this one's flood.
        other = RawSmb(server.host, server.port, source="127.0.0.2")
        try:
            other.negotiate()
            with pytest.raises(SmbError, match="LOGON_FAILURE"):
                other.session_setup("neighbour", "guess")
        finally:
            other.close()
        assert wait_until(lambda: any(l["user"] == "neighbour" for l in logons(
            stderr_of(running).read_text(errors="replace"))), 20), running.logs()
    finally:
        # Stopping says what was held back, without waiting for the minute.
        _stop_copyless(running)
    text = stderr_of(running).read_text(errors="replace")
    flooder = [l for l in logons(text) if l["user"] == "flooder"]
    held = sum(int(n) for n, address in HELD_RE.findall(text) if address == "127.0.0.1")
    # Each minute logs at most PER_ADDRESS of them; the rest are counted.
    assert len(flooder) < tries and held > 0, text
    assert len(flooder) + held == tries, text
    assert all(l["ip"] == "127.0.0.1" for l in flooder)
