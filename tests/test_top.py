"""`copyless top` and the Prometheus endpoint against a known request mix.

One connection sends exactly 10 CREATEs, 100 WRITEs, 50 READs and 10
CLOSEs through smbprotocol's low-level API, which sends nothing it is not
asked for after NEGOTIATE, two SESSION_SETUP legs and TREE_CONNECT (with
SMB 3.1.1 there is no validate-negotiate IOCTL). The server's own view
must count exactly that.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from smbprotocol.connection import Connection, Dialects
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import SERVER_KIND, copyless_binary
from support import create_file

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="copyless top is copyless's own interface"
)

FILES = 10
WRITES_PER_FILE = 10
READS_PER_FILE = 5
CHUNK = 4096

EXPECTED = {
    "NEGOTIATE": 1,
    "SESSION_SETUP": 2,
    "TREE_CONNECT": 1,
    "CREATE": FILES,
    "WRITE": FILES * WRITES_PER_FILE,
    "READ": FILES * READS_PER_FILE,
    "CLOSE": FILES,
}

PHASES = ["waiting", "receiving", "parsing", "queued", "running", "disk_io", "sending"]


def top(server, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    argv = [str(copyless_binary()), "top", "--control", str(server.control), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(argv)} exited with {result.returncode}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def top_json(server, *args: str) -> dict:
    return json.loads(top(server, "--once", "--json", *args).stdout)


@pytest.fixture
def known_mix(server):
    """Runs the mix and keeps the connection open while the test reads."""
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(Dialects.SMB_3_1_1, timeout=30)
    try:
        session = Session(connection, server.user, server.password,
                          require_encryption=False, auth_protocol="ntlm")
        session.connect()
        tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
        tree.connect()
        payload = os.urandom(CHUNK)
        for i in range(FILES):
            f = create_file(tree, f"top-{i}.bin")
            for w in range(WRITES_PER_FILE):
                f.write(payload, w * CHUNK)
            for r in range(READS_PER_FILE):
                assert f.read(r * CHUNK, CHUNK) == payload
            f.close()
        yield server
    finally:
        connection.disconnect()


def test_top_counts_exactly_the_requests_sent(known_mix):
    server = known_mix
    report = top_json(server)

    counts = {c["command"]: c["count"] for c in report["commands"]}
    assert counts == EXPECTED, f"per-command counts differ:\n{json.dumps(report['commands'], indent=1)}"
    assert report["requests"] == sum(EXPECTED.values())
    for c in report["commands"]:
        assert c["errors"] == 0, c
        assert 0 < c["min_ns"] <= c["p50_ns"] <= c["p99_ns"], c
        # Percentiles come from a histogram with two significant digits.
        assert c["p99_ns"] <= c["max_ns"] * 1.01, c
        assert c["min_ns"] <= c["avg_ns"] <= c["max_ns"], c
        assert c["total_ns"] >= c["avg_ns"] * c["count"], c

    phases = {p["phase"]: p for p in report["phases"]}
    assert list(phases) == PHASES
    for name in ("waiting", "receiving", "parsing", "running", "disk_io", "sending"):
        assert phases[name]["ns"] > 0, f"phase {name} has no time: {phases}"
    total = sum(p["share_percent"] for p in report["phases"])
    assert abs(total - 100.0) < 0.01, f"phase shares add up to {total}"
    for p in report["phases"]:
        if p["share_percent"] < 100:
            # The what-if throughput never falls below the measured one.
            assert p["what_if_bytes_per_s"] >= report["bytes_per_s"], p

    disk = {d["op"]: d for d in report["disk"]}
    assert disk["write"]["count"] == EXPECTED["WRITE"]
    assert disk["write"]["bytes"] == EXPECTED["WRITE"] * CHUNK
    assert disk["read"]["count"] == EXPECTED["READ"]
    assert disk["read"]["bytes"] == EXPECTED["READ"] * CHUNK
    assert report["bytes_in"] > EXPECTED["WRITE"] * CHUNK
    assert report["bytes_out"] > EXPECTED["READ"] * CHUNK
    assert report["syscalls"]["send"] >= report["frames"]
    assert report["syscalls"]["recv"] >= report["frames"]
    assert report["syscalls_per_request"] > 0

    shares = {s["name"]: s for s in report["shares"]}
    per_share = sum(EXPECTED[c] for c in ("TREE_CONNECT", "CREATE", "WRITE", "READ", "CLOSE"))
    assert shares[server.share]["requests"] == per_share
    assert shares[server.share]["disk_write_bytes"] == EXPECTED["WRITE"] * CHUNK

    assert len(report["clients"]) == 1, report["clients"]
    client = report["clients"][0]
    assert client["address"] == "127.0.0.1"
    assert client["user"] == server.user
    assert client["connections"] == 1
    assert client["requests"] == report["requests"]
    assert report["live_connections"] == 1


def test_top_text_histogram_and_window(known_mix):
    server = known_mix
    text = top(server, "--once").stdout
    assert "PHASE" in text and "COMMAND" in text and "CLIENT" in text, text
    write_line = next(line for line in text.splitlines() if line.startswith("WRITE "))
    assert write_line.split()[1] == str(EXPECTED["WRITE"]), write_line
    assert server.user in text

    histogram = top(server, "--histogram", "write").stdout
    lines = histogram.splitlines()
    assert lines[0] == f"WRITE: {EXPECTED['WRITE']} samples, value in microseconds", histogram
    assert lines[1].startswith("value |---"), histogram
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines[2:]) == EXPECTED["WRITE"]
    assert "@" in histogram

    # Nothing happens on the idle connection during the window.
    idle = top_json(server, "--window", "1")
    assert idle["since_start"] is False
    assert idle["requests"] == 0
    assert idle["commands"] == []
    assert 0.9 < idle["window_s"] < 5


def test_control_socket_is_private(server):
    mode = os.stat(server.control).st_mode & 0o777
    assert mode == 0o600, oct(mode)


def test_top_without_a_server_fails_cleanly(server, temp_dir):
    argv = [str(copyless_binary()), "top", "--once", "--control", str(temp_dir / "none.sock")]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result
    assert "cannot read statistics" in result.stderr, result.stderr


def test_prometheus_endpoint_parses(known_mix):
    server = known_mix
    assert server.metrics_url, "the server did not announce its metrics endpoint"
    with urllib.request.urlopen(server.metrics_url, timeout=30) as response:
        assert response.status == 200
        text = response.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}

    def sample(family: str, name: str, **labels) -> float:
        for s in families[family].samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        raise AssertionError(f"no sample {name}{labels} in\n{text}")

    assert families["copyless_requests"].type == "counter"
    for command, count in EXPECTED.items():
        assert sample("copyless_requests", "copyless_requests_total", command=command) == count
    assert families["copyless_request_duration_seconds"].type == "histogram"
    assert sample("copyless_request_duration_seconds",
                  "copyless_request_duration_seconds_count", command="WRITE") == EXPECTED["WRITE"]
    assert sample("copyless_request_duration_seconds",
                  "copyless_request_duration_seconds_bucket", command="WRITE", le="+Inf") \
        == EXPECTED["WRITE"]
    assert sample("copyless_phase_seconds", "copyless_phase_seconds_total", phase="running") > 0
    assert sample("copyless_client_requests", "copyless_client_requests_total",
                  address="127.0.0.1") == sum(EXPECTED.values())
    # User names are labels only with `[metrics] user_labels = true`.
    labelled = [s for f in families.values() for s in f.samples if "user" in s.labels]
    assert not labelled, f"series labelled with a user: {labelled}"
    assert server.user not in text
    assert sample("copyless_open_connections", "copyless_open_connections") == 1
    # What the NAS holds now: the session of that connection, and the
    # room on the share's filesystem.
    assert sample("copyless_sessions", "copyless_sessions") == 1
    assert sample("copyless_open_files", "copyless_open_files") == 0  # all closed
    size = sample("copyless_share_size_bytes", "copyless_share_size_bytes", share=server.share)
    free = sample("copyless_share_free_bytes", "copyless_share_free_bytes", share=server.share)
    available = sample("copyless_share_available_bytes", "copyless_share_available_bytes",
                       share=server.share)
    assert size > 0 and size >= free >= available >= 0, (size, free, available)

    # Prometheus itself asks for OpenMetrics, and gets it.
    request = urllib.request.Request(
        server.metrics_url,
        headers={"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        text = response.read().decode()
    families = {f.name: f for f in openmetrics_families(text)}
    assert sample("copyless_requests", "copyless_requests_total", command="READ") \
        == EXPECTED["READ"]
