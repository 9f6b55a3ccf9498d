// The streamjoin dashboard: reads /status, /queries, /history and /plan (GET only) once a second
// and draws them as inline SVG. No library, no build step: the file is served as it is.
"use strict";

const params = new URLSearchParams(location.hash.slice(1));
const TOKEN = params.get("token");
const EVERY_MS = Number(params.get("every") || 1000);
const KEEP = 600; // batches drawn (the service keeps its own bound)
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
const SVG = "http://www.w3.org/2000/svg";

let records = [];
let last = -1;
let planShown = 0;

async function get(path) {
  const headers = TOKEN ? { Authorization: "Bearer " + TOKEN } : {};
  const response = await fetch(path, { headers, cache: "no-store" });
  if (!response.ok) throw new Error(path + ": " + response.status + " " + (await response.text()));
  return response.json();
}

function $(id) { return document.getElementById(id); }
function sum(obj) { return Object.values(obj || {}).reduce((a, b) => a + b, 0); }
function text(id, value) { $(id).textContent = value === null || value === undefined ? "–" : String(value); }
function fixed(value, digits) { return value === null || value === undefined ? null : value.toFixed(digits); }

// Seconds as the unit that keeps them short: 0.42 s, 3.5 min, 2.1 h, 329 d.
function duration(seconds) {
  if (seconds === null || seconds === undefined) return null;
  const units = [[86400, "d"], [3600, "h"], [60, "min"]];
  for (const [size, name] of units) {
    if (Math.abs(seconds) >= 2 * size) return (seconds / size).toPrecision(3) + " " + name;
  }
  return seconds.toFixed(2) + " s";
}

// An axis value in three digits: 950, 12.5k, 3.20M.
function compact(value) {
  const units = [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, name] of units) {
    if (Math.abs(value) >= size) return (value / size).toPrecision(3) + name;
  }
  return value >= 100 ? String(Math.round(value)) : value.toPrecision(3);
}

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

// A chart of named series over the batch ids: lines, or stacked areas with `stacked`.
function chart(svg, xs, series, stacked) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const width = svg.clientWidth || 420, height = svg.clientHeight || 170;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const left = 48, right = 8, top = 20, bottom = 18; // (the legend sits above the plot)
  const names = Object.keys(series);
  const tops = xs.map((_, i) => stacked
    ? names.reduce((a, n) => a + (series[n][i] || 0), 0)
    : Math.max(0, ...names.map((n) => series[n][i] ?? 0)));
  const ymax = Math.max(1e-9, ...tops);
  const x0 = xs.length ? xs[0] : 0, x1 = xs.length ? xs[xs.length - 1] : 1;
  const sx = (x) => left + (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0)) * (width - left - right);
  const sy = (y) => height - bottom - (y / ymax) * (height - top - bottom);
  el("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#bbb" }, svg);
  el("text", { x: 2, y: top + 4 }, svg).textContent = compact(ymax);
  el("text", { x: 2, y: height - bottom }, svg).textContent = "0";
  if (xs.length) {
    el("text", { x: left, y: height - 4 }, svg).textContent = "batch " + x0;
    el("text", { x: width - right - 60, y: height - 4 }, svg).textContent = "batch " + x1;
  }
  const base = xs.map(() => 0);
  names.forEach((name, k) => {
    const color = COLORS[k % COLORS.length];
    const ys = xs.map((_, i) => series[name][i]);
    if (stacked) {
      const upper = ys.map((y, i) => base[i] + (y || 0));
      const pts = xs.map((x, i) => `${sx(x)},${sy(upper[i])}`).concat(
        xs.map((x, i) => `${sx(x)},${sy(base[i])}`).reverse());
      el("polygon", { points: pts.join(" "), fill: color, "fill-opacity": 0.6, stroke: color }, svg);
      upper.forEach((u, i) => { base[i] = u; });
    } else {
      const pts = xs.map((x, i) => (ys[i] === null || ys[i] === undefined ? null : `${sx(x)},${sy(ys[i])}`))
        .filter((p) => p !== null);
      el("polyline", { points: pts.join(" "), fill: "none", stroke: color, "stroke-width": 1.5 }, svg);
    }
    el("rect", { x: left + k * 110, y: 2, width: 8, height: 8, fill: color }, svg);
    el("text", { x: left + 12 + k * 110, y: 10 }, svg).textContent = name;
  });
}

function perSecond(r, values) { return r.seconds ? sum(values) / r.seconds : 0; }

function drawCharts() {
  const xs = records.map((r) => r.batch);
  chart($("chart-rates"), xs, {
    "in": records.map((r) => perSecond(r, r.rows_in)),
    "out": records.map((r) => perSecond(r, r.out)),
  });
  chart($("chart-delays"), xs, {
    "latency": records.map((r) => r.latency),
    "watermark lag": records.map((r) => r.watermark_lag),
  });
  const phases = [...new Set(records.flatMap((r) => Object.keys(r.phases)))];
  chart($("chart-phases"), xs, Object.fromEntries(phases.map((p) => [p, records.map((r) => r.phases[p] || 0)])), true);
  const streams = [...new Set(records.flatMap((r) => Object.keys(r.state_rows)))];
  chart($("chart-state"), xs, Object.fromEntries(streams.map((s) => [s, records.map((r) => r.state_rows[s] || 0)])));
}

// Squall's grid for a matrix scheme (n rows by m columns), a row of units for any other.
function drawHeatmaps(r) {
  const box = $("heatmaps");
  const queries = Object.keys(r.units || {});
  if (!queries.length) return;
  box.replaceChildren();
  for (const q of queries) {
    const probe = r.units[q].probe || [], store = r.units[q].store || [];
    const loads = probe.map((p, i) => p + (store[i] || 0));
    const shape = (r.shapes || {})[q] || {};
    const cols = shape.name === "matrix" && shape.m ? shape.m : loads.length;
    const rows = Math.ceil(loads.length / cols);
    const cell = 34, max = Math.max(1, ...loads);
    const fig = document.createElement("figure");
    const caption = document.createElement("figcaption");
    caption.textContent = `${q}: ${(r.schemes || {})[q] || ""}`;
    fig.appendChild(caption);
    const svg = el("svg", { width: cols * cell + 2, height: rows * cell + 2 }, fig);
    loads.forEach((load, i) => {
      const x = 1 + (i % cols) * cell, y = 1 + Math.floor(i / cols) * cell;
      const heat = Math.round(255 - (load / max) * 200);
      el("rect", { x, y, width: cell - 2, height: cell - 2, fill: `rgb(255,${heat},${heat})`, stroke: "#ccc" }, svg);
      el("text", { x: x + 3, y: y + 20, class: "unit" }, svg).textContent = String(load);
    });
    box.appendChild(fig);
  }
}

function drawTiles(r, status) {
  text("batches", r.totals.batches);
  text("last-batch", r.batch);
  text("rows-in-total", sum(r.totals.rows_in));
  text("rows-out-total", sum(r.totals.out));
  text("rejected", `${sum(r.totals.late)} · ${sum(r.totals.malformed)}`);
  text("state-rows", sum(r.state_rows));
  text("batch-seconds", fixed(r.seconds, 3));
  text("latency", duration(r.latency));
  text("lag", duration(r.watermark_lag));
  text("watermark", status.watermark);
}

// Each query's block of the plan's text ("query NAME (line N): ..." up to a blank line).
function planBlocks(text) {
  const blocks = {};
  for (const block of text.split(/\n\s*\n/)) {
    const m = /^query (\S+) /.exec(block);
    if (m) blocks[m[1]] = block;
  }
  return blocks;
}

function drawQueries(queries, r) {
  const body = $("queries").tBodies[0];
  const open = new Set([...body.querySelectorAll("details[open]")].map((d) => d.dataset.query));
  const blocks = planBlocks($("plan").textContent);
  body.replaceChildren();
  for (const q of queries) {
    const row = body.insertRow();
    row.dataset.query = q.name;
    const cells = [q.name, q.state, q.streams.join(" ⋈ "), q.since ?? "start", q.rows_out,
      ((r && r.schemes) || {})[q.name] || "", q.shares_with.join(", ")];
    cells.forEach((value, i) => {
      const cell = row.insertCell();
      cell.textContent = String(value);
      if (i === 4) cell.className = "num rows-out";
    });
    const details = document.createElement("details");
    details.dataset.query = q.name;
    details.open = open.has(q.name);
    const summary = document.createElement("summary");
    summary.textContent = "explain";
    const pre = document.createElement("pre");
    pre.textContent = blocks[q.name] || (q.sql ? q.sql : "(in the next plan)");
    details.append(summary, pre);
    row.insertCell().appendChild(details);
  }
}

function drawEvents() {
  const list = $("events");
  list.replaceChildren();
  for (const r of records.slice().reverse()) {
    for (const e of r.events) {
      const item = document.createElement("li");
      item.textContent = `batch ${r.batch}: ${e}`;
      list.appendChild(item);
    }
  }
}

async function poll() {
  try {
    const [status, queries, fresh] = await Promise.all([get("/status"), get("/queries"), get("/history?since=" + last)]);
    if (fresh.length) {
      records = records.concat(fresh).slice(-KEEP);
      last = records[records.length - 1].batch;
      drawCharts();
      drawEvents();
      drawHeatmaps(records[records.length - 1]);
    }
    if (Date.now() - planShown > 10000) {
      $("plan").textContent = (await get("/plan")).explain;
      planShown = Date.now();
    }
    const r = records[records.length - 1];
    if (r) drawTiles(r, status);
    drawQueries(queries, r);
    $("state").textContent = status.active ? "running" : "stopped";
    $("state").className = status.active ? "state" : "state stopped";
    text("error", status.error || "");
    text("kept", records.length);
  } catch (err) {
    text("error", String(err));
  }
  setTimeout(poll, EVERY_MS);
}

poll();
