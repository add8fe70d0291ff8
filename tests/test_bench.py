"""`copyless bench` against the server under test: each workload with tiny
parameters, checking the counts it reports and the files it leaves on the
share. Behaviour only: no figure is judged."""

from __future__ import annotations

import json
import subprocess

from conftest import copyless_binary


def bench(server, workload: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    argv = [
        str(copyless_binary()), "bench", workload,
        "--address", f"{server.host}:{server.port}",
        "--share", server.share,
        "-U", server.user,
        "--password", server.password,
        *args,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def bench_json(server, workload: str, *args: str) -> dict:
    proc = bench(server, workload, "--json", *args)
    assert proc.returncode == 0, f"status {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"--json prints one line, got:\n{proc.stdout}"
    return json.loads(lines[0])


def test_io_counts_and_files(server):
    r = bench_json(server, "io", "--size", "4k", "--depth", "4", "--connections", "2",
                   "--read-pct", "50", "--file-size", "1m", "--time", "0.5", "--ramp", "0.1",
                   "--dir", "benchio")
    assert r["workload"] == "io"
    assert r["signing"] is True
    assert r["params"]["depth"] == 4 and r["params"]["connections"] == 2
    assert r["ios"] > 0
    assert r["ios"] == r["reads"] + r["writes"]
    assert r["bytes"] == r["ios"] * 4096
    assert r["latency_us"]["all"]["count"] == r["ios"]
    # Setup and the I/O itself are all SMB2 messages.
    assert r["requests"] > r["ios"]
    for i in range(2):
        path = server.share_path / "benchio" / f"io-{i}.dat"
        assert path.is_file(), f"{path} missing"
        assert path.stat().st_size == 1 << 20


def test_io_large_sequential_writes(server):
    r = bench_json(server, "io", "--size", "1m", "--depth", "2", "--read-pct", "0",
                   "--pattern", "sequential", "--file-size", "4m", "--time", "0.3",
                   "--ramp", "0", "--dir", "seq", "--signing", "off")
    assert r["reads"] == 0
    assert r["bytes"] == r["writes"] << 20
    assert (server.share_path / "seq" / "io-0.dat").stat().st_size == 4 << 20


def test_smallfiles_copies_every_file(server):
    r = bench_json(server, "smallfiles", "--files", "30", "--file-size", "3000",
                   "--dirs", "4", "--dir", "small")
    assert r["files"] == 30
    assert r["bytes"] == 30 * 3000
    assert r["latency_us"]["file"]["count"] == 30
    # CREATE, QUERY_INFO, SET_INFO, WRITE, SET_INFO, CLOSE per file.
    assert r["requests"] >= 30 * 6
    found = sorted(p.relative_to(server.share_path / "small").as_posix()
                   for p in (server.share_path / "small").rglob("f*"))
    assert found == sorted(f"d{i % 4}/f{i}" for i in range(30))
    for i in range(30):
        assert (server.share_path / "small" / f"d{i % 4}" / f"f{i}").stat().st_size == 3000


def test_smallfiles_compound_on_two_connections(server):
    r = bench_json(server, "smallfiles", "--files", "21", "--file-size", "10k",
                   "--dirs", "3", "--connections", "2", "--compound", "--dir", "comp")
    assert r["files"] == 21
    assert r["params"]["compound"] is True
    files = list((server.share_path / "comp").rglob("f*"))
    assert len(files) == 21
    assert all(p.stat().st_size == 10240 for p in files)


def test_meta_loops_and_listing(server):
    r = bench_json(server, "meta", "--loops", "10", "--list-entries", "120", "--dir", "meta")
    assert r["loops"] == 10
    assert r["ops"] == 50
    for op in ("create", "stat", "close", "rename", "delete"):
        assert r["latency_us"][op]["count"] == 10, op
    assert r["list_entries"] == 120
    listed = server.share_path / "meta" / "list-120"
    assert sorted(p.name for p in listed.iterdir()) == sorted(f"e{i}" for i in range(120))
    # Every file of the loops was renamed and deleted again.
    assert [p.name for p in (server.share_path / "meta").iterdir()] == ["list-120"]
    # A second run reuses the listing directory as it is.
    again = bench_json(server, "meta", "--loops", "1", "--list-entries", "120", "--dir", "meta")
    assert again["list_entries"] == 120


def test_table_output_and_errors(server):
    proc = bench(server, "smallfiles", "--files", "2", "--dir", "t")
    assert proc.returncode == 0, proc.stderr
    assert "files_per_s" in proc.stdout and "latency" in proc.stdout
    # Not a terminal: no progress line escapes.
    assert "\r" not in proc.stdout

    bad_size = bench(server, "io", "--size", "100")
    assert bad_size.returncode == 2, bad_size.stderr
    assert "--size" in bad_size.stderr

    wrong = subprocess.run(
        [str(copyless_binary()), "bench", "meta", "--address", f"{server.host}:{server.port}",
         "--share", server.share, "-U", server.user, "--password", "wrong-password",
         "--loops", "1", "--list-entries", "0"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert wrong.returncode == 1
    assert "LOGON_FAILURE" in wrong.stderr


def test_help_names_the_workloads():
    proc = subprocess.run([str(copyless_binary()), "bench", "--help"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0
    for workload in ("io", "smallfiles", "meta"):
        assert workload in proc.stdout
