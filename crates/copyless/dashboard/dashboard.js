// The copyless dashboard: polls /report.json every second and shows what
// `copyless top` shows. Plain script, no build step; the charts are uPlot
// (vendor/uplot). Every number shown carries its raw value in
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

  function chart(el, series, format) {
    return new uPlot(
      {
        width: el.clientWidth || 600,
        height: 220,
        // At least a minute wide, so that the first seconds have seconds
        // on the axis; from zero up, so that quiet looks quiet.
        scales: {
          x: { time: true, range: (u, min, max) => [Math.min(min, max - 60), max] },
          y: { range: (u, min, max) => [0, Math.max(max, 1)] },
        },
        // Just the names: the values are in the tiles above.
        legend: { live: false },
        axes: [{}, { size: 90, values: (u, values) => values.map(format) }],
        series: [{}].concat(
          series.map(([label, stroke]) => ({
            label,
            stroke,
            width: 2,
            value: (u, v) => (v === null ? "-" : format(v)),
          })),
        ),
      },
      [[]].concat(series.map(() => [])),
      el,
    );
  }

  const throughput = chart(
    $("throughput-chart"),
    [
      ["read (sent)", "#2a7ab0"],
      ["written (received)", "#d0622a"],
    ],
    rate,
  );
  const iops = chart(
    $("iops-chart"),
    [
      ["all requests", "#555"],
      ["READ", "#2a7ab0"],
      ["WRITE", "#d0622a"],
    ],
    perSecond,
  );
  window.addEventListener("resize", () => {
    for (const c of [throughput, iops]) c.setSize({ width: c.root.parentNode.clientWidth, height: 220 });
  });

  function commandRate(report, name) {
    const c = report.commands.find((c) => c.command === name);
    return c && report.window_s > 0 ? c.count / report.window_s : 0;
  }

  function render(doc) {
    const r = doc.report;
    const t = doc.totals;
    $("tracing-off").hidden = r.enabled;
    show("read-rate", r.bytes_out / (r.window_s || 1), rate);
    show("write-rate", r.bytes_in / (r.window_s || 1), rate);
    show("request-rate", r.requests_per_s, perSecond);
    show("reads-rate", commandRate(r, "READ"), perSecond);
    show("writes-rate", commandRate(r, "WRITE"), perSecond);
    show("syscalls-per-request", r.syscalls_per_request, (v) => v.toFixed(2));
    show("live-connections", r.live_connections, count);
    show("total-requests", t.requests, count);
    show("total-bytes-in", t.bytes_in, bytes);
    show("total-bytes-out", t.bytes_out, bytes);
    show("uptime", t.uptime_s, duration);
    show("window", r.window_s, (s) => (r.since_start ? "since start, " : "") + s.toFixed(1) + " s");
    $("version").textContent = doc.version;

    const h = doc.history;
    $("throughput-chart").dataset.points = h.length;
    $("iops-chart").dataset.points = h.length;
    throughput.setData([h.map((p) => p.t), h.map((p) => p.bytes_out_per_s), h.map((p) => p.bytes_in_per_s)]);
    iops.setData([
      h.map((p) => p.t),
      h.map((p) => p.requests_per_s),
      h.map((p) => p.reads_per_s),
      h.map((p) => p.writes_per_s),
    ]);

    const phases = r.phases.map((p) => Object.assign({ bar: p.share_percent }, p));
    fill("phases", phases, (p) => p.phase, [
      ["phase", String],
      ["ns", nanos],
      ["share_percent", (v) => v.toFixed(1) + "%"],
      ["bar", () => ""],
      ["what_if_bytes_per_s", orDash(rate)],
      ["what_if_requests_per_s", orDash(perSecond)],
    ]);
    // The share as a bar: its width set through the DOM, which the page's
    // Content-Security-Policy allows (an inline style attribute it would not).
    for (const td of document.querySelectorAll("#phases td[data-field=bar]")) {
      const div = document.createElement("div");
      div.className = "bar";
      div.style.width = Math.min(100, Number(td.dataset.value)) + "%";
      td.appendChild(div);
    }
    // The what-if line for the biggest phase the server spends (waiting is
    // mostly the client's time between requests).
    const biggest = r.phases
      .filter((p) => p.phase !== "waiting" && p.what_if_bytes_per_s !== null)
      .sort((a, b) => b.share_percent - a.share_percent)[0];
    $("what-if").textContent =
      biggest && biggest.ns > 0
        ? "If " + biggest.phase + " (" + biggest.share_percent.toFixed(1) + "% of the time) took no time: " +
          rate(biggest.what_if_bytes_per_s) + ", " + perSecond(biggest.what_if_requests_per_s) + " requests/s."
        : "";

    fill("commands", r.commands, (c) => c.command, [
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
    fill("disk", r.disk, (d) => d.op, [
      ["op", String],
      ["count", count],
      ["bytes", bytes],
      ["total_ns", nanos],
      ["avg_ns", nanos],
      ["p50_ns", nanos],
      ["p99_ns", nanos],
    ]);
    fill("shares", r.shares, (s) => s.name, [
      ["name", String],
      ["requests", count],
      ["bytes_in", bytes],
      ["bytes_out", bytes],
      ["disk_read_bytes", bytes],
      ["disk_write_bytes", bytes],
      ["busy_ns", nanos],
    ]);
    fill("clients", r.clients, (c) => c.address + " " + c.user, [
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
