// The copyless dashboard: polls /report.json every second and shows the
// NAS (sessions, open files, room per share, activity over five minutes,
// an hour or a day, failed logons) and, below, what `copyless top` shows.
// Plain script, no build step; the charts are uPlot (vendor/uplot). Every number shown carries its raw value in
// `data-value`, for tests and for anyone scraping the page.
"use strict";

(function () {
  const POLL_MS = 1000;
  const $ = (id) => document.getElementById(id);

  // The units of `copyless top` (crates/trace/src/report.rs).
  function bytes(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = b;
    let unit = 0;
    while (v >= 1024 && unit + 1 < units.length) {
      v /= 1024;
      unit += 1;
    }
    return unit === 0 ? v.toFixed(0) + " B" : v.toFixed(1) + " " + units[unit];
  }

  function nanos(ns) {
    if (ns < 1e3) return ns.toFixed(0) + "ns";
    if (ns < 1e6) return (ns / 1e3).toFixed(1) + "us";
    if (ns < 1e9) return (ns / 1e6).toFixed(1) + "ms";
    return (ns / 1e9).toFixed(2) + "s";
  }

  function duration(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const hms = [Math.floor(s / 3600), Math.floor(s / 60) % 60, s % 60];
    return hms[0] + ":" + String(hms[1]).padStart(2, "0") + ":" + String(hms[2]).padStart(2, "0");
  }

  const rate = (b) => bytes(b) + "/s";
  const perSecond = (n) => n.toFixed(1);
  const count = (n) => String(n);
  // A what-if figure is null when the phase is all of the time.
  const orDash = (format) => (v) => (v === null || v === undefined ? "-" : format(v));

  function show(id, value, format) {
    const el = $(id);
    el.textContent = format(value);
    el.dataset.value = String(value);
  }

  // Fills a table's body: one row per item, keyed by `key(item)`, one cell
  // per column [field, format]; each cell carries its raw value.
  function fill(tableId, items, key, columns) {
    const rows = items.map((item) => {
      const tr = document.createElement("tr");
      tr.dataset.key = key(item);
      for (const [field, format] of columns) {
        const td = document.createElement("td");
        const value = item[field];
        td.textContent = format(value);
        td.dataset.field = field;
        td.dataset.value = String(value);
        tr.appendChild(td);
      }
      return tr;
    });
    document.querySelector("#" + tableId + " tbody").replaceChildren(...rows);
  }

  // Who owns what: null where the server leaves names out (see
  // `names_shown` in /report.json).
  const who = (v) => (v === null || v === undefined ? "hidden" : v || "-");
  const since = (t) => {
    if (t === null || t === undefined) return "-";
    const d = new Date(t * 1000);
    const today = new Date().toDateString() === d.toDateString();
    return (today ? "" : d.toLocaleDateString() + " ") + d.toLocaleTimeString();
  };
  const percent = (v) => v.toFixed(0) + "%";

  // The history shown: the one-second points for five minutes, the
  // minute points (/history.json) for an hour or a day.
  const SECONDS_RANGE = 300;
  let range = SECONDS_RANGE;
  let minutes = [];
  let minutesUntil; // the minute points' end when fetched; undefined: never
  let loadingMinutes = false;
  let lastDoc = null;
  const view = { start: 0, end: 0 };

  // Times on the x axis, in 24-hour local time: seconds only in the
  // five minutes (uPlot's own labels add a date line that crowds narrow
  // charts).
  const pad = (n) => String(n).padStart(2, "0");
  function tick(t) {
    const d = new Date(t * 1000);
    const hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
    return range === SECONDS_RANGE ? hm + ":" + pad(d.getSeconds()) : hm;
  }

  // Each series is [label, colour, options]. The x scale spans the whole
  // range chosen, so that a new server's first minutes look like the
  // beginning of an hour rather than a stretched line.
  function chart(el, series, format, incrs) {
    return new uPlot(
      {
        width: el.clientWidth || 600,
        height: 200,
        scales: {
          x: { time: true, range: () => [view.start, view.end] },
          y: { range: (u, min, max) => [0, Math.max(max, 1)] },
        },
        // Just the names: the values are in the tiles above.
        legend: { live: false },
        axes: [{ space: 60, values: (u, splits) => splits.map(tick) }, Object.assign({ size: 80, values: (u, values) => values.map(format) }, incrs ? { incrs } : {})],
        series: [{}].concat(
          series.map(([label, stroke, options]) =>
            Object.assign(
              {
                label,
                stroke,
                width: 2,
                value: (u, v) => (v === null ? "-" : format(v)),
              },
              options || {},
            ),
          ),
        ),
      },
      [[]].concat(series.map(() => [])),
      el,
    );
  }

  // Written is drawn first, as a filled area, and read after it as a
  // dashed line: when both are equal, the read line shows on the area
  // rather than hiding under (or over) the other line.
  const throughput = chart(
    $("throughput-chart"),
    [
      ["written (received)", "#d0622a", { fill: "rgba(208, 98, 42, 0.15)" }],
      ["read (sent)", "#2a7ab0", { dash: [8, 4] }],
    ],
    rate,
  );
  const iops = chart(
    $("iops-chart"),
    [
      ["all requests", "#98a2b3", { fill: "rgba(152, 162, 179, 0.12)" }],
      ["WRITE", "#d0622a"],
      ["READ", "#2a7ab0", { dash: [8, 4] }],
    ],
    perSecond,
  );
  const errorsChart = chart(
    $("errors-chart"),
    [
      ["request errors", "#b42318", { fill: "rgba(180, 35, 24, 0.12)" }],
      ["failed logons", "#7a2ab0", { dash: [8, 4] }],
    ],
    count,
    // Whole numbers: these are counts.
    [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 1e4, 1e5, 1e6],
  );
  const charts = [throughput, iops, errorsChart];
  window.addEventListener("resize", () => {
    for (const c of charts) c.setSize({ width: c.root.parentNode.clientWidth, height: 200 });
  });

  function drawHistory() {
    if (!lastDoc) return;
    const seconds = lastDoc.history;
    const points = range === SECONDS_RANGE ? seconds : minutes;
    const newest = seconds.length ? seconds[seconds.length - 1].t : Date.now() / 1000;
    view.end = range === SECONDS_RANGE ? newest : Math.max(newest, minutes.length ? minutes[minutes.length - 1].t : 0);
    // The range chosen at most, and only as far back as there are points
    // (a young server's first seconds are not squeezed against the right
    // edge), but never less than a minute of seconds or ten minutes.
    const h = points.filter((p) => p.t > view.end - range);
    const [step, least] = range === SECONDS_RANGE ? [1, 60] : [60, 600];
    const first = h.length ? h[0].t - step : view.end;
    view.start = Math.max(view.end - range, Math.min(first, view.end - least));
    const t = h.map((p) => p.t);
    throughput.setData([t, h.map((p) => p.bytes_in_per_s), h.map((p) => p.bytes_out_per_s)]);
    iops.setData([t, h.map((p) => p.requests_per_s), h.map((p) => p.writes_per_s), h.map((p) => p.reads_per_s)]);
    errorsChart.setData([t, h.map((p) => p.errors), h.map((p) => p.failed_logons)]);
    for (const id of ["throughput-chart", "iops-chart", "errors-chart"]) {
      const el = $(id);
      el.dataset.points = h.length;
      el.dataset.range = range;
      el.dataset.span = view.end - view.start;
    }
    const perMinute = range !== SECONDS_RANGE;
    $("throughput-unit").textContent = perMinute ? "(average of each minute)" : "(each second)";
    $("iops-unit").textContent = perMinute ? "(average of each minute)" : "(each second)";
    $("errors-unit").textContent = perMinute ? "per minute" : "per second";
    $("range-note").textContent = !perMinute
      ? ""
      : h.length === 0
        ? "no minute has ended since the server started"
        : h.length + " minute" + (h.length === 1 ? "" : "s");
  }

  async function loadMinutes() {
    if (loadingMinutes) return;
    loadingMinutes = true;
    const until = lastDoc ? lastDoc.minutes_until : null;
    try {
      const response = await fetch("/history.json", { cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      minutes = (await response.json()).minutes;
      minutesUntil = until;
      drawHistory();
    } finally {
      loadingMinutes = false;
    }
  }

  for (const button of document.querySelectorAll(".ranges button")) {
    button.addEventListener("click", () => {
      range = Number(button.dataset.range);
      for (const b of document.querySelectorAll(".ranges button")) {
        b.setAttribute("aria-pressed", String(b === button));
      }
      drawHistory();
      if (range !== SECONDS_RANGE) loadMinutes().catch(() => {});
    });
  }

  // A bar in each cell of `field` in `tableId`, as wide as its value in
  // percent. Its width is set through the DOM, which the page's
  // Content-Security-Policy allows (an inline style attribute it would not).
  function bars(tableId, field) {
    for (const td of document.querySelectorAll("#" + tableId + " td[data-field=" + field + "]")) {
      const track = document.createElement("div");
      track.className = "track";
      const div = document.createElement("div");
      div.className = "bar";
      div.style.width = Math.max(0, Math.min(100, Number(td.dataset.value))) + "%";
      track.appendChild(div);
      td.replaceChildren(track);
    }
  }

  function commandRate(report, name) {
    const c = report.commands.find((c) => c.command === name);
    return c && report.window_s > 0 ? c.count / report.window_s : 0;
  }

  function renderNas(doc) {
    const nas = doc.nas;
    $("names-hidden").hidden = doc.names_shown;
    if (!nas) return;
    show("sessions", nas.session_count, count);
    show("open-files", nas.open_files, count);

    const shares = nas.shares.map((s) =>
      Object.assign({ used_percent: s.size > 0 ? (100 * s.used) / s.size : 0, bar: s.size > 0 ? (100 * s.used) / s.size : 0 }, s),
    );
    fill("space", shares, (s) => s.name, [
      ["name", String],
      ["bar", () => ""],
      ["used_percent", percent],
      ["available", (v) => bytes(v) + " free"],
      ["size", bytes],
    ]);
    bars("space", "bar");
    // The used bytes beside their share of the whole.
    for (const tr of document.querySelectorAll("#space tbody tr")) {
      const share = nas.shares.find((s) => s.name === tr.dataset.key);
      const used = tr.querySelector("td[data-field=used_percent]");
      used.textContent = bytes(share.used) + " (" + used.textContent + ")";
      used.dataset.used = share.used;
    }

    fill("sessions-table", nas.sessions, (s) => s.session_id + "@" + s.connection, [
      ["user", who],
      ["client", String],
      ["dialect", String],
      ["auth", String],
      ["signing", String],
      ["encryption", String],
      ["shares", (v) => v.filter((s) => s !== "IPC$").join(", ") || "-"],
      ["since", since],
    ]);
    $("no-sessions").hidden = nas.sessions.length > 0;
    $("more-sessions").hidden = nas.more_sessions === 0;
    $("more-sessions").textContent = "and " + nas.more_sessions + " more";

    // A folder's path ends in a slash; the share's root is "/".
    const opens = nas.opens.map((o, i) =>
      Object.assign({}, o, {
        caching: o.lease ? "lease " + o.lease : o.oplock,
        index: i,
        path: o.path === null ? null : o.directory ? (o.path ? o.path + "/" : "/") : o.path,
      }),
    );
    fill("opens", opens, (o) => String(o.index), [
      ["share", String],
      ["path", who],
      ["user", who],
      ["client", (c) => (c ? c.replace(/:\d+$/, "") : "-")],
      ["caching", String],
    ]);
    $("no-opens").hidden = nas.opens.length > 0;
    $("more-opens").hidden = nas.more_opens === 0;
    $("more-opens").textContent = "and " + nas.more_opens + " more";
  }

  function render(doc) {
    lastDoc = doc;
    const r = doc.report;
    const t = doc.totals;
    // A quiet second is said once, rather than as tables of zeros: the
    // tables then show everything since start.
    const tables = doc.since_start || r;
    const quiet = doc.idle && !r.since_start;
    const orIdle = (format) => (v) => (quiet ? "idle" : format(v));
    $("tracing-off").hidden = r.enabled;
    $("idle").hidden = !quiet;
    show("read-rate", r.bytes_out / (r.window_s || 1), orIdle(rate));
    show("write-rate", r.bytes_in / (r.window_s || 1), orIdle(rate));
    show("request-rate", r.requests_per_s, orIdle(perSecond));
    show("reads-rate", commandRate(r, "READ"), orIdle(perSecond));
    show("writes-rate", commandRate(r, "WRITE"), orIdle(perSecond));
    show("syscalls-per-request", tables.syscalls_per_request, (v) => v.toFixed(2));
    show("live-connections", r.live_connections, count);
    show("total-requests", t.requests, count);
    show("total-bytes-in", t.bytes_in, bytes);
    show("total-bytes-out", t.bytes_out, bytes);
    show("total-errors", t.errors, count);
    show("total-failed-logons", t.failed_logons, count);
    show("uptime", t.uptime_s, duration);
    show("window", tables.window_s, (s) => s.toFixed(1) + " s");
    $("window-note").dataset.idle = String(quiet);
    $("window-what").textContent = quiet
      ? "Idle: no request in the last second. Tables: everything since start"
      : tables.since_start
        ? "Tables: everything since start"
        : "Tables: the last second";
    $("version").textContent = doc.version;

    renderNas(doc);
    drawHistory();
    if (range !== SECONDS_RANGE && doc.minutes_until !== minutesUntil) loadMinutes().catch(() => {});

    fill("failed-logons", doc.failed_logons, (f) => f.t + " " + f.client, [
      ["t", since],
      ["user", who],
      ["client", String],
      ["outcome", (o) => (o === "bad_credentials" ? "bad user or password" : o)],
    ]);
    $("no-failed-logons").hidden = doc.failed_logons.length > 0;

    const phases = tables.phases.map((p) => Object.assign({ bar: p.share_percent }, p));
    fill("phases", phases, (p) => p.phase, [
      ["phase", String],
      ["ns", nanos],
      ["share_percent", (v) => v.toFixed(1) + "%"],
      ["bar", () => ""],
      ["what_if_bytes_per_s", orDash(rate)],
      ["what_if_requests_per_s", orDash(perSecond)],
    ]);
    bars("phases", "bar");
    // The what-if line for the biggest phase the server spends (waiting is
    // mostly the client's time between requests).
    const biggest = tables.phases
      .filter((p) => p.phase !== "waiting" && p.what_if_bytes_per_s !== null)
      .sort((a, b) => b.share_percent - a.share_percent)[0];
    $("what-if").textContent =
      biggest && biggest.ns > 0
        ? "If " + biggest.phase + " (" + biggest.share_percent.toFixed(1) + "% of the time) took no time: " +
          rate(biggest.what_if_bytes_per_s) + ", " + perSecond(biggest.what_if_requests_per_s) + " requests/s."
        : "";

    fill("commands", tables.commands, (c) => c.command, [
      ["command", String],
      ["count", count],
      ["errors", count],
      ["total_ns", nanos],
      ["avg_ns", nanos],
      ["min_ns", nanos],
      ["max_ns", nanos],
      ["p50_ns", nanos],
      ["p99_ns", nanos],
    ]);
    fill("disk", tables.disk, (d) => d.op, [
      ["op", String],
      ["count", count],
      ["bytes", bytes],
      ["total_ns", nanos],
      ["avg_ns", nanos],
      ["p50_ns", nanos],
      ["p99_ns", nanos],
    ]);
    fill("shares", tables.shares, (s) => s.name, [
      ["name", String],
      ["requests", count],
      ["bytes_in", bytes],
      ["bytes_out", bytes],
      ["disk_read_bytes", bytes],
      ["disk_write_bytes", bytes],
      ["busy_ns", nanos],
    ]);
    fill("clients", tables.clients, (c) => c.address + " " + c.user, [
      ["address", String],
      ["user", (u) => u || "-"],
      ["connections", count],
      ["requests", count],
      ["bytes_in", bytes],
      ["bytes_out", bytes],
      ["busy_ns", nanos],
    ]);
    $("more-clients").hidden = doc.more_clients === 0;
    $("more-clients").textContent = "and " + doc.more_clients + " more";
  }

  function status(state, text) {
    const el = $("status");
    el.dataset.state = state;
    el.textContent = text;
  }

  async function poll() {
    try {
      const response = await fetch("/report.json", { cache: "no-store" });
      if (!response.ok) throw new Error("HTTP " + response.status);
      render(await response.json());
      status("live", "live");
      show("updated", Date.now(), (ms) => new Date(ms).toLocaleTimeString());
    } catch (e) {
      status("error", "cannot reach the server (" + e.message + "); retrying");
    }
    setTimeout(poll, POLL_MS);
  }

  poll();
})();
