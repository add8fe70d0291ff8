"""The live web dashboard on the metrics port, in headless Chromium.

The browser loads the page while two users hold files open, a client
writes files and another fails to log on; the test reads the page's NAS
view (sessions, open files, room on the share, failed logons, history
ranges) and the numbers twice, a few seconds apart, checks that they moved
and that the page shows what `copyless top` shows, and keeps screenshots
(`dashboard.png`, busy, and `dashboard-idle.png`): in
$COPYLESS_TEST_ARTIFACTS when set, else in target/test-artifacts/ of the
repository. User names and paths show on a loopback endpoint, or beyond
it only with `[metrics] user_labels = true`.

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
from smbprotocol.exceptions import LogonFailure
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from conftest import (REPO_ROOT, SERVER_KIND, TEST_PASSWORD, TEST_USER, _start_copyless,
                      _stop_copyless, copyless_binary, make_temp_dir)
from support import create_file

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="the dashboard is copyless's own interface"
)

# A second user, as test_unix_identity names it (as root, the account is
# made or linked by `copyless user add --create-unix-user`).
ALICE = ("alice", "Alice-Passw0rd")
# A user name that never logs on, for the failed logons.
STRANGER = "mallory"
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


class Holder:
    """A session of `user` holding `names` open on the share until closed."""

    def __init__(self, server, user: str, password: str, names: list[str]):
        self.connection = Connection(uuid.uuid4(), server.host, server.port,
                                     require_signing=True)
        self.connection.connect(Dialects.SMB_3_1_1, timeout=30)
        try:
            session = Session(self.connection, user, password, require_encryption=False,
                              auth_protocol="ntlm")
            session.connect()
            tree = TreeConnect(session, f"\\\\{server.host}\\{server.share}")
            tree.connect()
            self.opens = [create_file(tree, name) for name in names]
        except BaseException:
            self.connection.disconnect()
            raise

    def close(self) -> None:
        self.connection.disconnect()


def fail_a_logon(server, user: str) -> None:
    connection = Connection(uuid.uuid4(), server.host, server.port, require_signing=True)
    connection.connect(Dialects.SMB_3_1_1, timeout=30)
    try:
        with pytest.raises(LogonFailure):
            Session(connection, user, "not-the-password", require_encryption=False,
                    auth_protocol="ntlm").connect()
    finally:
        connection.disconnect()


def start_server(name: str, **kwargs):
    """A fresh copyless with the test user and alice, stopped by the caller."""
    base = make_temp_dir(name)
    try:
        return base, _start_copyless(base, extra_users=(ALICE,), **kwargs)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise


@pytest.fixture
def nas_server():
    base, running = start_server("dashboard")
    try:
        yield running.info
    finally:
        try:
            _stop_copyless(running)
        finally:
            shutil.rmtree(base, ignore_errors=True)


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
    sessions: tile("sessions"),
    openFiles: tile("open-files"),
    failedLogons: tile("total-failed-logons"),
    sessionRows: rows("sessions-table"),
    openRows: rows("opens"),
    space: rows("space"),
    failedLogonRows: rows("failed-logons"),
    namesHidden: !document.getElementById("names-hidden").hidden,
    idle: !document.getElementById("idle").hidden,
    windowIdle: document.getElementById("window-note").dataset.idle,
    charts: document.querySelectorAll(".chart .uplot canvas").length,
    points: Number(document.getElementById("throughput-chart").dataset.points || 0),
    range: Object.fromEntries(["throughput-chart", "iops-chart", "errors-chart"].map((id) => {
      const d = document.getElementById(id).dataset;
      return [id, { range: Number(d.range), span: Number(d.span), points: Number(d.points) }];
    })),
    pressed: Array.from(document.querySelectorAll(".ranges button[aria-pressed=true]"))
      .map((b) => b.dataset.range),
    errorsUnit: document.getElementById("errors-unit").textContent,
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


def space_of(path: Path) -> tuple[int, int]:
    """(size, available) of the filesystem at `path`, as `df` counts them."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def click(tools: DevTools, selector: str) -> None:
    assert tools.evaluate(f"""(() => {{
      const el = document.querySelector({json.dumps(selector)});
      if (!el) return false;
      el.click();
      return true;
    }})()"""), f"nothing to click at {selector}"


def test_the_dashboard_shows_the_nas_and_moves_while_a_client_writes(nas_server, browser):
    server = nas_server
    url = dashboard_url(server)
    tools = browser
    tools.call("Runtime.enable")
    tools.call("Log.enable")
    tools.call("Page.enable")
    tools.call("Page.addScriptToEvaluateOnNewDocument", source=WATCH_CSP)

    def read():
        return tools.evaluate(READ_PAGE)

    # Two users, each with files open, and a stranger who fails to log on.
    held = {TEST_USER: ["budget-2024.xlsx"], ALICE[0]: ["holiday.jpg", "notes.txt"]}
    holders = [Holder(server, TEST_USER, TEST_PASSWORD, held[TEST_USER])]
    shot = artifact_path("dashboard.png")
    try:
        holders.append(Holder(server, *ALICE, held[ALICE[0]]))
        fail_a_logon(server, STRANGER)
        with Writer(server) as writer:
            tools.call("Page.navigate", url=url)
            try:
                first = wait_for(
                    read,
                    lambda p: p is not None
                    and p["status"] == "live"
                    and p["totalRequests"]["value"] > 0
                    and any(c["key"] == "WRITE" for c in p["commands"])
                    and {r["user"]["text"] for r in p["sessionRows"]} >= set(held),
                    PAGE_DEADLINE,
                    "the page did not show the server's WRITEs and both users",
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
            size, available = space_of(server.share_path)

            # The history ranges: an hour and a day of minute points, and
            # back to five minutes of seconds.
            minutes = json.loads(fetch(url + "history.json")[2])["minutes"]
            for range_s in (3600, 86400, 300):
                click(tools, f'.ranges button[data-range="{range_s}"]')
                shown = wait_for(
                    read,
                    lambda p: all(c["range"] == range_s for c in p["range"].values()),
                    MOVE_DEADLINE,
                    f"the charts did not switch to {range_s} s",
                )
                assert shown["pressed"] == [str(range_s)], shown["pressed"]
                # The range at most; no less than a minute of seconds or
                # ten minutes of minutes, however young the server.
                least = 60 if range_s == 300 else 600
                for chart in shown["range"].values():
                    assert least <= chart["span"] <= range_s, shown["range"]
                if range_s == 300:
                    assert shown["errorsUnit"] == "per second"
                    assert shown["range"]["throughput-chart"]["points"] >= 5, shown["range"]
                else:
                    assert shown["errorsUnit"] == "per minute"
                    # The minute points (none, in a server's first minute).
                    assert shown["range"]["throughput-chart"]["points"] <= len(minutes) + 1
    finally:
        for holder in holders:
            holder.close()
    assert writer.error is None, f"the writing client failed: {writer.error!r}"
    assert writer.files > 0

    # Who is connected: both users, from this machine, on the share; the
    # writer is the test user's second session.
    users = sorted(r["user"]["text"] for r in page["sessionRows"])
    assert users == sorted([TEST_USER, TEST_USER, ALICE[0]]), page["sessionRows"]
    assert page["sessions"]["value"] == 3
    for row in page["sessionRows"]:
        assert row["client"]["text"].startswith("127.0.0.1:"), row
        assert row["dialect"]["text"] == "3.1.1", row
        assert row["signing"]["text"] == "required", row
        assert row["shares"]["text"] == server.share, row
        assert re.fullmatch(r"\d{1,2}:\d{2}:\d{2}(\s[AP]M)?", row["since"]["text"]), row
    assert not page["namesHidden"]
    # The open files: the three held, and at most the writer's one.
    opened = {r["path"]["text"]: r["user"]["text"] for r in page["openRows"]}
    for user, names in held.items():
        for name in names:
            assert opened.get(name) == user, page["openRows"]
    assert 3 <= page["openFiles"]["value"] <= 4, page["openFiles"]
    assert page["openFiles"]["value"] == len(page["openRows"])
    # The room on the share: the filesystem's, as statvfs sees it (other
    # writers on the disk move the free space a little meanwhile).
    [space] = page["space"]
    assert space["key"] == server.share
    assert space["size"]["value"] == size, (space, size)
    assert abs(space["available"]["value"] - available) <= max(256 << 20, available // 100), \
        (space, available)
    assert space["available"]["text"].endswith(" free")
    used_percent = space["used_percent"]["value"]
    assert 0 <= used_percent <= 100 and space["used_percent"]["text"].endswith("%)")
    # The stranger's failed logon, with the name it tried.
    assert page["failedLogons"]["value"] == 1
    [failed] = page["failedLogonRows"]
    assert failed["user"]["text"] == STRANGER and failed["client"]["text"] == "127.0.0.1"
    assert failed["outcome"]["text"] == "bad user or password"

    # The text a person sees moved too, not only the values behind it.
    assert second["totalRequests"]["text"] != first["totalRequests"]["text"]
    assert second["totalBytesIn"]["text"] != first["totalBytesIn"]["text"]
    # A second with WRITEs in it shows them in the tiles too.
    assert first["writeRate"]["value"] > 0 and first["writeRate"]["text"].endswith("/s")
    assert first["requestRate"]["value"] > 0
    assert not page["tracingOff"]
    assert page["charts"] == 3, page

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
    # ...shares and clients of that second, with user names (the endpoint
    # is on loopback): the writer's at least; the others only if they sent
    # something in that second (the stranger's connection had no user).
    assert [s["key"] for s in first["shares"]] == [server.share], first["shares"]
    assert {c["address"]["text"] for c in first["clients"]} == {"127.0.0.1"}, first["clients"]
    client_users = {c["user"]["text"] for c in first["clients"]}
    assert {TEST_USER} <= client_users <= {TEST_USER, ALICE[0], "-"}, first["clients"]

    # Idle: everyone gone, the page says so once and shows what happened
    # since start rather than a second of zeros.
    idle = wait_for(read, lambda p: p["idle"], MOVE_DEADLINE, "the page did not say idle")
    screenshot(tools, artifact_path("dashboard-idle.png"))
    assert idle["windowIdle"] == "true"
    assert idle["writeRate"]["text"] == "idle" and idle["requestRate"]["text"] == "idle"
    write = next(c for c in idle["commands"] if c["key"] == "WRITE")
    assert write["count"]["value"] >= writer.files * (Writer.FILE_SIZE // Writer.CHUNK), write
    assert sum(p["share_percent"]["value"] for p in idle["phases"]) > 99.0
    # The sessions went with their connections, and their opens with them.
    wait_for(read, lambda p: p["sessions"]["value"] == 0 and p["openFiles"]["value"] == 0,
             MOVE_DEADLINE, "the sessions did not go")

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


def report_of(server) -> dict:
    # A wildcard address is reached on loopback.
    url = dashboard_url(server).replace("//0.0.0.0:", "//127.0.0.1:")
    status, _, body = fetch(url + "report.json")
    assert status == 200
    return json.loads(body)


@pytest.mark.parametrize("user_labels", [False, True])
def test_names_and_paths_beyond_loopback_only_with_user_labels(user_labels):
    base, running = start_server(
        "dashboard-wide", metrics_listen="0.0.0.0:0",
        extra_config="user_labels = true\n" if user_labels else "")
    server = running.info
    try:
        holder = Holder(server, *ALICE, ["secret-plans.txt"])
        try:
            fail_a_logon(server, STRANGER)
            # The sampler reads once a second: wait for a document with both.
            end = time.monotonic() + MOVE_DEADLINE
            while True:
                doc = report_of(server)
                nas = doc["nas"]
                if nas["open_files"] == 1 and doc["failed_logons"]:
                    break
                assert time.monotonic() < end, json.dumps(doc, indent=1)
                time.sleep(0.25)
        finally:
            holder.close()
        text = json.dumps(doc)
        assert doc["names_shown"] is user_labels
        [session] = nas["sessions"]
        [open_] = nas["opens"]
        [failed] = doc["failed_logons"]
        # Counts, addresses and shares either way.
        assert nas["session_count"] == 1 and session["client"].startswith("127.0.0.1:")
        assert open_["share"] == server.share and session["shares"] == [server.share]
        assert failed["client"] == "127.0.0.1"
        if user_labels:
            assert session["user"] == ALICE[0] and open_["user"] == ALICE[0]
            assert open_["path"] == "secret-plans.txt" and failed["user"] == STRANGER
        else:
            assert session["user"] is None and open_["user"] is None
            assert open_["path"] is None and failed["user"] is None
            for secret in (ALICE[0], "secret-plans", STRANGER):
                assert secret not in text, secret
    finally:
        try:
            _stop_copyless(running)
        finally:
            shutil.rmtree(base, ignore_errors=True)


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
    assert {"uptime_s", "requests", "bytes_in", "bytes_out", "errors", "failed_logons"} \
        <= set(doc["totals"])
    # What the NAS holds: nobody yet, and the share's room.
    assert doc["nas"]["session_count"] == 0 and doc["nas"]["open_files"] == 0
    assert [s["name"] for s in doc["nas"]["shares"]] == [server.share]
    assert doc["names_shown"] is True

    # The minute points, apart: none before the first minute has ended.
    status, headers, body = fetch(url + "history.json")
    assert status == 200 and headers["Cache-Control"] == "no-store"
    minutes = json.loads(body)["minutes"]
    assert len(minutes) <= 1 and (doc["minutes_until"] is None) == (minutes == [])

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
