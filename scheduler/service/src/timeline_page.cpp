// The timeline page: one self-contained HTML document (no external script, style or font: the
// machines may be offline). It polls /api/v1/timeline (the busiest 16 links unless told how many
// or which) and draws, per link, one lane per job:
// the planned windows (light, with the late slack hatched) and the phases the job actually ran
// (dark; red when past the cushion). The page records its own script errors in #errors.
#include "metronome/service/routes.hpp"

namespace metronome::service {

namespace {

constexpr const char* kHtml = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Metronome timeline</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<style>
  body { font-family: system-ui, sans-serif; margin: 16px; background: #fafafa; color: #222; }
  h1 { font-size: 20px; margin: 0 0 8px 0; }
  #status { font-size: 13px; color: #555; margin-bottom: 12px; }
  section.link { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px;
                 margin-bottom: 12px; }
  section.link h2 { font-size: 15px; margin: 0 0 4px 0; }
  section.link .meta { font-size: 12px; color: #666; margin-bottom: 4px; }
  canvas { width: 100%; display: block; }
  .legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
  .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
  #errors { color: #b00; font-size: 12px; white-space: pre-wrap; }
  label { font-size: 13px; }
</style>
</head>
<body>
<h1>Metronome timeline</h1>
<div id="status">loading…</div>
<label>span <select id="span">
  <option value="2000">2 s</option><option value="5000" selected>5 s</option>
  <option value="20000">20 s</option></select></label>
<label>links <input type="number" id="top" min="1" max="99999" value="16" size="5"></label>
<label>only <input type="text" id="only" placeholder="link names, comma-separated" size="30">
</label>
<label><input type="checkbox" id="live" checked> live</label>
<div id="links" data-count="0" data-drawn="0"></div>
<pre id="errors"></pre>
<script>
"use strict";
(function () {
  const errors = document.getElementById("errors");
  function recordError(text) { errors.textContent += text + "\n"; }
  window.addEventListener("error", function (e) { recordError("error: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) {
    recordError("rejection: " + (e.reason && e.reason.message ? e.reason.message : e.reason));
  });
  const origError = console.error.bind(console);
  console.error = function () {
    recordError("console.error: " + Array.prototype.join.call(arguments, " "));
    origError.apply(null, arguments);
  };

  const palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
                   "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  const colors = new Map();
  function colorOf(job) {
    if (!colors.has(job)) colors.set(job, palette[colors.size % palette.length]);
    return colors.get(job);
  }
  const linksDiv = document.getElementById("links");
  const statusDiv = document.getElementById("status");
  const sections = new Map();
  let draws = 0;

  function sectionFor(name) {
    let s = sections.get(name);
    if (s) return s;
    const el = document.createElement("section");
    el.className = "link";
    el.dataset.link = name;
    const h = document.createElement("h2");
    h.textContent = name;
    const meta = document.createElement("div");
    meta.className = "meta";
    const canvas = document.createElement("canvas");
    const legend = document.createElement("div");
    legend.className = "legend";
    el.append(h, meta, canvas, legend);
    linksDiv.appendChild(el);
    s = { el: el, meta: meta, canvas: canvas, legend: legend };
    sections.set(name, s);
    return s;
  }

  function pct(x) { return (100 * x).toFixed(1) + " %"; }

  function drawLink(link, nowNs, spanNs) {
    const s = sectionFor(link.link);
    const jobs = link.jobs;
    const laneH = 26, axisH = 18, labelW = 120;
    const width = Math.max(400, linksDiv.clientWidth || 800);
    const height = axisH + laneH * Math.max(jobs.length, 1);
    const ratio = window.devicePixelRatio || 1;
    s.canvas.width = width * ratio;
    s.canvas.height = height * ratio;
    s.canvas.style.height = height + "px";
    const ctx = s.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const t0 = nowNs - 0.75 * spanNs, t1 = nowNs + 0.25 * spanNs;
    const plotW = width - labelW;
    const x = function (t) { return labelW + (t - t0) / (t1 - t0) * plotW; };
    // Axis: a tick per second relative to now, and the "now" line.
    ctx.fillStyle = "#666";
    ctx.font = "11px sans-serif";
    const tickNs = spanNs > 10e9 ? 5e9 : 1e9;
    for (let k = Math.ceil((t0 - nowNs) / tickNs); nowNs + k * tickNs <= t1; ++k) {
      const tx = x(nowNs + k * tickNs);
      ctx.fillRect(tx, 0, 1, 4);
      ctx.fillText((k * tickNs / 1e9).toFixed(0) + " s", tx + 2, 12);
    }
    let windows = 0, phases = 0;
    jobs.forEach(function (job, i) {
      const y = axisH + i * laneH;
      const color = colorOf(job.job);
      ctx.fillStyle = "#333";
      ctx.fillText(job.job + (job.best_effort ? " (best effort)" : ""), 2, y + 16);
      if (job.yields > 0) {  // collectives held for higher-priority windows, and how long
        ctx.fillStyle = "#666";
        ctx.fillText("yielded " + job.yields + "x, " + (job.yield_wait_ns / 1e9).toFixed(1) + " s",
                     2, y + 28);
      }
      const tt = job.timetable;
      if (tt && tt.period_ns > 0) {
        const base = tt.epoch_ns + tt.offset_ns;
        let k = Math.floor((t0 - base) / tt.period_ns) - 1;
        for (let n = 0; n < 5000; ++n, ++k) {
          const open = base + k * tt.period_ns;
          if (open > t1) break;
          if (open + tt.window_ns < t0) continue;
          ctx.globalAlpha = 0.35;
          ctx.fillStyle = color;
          ctx.fillRect(x(open), y + 2, Math.max(1, x(open + tt.window_ns) - x(open)), laneH - 14);
          if (tt.late_slack_ns > 0) {
            ctx.globalAlpha = 0.15;
            ctx.fillRect(x(open), y + laneH - 12, Math.max(1, x(open + tt.late_slack_ns) - x(open)), 3);
          }
          ctx.globalAlpha = 1;
          ++windows;
        }
      }
      (job.phases || []).forEach(function (p) {
        const start = p[0], dur = Math.max(p[1], 1), late = p[2];
        if (start + dur < t0 || start > t1) return;
        ctx.fillStyle = late ? "#d62728" : color;
        ctx.fillRect(x(start), y + laneH - 9, Math.max(2, x(start + dur) - x(start)), 7);
        ++phases;
      });
    });
    ctx.fillStyle = "#000";
    ctx.fillRect(x(nowNs), 0, 1, height);
    s.meta.textContent = jobs.length + " job(s) · planned utilization " +
        pct(link.planned_utilization) + " · measured " + pct(link.measured_utilization) +
        " · windows (light) and phases run (dark, red = past the cushion)";
    s.legend.textContent = "";
    jobs.forEach(function (job) {
      const span = document.createElement("span");
      const box = document.createElement("i");
      box.style.background = colorOf(job.job);
      span.append(box, document.createTextNode(job.job));
      s.legend.appendChild(span);
    });
    s.el.dataset.jobs = String(jobs.length);
    s.el.dataset.windows = String(windows);
    s.el.dataset.phases = String(phases);
  }

  function render(data) {
    const seen = new Set();
    data.links.forEach(function (link) {
      seen.add(link.link);
      drawLink(link, data.now_ns, data.span_ns);
    });
    sections.forEach(function (s, name) {
      if (!seen.has(name)) { s.el.remove(); sections.delete(name); }
    });
    ++draws;
    linksDiv.dataset.count = String(data.links.length);
    linksDiv.dataset.drawn = String(draws);
    statusDiv.textContent = data.links.length + " of " + data.links_total +
        " link(s) with jobs (the busiest first, or those named) · plan v" +
        data.plan_version + " · updated " + new Date(data.now_ns / 1e6).toISOString();
  }

  function refresh() {
    const query = new URLSearchParams();
    query.set("span_ms", document.getElementById("span").value);
    query.set("links", document.getElementById("top").value || "16");
    document.getElementById("only").value.split(",").forEach(function (name) {
      if (name.trim() !== "") query.append("link", name.trim());
    });
    return fetch("/api/v1/timeline?" + query.toString())
      .then(function (r) {
        return r.json().then(function (body) {
          // The scheduler's JSON errors say what was wrong (an unknown link, a bad count).
          if (!r.ok) throw new Error("HTTP " + r.status + ": " + (body.message || body.error));
          return body;
        });
      })
      .then(render)
      .catch(function (e) { statusDiv.textContent = "timeline request failed: " + e.message; });
  }

  refresh();
  setInterval(function () {
    if (document.getElementById("live").checked) refresh();
  }, 1000);
})();
</script>
</body>
</html>
)HTML";

}  // namespace

const char* TimelineRoutes::Html() {
  return kHtml;
}

void TimelineRoutes::Register(HttpServer& server) {
  auto page = [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kHtml, "text/html; charset=utf-8");
  };
  server.Get("timeline", "/", page);
  server.Get("timeline", "/timeline", page);
}

}  // namespace metronome::service
