// The dashboard (admins): storage from /system/info, request counts and PUT latency from
// /system/performance and the metrics text, refreshed every few seconds. No Prometheus needed:
// the server keeps the window itself; the request-rate chart is sampled by this page.

import { api, API, session } from "../api.js";
import { h, replace, spinner, formatBytes, formatDuration, formatDate } from "../ui.js";

const REFRESH_MS = 5000;
const SAMPLES = 40;

function stat(label, value, detail) {
  return h("div", { class: "stat" }, h("span", { class: "stat-label", text: label }),
    h("span", { class: "stat-value", text: value }), detail ? h("span", { class: "stat-detail", text: detail }) : null);
}

function latencyTable(caption, stages) {
  const max = Math.max(1, ...Object.values(stages).map((s) => s.p99 || 0));
  return h("div", { class: "table-wrap" }, h("table", { class: "table compact latency" },
    h("caption", { text: caption }),
    h("thead", {}, h("tr", {}, ["Stage", "p50", "p95", "p99", ""].map((t) => h("th", { scope: "col", text: t })))),
    h("tbody", {}, Object.entries(stages).map(([stage, q]) => h("tr", {},
      h("th", { scope: "row", text: stage.replace(/_/g, " ") }),
      ["p50", "p95", "p99"].map((p) => h("td", { class: "num", "data-label": p, text: q[p] == null ? "—" : `${q[p].toFixed(1)} ms` })),
      h("td", { class: "bar-cell", "aria-hidden": "true" },
        h("span", { class: "bar p99", style: { width: `${((q.p99 || 0) / max) * 100}%` } }),
        h("span", { class: "bar p50", style: { width: `${((q.p50 || 0) / max) * 100}%` } })))))));
}

/** Request totals by status class from the Prometheus text (service_http_requests_total). */
export function requestTotals(text) {
  const totals = { all: 0, "2xx": 0, "3xx": 0, "4xx": 0, "5xx": 0 };
  for (const line of text.split("\n")) {
    if (!line.startsWith("service_http_requests_total{")) continue;
    const status = /status="(\d)\d\d"/.exec(line);
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (!Number.isFinite(value)) continue;
    totals.all += value;
    if (status) totals[`${status[1]}xx`] += value;
  }
  return totals;
}

function sparkline(samples, label) {
  const width = 320, height = 60;
  const max = Math.max(1, ...samples);
  const points = samples.map((v, i) => `${(i / Math.max(1, SAMPLES - 1)) * width},${height - (v / max) * (height - 4) - 2}`).join(" ");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  return svg;
}

async function metricsText() {
  const response = await fetch(`${API}/metrics`, { headers: { Authorization: `Bearer ${session.token}` } });
  return response.ok ? response.text() : "";
}

export function dashboardView() {
  const body = h("div", { class: "stack" }, spinner("Loading figures"));
  const updated = h("span", { class: "muted", role: "status" });
  const page = h("section", { class: "page" },
    h("div", { class: "page-head" }, h("h1", { text: "Dashboard" }), updated), body);
  const rates = [];
  let lastTotal = null;
  let lastTime = null;
  const refresh = async () => {
    if (!document.body.contains(page) && rates.length) return false;
    try {
      const [info, perf, text] = await Promise.all([
        api("GET", "/system/info"), api("GET", "/system/performance"), metricsText()]);
      const totals = requestTotals(text);
      const now = Date.now();
      if (lastTotal !== null) rates.push(Math.max(0, (totals.all - lastTotal) / ((now - lastTime) / 1000)));
      while (rates.length > SAMPLES) rates.shift();
      lastTotal = totals.all;
      lastTime = now;
      const disk = info.disk || {};
      const usedShare = disk.total_bytes ? 1 - disk.free_bytes / disk.total_bytes : 0;
      replace(body,
        h("div", { class: "stats" },
          stat("Stored", formatBytes(info.bytes_stored), `${info.objects.toLocaleString()} objects in ${info.buckets} buckets`),
          h("div", { class: "stat" }, h("span", { class: "stat-label", text: "Disk" }),
            h("span", { class: "stat-value", text: `${formatBytes(disk.free_bytes)} free` }),
            h("meter", { min: "0", max: "1", low: "0.8", high: "0.9", optimum: "0", value: String(usedShare), "aria-label": "Disk used" }),
            h("span", { class: "stat-detail", text: `of ${formatBytes(disk.total_bytes)}` })),
          stat("Requests", totals.all.toLocaleString(), `${totals["2xx"].toLocaleString()} ok · ${totals["4xx"].toLocaleString()} client errors · ${totals["5xx"].toLocaleString()} server errors`),
          stat("Uptime", formatDuration(info.uptime_seconds), `version ${info.version} · ${info.durability} durability`)),
        h("div", { class: "grid-2" },
          h("section", { class: "card", "aria-labelledby": "put-title" },
            h("h2", { id: "put-title", text: "Uploads (PUT)" }),
            // Every object stored counts: PUTs, each file of a batch upload, each multipart upload.
            h("p", { class: "figures" }, h("strong", { text: perf.put.count.toLocaleString() }), ` objects stored · ${formatBytes(perf.put.bytes)} · ${formatBytes(perf.put.throughput_bytes_per_second)}/s`),
            latencyTable(`PUT latency over the last ${perf.window_seconds} s (bars: p50 dark, p99 light)`, perf.put.latency_ms)),
          h("section", { class: "card", "aria-labelledby": "get-title" },
            h("h2", { id: "get-title", text: "Downloads (GET)" }),
            h("p", { class: "figures" }, h("strong", { text: perf.get.count.toLocaleString() }), ` requests · ${formatBytes(perf.get.bytes)} · ${formatBytes(perf.get.throughput_bytes_per_second)}/s`),
            latencyTable(`GET latency over the last ${perf.window_seconds} s (bars: p50 dark, p99 light)`, perf.get.latency_ms))),
        h("div", { class: "grid-2" },
          h("section", { class: "card", "aria-labelledby": "rate-title" },
            h("h2", { id: "rate-title", text: "Request rate" }),
            h("p", { class: "figures" }, h("strong", { text: rates.length ? rates.at(-1).toFixed(1) : "—" }), " requests/s, sampled every 5 s by this page"),
            sparkline(rates, "Requests per second over the last samples")),
          h("section", { class: "card", "aria-labelledby": "journal-title" },
            h("h2", { id: "journal-title", text: "Journal" }),
            h("dl", { class: "meta" },
              h("dt", { text: "Segments" }), h("dd", { text: String(info.journal.segments) }),
              h("dt", { text: "Size" }), h("dd", { text: formatBytes(info.journal.bytes) }),
              h("dt", { text: "Last sequence" }), h("dd", { text: String(info.journal.last_sequence) }),
              h("dt", { text: "Last snapshot" }), h("dd", { text: formatDate(info.journal.last_snapshot_at) })))));
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      replace(body, h("p", { class: "form-error", role: "alert", text: `Could not load the figures: ${err.message}` }));
    }
    return true;
  };
  const loop = async () => {
    if (await refresh()) setTimeout(loop, REFRESH_MS);
  };
  loop();
  return page;
}
