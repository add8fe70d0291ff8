"""The live web dashboard on the metrics port, in headless Chromium.

The browser loads the page while a client writes files; the test reads the
numbers from the rendered page twice, a few seconds apart, checks that they
moved and that the page shows what `copyless top` shows, and keeps a
screenshot: in $COPYLESS_TEST_ARTIFACTS when set, else in
target/test-artifacts/ of the repository.

Chromium is driven over its DevTools protocol (`websocket-client`), so the
page's own scripts run as in any browser, polling the server every second.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from smbprotocol.connection import Connection, Dialects
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import REPO_ROOT, SERVER_KIND, copyless_binary, make_temp_dir
from support import create_file

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="the dashboard is copyless's own interface"
)

PHASES = ["waiting", "receiving", "parsing", "queued", "running", "disk_io", "sending"]
# How long the page gets to load, and then to show new numbers.
PAGE_DEADLINE = 30.0
MOVE_DEADLINE = 20.0


def artifact_path(name: str) -> Path:
    directory = os.environ.get("COPYLESS_TEST_ARTIFACTS")
    base = Path(directory) if directory else REPO_ROOT / "target" / "test-artifacts"
    base.mkdir(parents=True, exist_ok=True)
    return base / name


def dashboard_url(server) -> str:
    assert server.metrics_url, "the server did not announce its metrics endpoint"
    return server.metrics_url.removesuffix("metrics")


def fetch(url: str, method: str = "GET", headers: dict | None = None):
    """(status, headers, body) of one request; errors are answers too."""
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class Writer:
    """A client writing (and reading back) files until stopped, on a thread."""

    FILE_SIZE = 256 * 1024
    CHUNK = 64 * 1024
    MAX_SECONDS = 90.0

    def __init__(self, server):
        self.server = server
        self.stop = threading.Event()
        self.files = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=60)

    def _run(self) -> None:
        server = self.server
        connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
        try:
            connection.connect(Dialects.SMB_3_1_1, timeout=30)
            session = Session(connection, server.user, server.password,
                              require_encryption=False, auth_protocol="ntlm")
            session.connect()
            tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
            tree.connect()
            payload = os.urandom(self.CHUNK)
            deadline = time.monotonic() + self.MAX_SECONDS
            while not self.stop.is_set() and time.monotonic() < deadline:
                f = create_file(tree, f"dashboard-{self.files % 50}.bin")
                for offset in range(0, self.FILE_SIZE, self.CHUNK):
                    f.write(payload, offset)
                assert f.read(0, self.CHUNK) == payload
                f.close()
                self.files += 1
                # Leave the two cores some room for the browser.
                self.stop.wait(0.02)
        except BaseException as e:  # reported by the test, not lost on the thread
            self.error = e
        finally:
            try:
                connection.disconnect()
            except Exception:  # a connection that never came up
                pass


class DevTools:
    """Just enough of the Chrome DevTools protocol: calls, and the events
    that arrive meanwhile."""

    def __init__(self, ws_url: str):
        import websocket

        # Chromium refuses DevTools connections with an Origin it was not
        # told to allow; a script has no origin to send.
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.last_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.last_id += 1
        self.ws.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message["result"]
            self.events.append(message)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def browser():
    """Headless Chromium with one blank page, driven over DevTools."""
    # test.sh installs both: missing, the test fails rather than pass unrun.
    try:
        import websocket  # noqa: F401
    except ImportError:
        pytest.fail("needs websocket-client (pip); test.sh installs it", pytrace=False)
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.fail("needs Chromium (Debian package chromium); test.sh installs it", pytrace=False)
    profile = make_temp_dir("chromium")
    argv = [
        executable,
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
        "about:blank",
    ]
    if os.geteuid() == 0:
        # Chromium's sandbox refuses to run as root (as CI does).
        argv.insert(1, "--no-sandbox")
    log = profile / "chromium.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    tools = None
    try:
        # Chromium writes the port it chose into the profile.
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + PAGE_DEADLINE
        while not (active.exists() and active.read_text().count("\n") >= 1):
            assert proc.poll() is None, f"chromium exited: {log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, f"no DevTools port: {log.read_text(errors='replace')}"
            time.sleep(0.1)
        port = int(active.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        yield tools
    finally:
        if tools is not None:
            tools.close()
        # The browser and its helpers, all in the session we made for them.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        shutil.rmtree(profile, ignore_errors=True)


# What the page shows, read from the rendered DOM: the text a person sees
# and the raw value beside it (null while the page is still loading).
READ_PAGE = """(() => {
  // Still the blank page, or the parser is not done: some of the elements
  // read below may not exist yet.
  if (!document.getElementById("status") || document.readyState !== "complete") return null;
  const shown = (el) => el ? { text: el.textContent, value: Number(el.dataset.value) } : null;
  const tile = (id) => shown(document.getElementById(id));
  const rows = (table) => Array.from(document.querySelectorAll("#" + table + " tbody tr")).map((tr) => {
    const row = { key: tr.dataset.key };
    for (const td of tr.querySelectorAll("td")) row[td.dataset.field] = shown(td);
    return row;
  });
  return {
    status: document.getElementById("status").dataset.state,
    tracingOff: !document.getElementById("tracing-off").hidden,
    totalRequests: tile("total-requests"),
    totalBytesIn: tile("total-bytes-in"),
    writeRate: tile("write-rate"),
    requestRate: tile("request-rate"),
    updated: tile("updated"),
    phases: rows("phases"),
    whatIf: document.getElementById("what-if").textContent,
    commands: rows("commands"),
    shares: rows("shares"),
    clients: rows("clients"),
    charts: document.querySelectorAll(".chart .uplot canvas").length,
    points: Number(document.getElementById("throughput-chart").dataset.points || 0),
    violations: window.__violations || [],
  };
})()"""

# Runs before the page's own scripts: Content-Security-Policy refusals are
# events, not exceptions, so they are collected here.
WATCH_CSP = """window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(e.violatedDirective + " " + e.blockedURI));"""


def wait_for(read, done, deadline: float, what: str):
    """Reads the page until `done(page)` holds; the last read on failure."""
    page = read()
    end = time.monotonic() + deadline
    while not done(page):
        assert time.monotonic() < end, f"{what} within {deadline:.0f} s; the page:\n" \
            + json.dumps(page, indent=1)
        time.sleep(0.25)
        page = read()
    return page


def screenshot(tools: DevTools, path: Path) -> None:
    metrics = tools.call("Page.getLayoutMetrics")
    size = metrics["cssContentSize"]
    shot = tools.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def test_the_dashboard_moves_while_a_client_writes(server, browser):
    url = dashboard_url(server)
    tools = browser
    tools.call("Runtime.enable")
    tools.call("Log.enable")
    tools.call("Page.enable")
    tools.call("Page.addScriptToEvaluateOnNewDocument", source=WATCH_CSP)

    def read():
        return tools.evaluate(READ_PAGE)

    shot = artifact_path("dashboard.png")
    with Writer(server) as writer:
        tools.call("Page.navigate", url=url)
        try:
            first = wait_for(
                read,
                lambda p: p is not None
                and p["status"] == "live"
                and p["totalRequests"]["value"] > 0
                and any(c["key"] == "WRITE" for c in p["commands"]),
                PAGE_DEADLINE,
                "the page did not show the server's WRITEs",
            )
            # Numbers that only grow while the client writes: they must
            # move on the page without reloading it.
            second = wait_for(
                read,
                lambda p: p["totalRequests"]["value"] > first["totalRequests"]["value"]
                and p["totalBytesIn"]["value"] > first["totalBytesIn"]["value"]
                and p["updated"]["value"] > first["updated"]["value"],
                MOVE_DEADLINE,
                "the numbers did not move",
            )
            # A few seconds of history, for lines worth a look in the charts.
            wait_for(read, lambda p: p["points"] >= 5, MOVE_DEADLINE, "no history for the charts")
        finally:
            # Kept whether or not the numbers moved: it shows what the page did.
            screenshot(tools, shot)
        page = read()
    assert writer.error is None, f"the writing client failed: {writer.error!r}"
    assert writer.files > 0

    # The text a person sees moved too, not only the values behind it.
    assert second["totalRequests"]["text"] != first["totalRequests"]["text"]
    assert second["totalBytesIn"]["text"] != first["totalBytesIn"]["text"]
    # A second with WRITEs in it shows them in the tiles too.
    assert first["writeRate"]["value"] > 0 and first["writeRate"]["text"].endswith("/s")
    assert first["requestRate"]["value"] > 0
    assert not page["tracingOff"]
    assert page["charts"] == 2, page

    # What `copyless top` shows: the phases with their what-if figures...
    assert [p["key"] for p in page["phases"]] == PHASES
    total = sum(p["share_percent"]["value"] for p in page["phases"])
    assert abs(total - 100.0) < 0.01 or total == 0, page["phases"]
    for p in page["phases"]:
        assert p["share_percent"]["text"].endswith("%"), p
        assert p["what_if_bytes_per_s"]["text"] == "-" or p["what_if_bytes_per_s"]["text"].endswith("/s"), p
    assert first["whatIf"].startswith("If "), first["whatIf"]
    # ...the commands with their percentiles (from the first read, which
    # waited for a second with WRITEs: a quiet second may come between)...
    write = next(c for c in first["commands"] if c["key"] == "WRITE")
    assert write["count"]["value"] > 0, write
    assert 0 < write["p50_ns"]["value"] <= write["p99_ns"]["value"], write
    for field in ("p50_ns", "p99_ns"):
        assert re.fullmatch(r"\d+(\.\d+)?(ns|us|ms|s)", write[field]["text"]), write
    # ...shares and clients, the client without its user name (the
    # endpoint keeps user names unless `[metrics] user_labels = true`).
    assert [s["key"] for s in first["shares"]] == [server.share], first["shares"]
    assert [c["address"]["text"] for c in first["clients"]] == ["127.0.0.1"], first["clients"]
    assert first["clients"][0]["user"]["text"] == "-"

    # Nothing went wrong in the page: no script errors, nothing the
    # Content-Security-Policy refused, nothing failed to load.
    assert page["violations"] == [], page["violations"]
    errors = [
        e for e in tools.events
        if e["method"] == "Runtime.exceptionThrown"
        or (e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
        or (e["method"] == "Runtime.consoleAPICalled" and e["params"]["type"] == "error")
    ]
    assert errors == [], json.dumps(errors, indent=1)

    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000, len(data)


def test_the_dashboard_over_http(server):
    url = dashboard_url(server)
    status, headers, body = fetch(url)
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert b"/static/dashboard.js" in body

    status, headers, body = fetch(url + "report.json")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    doc = json.loads(body)
    # The report holds the fields of `copyless top --json`.
    argv = [str(copyless_binary()), "top", "--once", "--json", "--control", str(server.control)]
    top = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                    check=True).stdout)
    assert set(doc["report"]) == set(top)
    assert [p["phase"] for p in doc["report"]["phases"]] == PHASES
    assert {"uptime_s", "requests", "bytes_in", "bytes_out"} <= set(doc["totals"])

    status, headers, body = fetch(url + "static/uPlot.iife.min.js")
    assert status == 200 and headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert body.startswith(b"/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    status, _, body = fetch(url + "static/uPlot.iife.min.js", method="HEAD")
    assert status == 200 and body == b""

    assert fetch(url + "nothing")[0] == 404
    status, headers, _ = fetch(url, method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    # Prometheus's page is where it was.
    status, headers, body = fetch(server.metrics_url)
    assert status == 200 and b"copyless_requests_total" in body
