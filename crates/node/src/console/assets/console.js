// The ringstore console: fetches the node's JSON API (/api/v1/…) every
// REFRESH_MS and redraws each section. Plain JavaScript, no library; every
// value from the API reaches the page as text (textContent, attributes),
// never as HTML.
//
// When the API answers 401 the page asks for the port's bearer token, keeps
// it in sessionStorage (this tab only) and sends it on every fetch.
"use strict";

const REFRESH_MS = 2000;
const TOKEN_KEY = "ringstore-console-token";
const SVG = "http://www.w3.org/2000/svg";
// Distinct colours for owners (then generated hues), pale ones for racks.
const OWNER_COLOURS = ["#2e86c1", "#e67e22", "#27ae60", "#8e44ad", "#c0392b",
  "#16a085", "#d4ac0d", "#2c3e50", "#e84393", "#7f8c8d"];
const RACK_COLOURS = ["#aed6f1", "#f9e79f", "#abebc6", "#f5b7b1", "#d7bde2",
  "#a3e4d7", "#fad7a0", "#d5dbdb"];

let refreshes = 0;

class Unauthorized extends Error {}

function ownerColour(index) {
  return index < OWNER_COLOURS.length
    ? OWNER_COLOURS[index]
    : `hsl(${(index * 137.5) % 360}, 60%, 45%)`;
}

async function api(path) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = `Bearer ${token}`;
  const response = await fetch(`/api/v1/${path}`, { headers, cache: "no-store" });
  if (response.status === 401) throw new Unauthorized();
  const body = await response.json();
  if (!response.ok) throw new Error(`${path}: ${body.error || response.status}`);
  return body;
}

// ---- formatting ----------------------------------------------------------

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return `${unit === 0 ? value : value.toFixed(2)} ${units[unit]}`;
}

function duration(seconds) {
  if (seconds == null) return "?";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
  return `${Math.floor(s / 86400)}d${Math.floor(s / 3600) % 24}h`;
}

function percent(fraction) {
  return `${(fraction * 100).toFixed(1)}%`;
}

function offset(ms) {
  if (ms == null) return "?";
  return `${ms >= 0 ? "+" : ""}${ms.toFixed(1)} ms`;
}

// ---- DOM helpers ---------------------------------------------------------

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function fillTable(id, rows, emptyText, columns) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = cell(emptyText, "empty");
    td.colSpan = columns;
    tr.appendChild(td);
    body.appendChild(tr);
  }
}

function svg(name, attributes) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  return element;
}

// ---- sections ------------------------------------------------------------

function renderNode(node) {
  const summary = document.getElementById("node-summary");
  summary.dataset.hostId = node.host_id;
  summary.textContent = `cluster ${node.cluster_name} · node ${node.host_id.slice(0, 8)} · ` +
    `${node.datacenter}/${node.rack} · ${node.state} · up ${duration(node.uptime_seconds)} · ` +
    `v${node.software_version}` + (node.storage_failure ? ` · STORAGE FAILED: ${node.storage_failure}` : "");
}

function renderNodes(view) {
  const rows = view.nodes.map((node) => {
    const tr = document.createElement("tr");
    tr.dataset.hostId = node.host_id;
    tr.dataset.address = node.address;
    tr.dataset.state = node.status;
    if (node.local) tr.className = "local";
    const id = cell(node.host_id.slice(0, 8));
    id.title = node.host_id;
    tr.append(
      cell(node.status, "state"), cell(node.address), id,
      cell(node.datacenter), cell(node.rack), cell(bytes(node.load_bytes)),
      cell(String(node.tokens)), cell(percent(node.ownership)),
      cell(offset(node.clock_offset_ms)), cell(node.version));
    return tr;
  });
  fillTable("nodes", rows, "no members known", 10);
}

// An annulus segment from fraction `from` to `to` of the circle (0 at the
// top, clockwise), between radii `inner` and `outer`.
function segment(from, to, inner, outer) {
  const point = (fraction, radius) => {
    const angle = fraction * 2 * Math.PI - Math.PI / 2;
    return `${(radius * Math.cos(angle)).toFixed(3)} ${(radius * Math.sin(angle)).toFixed(3)}`;
  };
  const large = to - from > 0.5 ? 1 : 0;
  return `M ${point(from, outer)} A ${outer} ${outer} 0 ${large} 1 ${point(to, outer)} ` +
    `L ${point(to, inner)} A ${inner} ${inner} 0 ${large} 0 ${point(from, inner)} Z`;
}

function renderRing(ring, nodes) {
  const picture = document.getElementById("ring");
  const colours = new Map(ring.owners.map((owner, i) => [owner.host_id, ownerColour(i)]));
  const racks = [...new Set(ring.owners.map((o) => `${o.datacenter}/${o.rack}`))].sort();
  const rackColour = (owner) =>
    RACK_COLOURS[racks.indexOf(`${owner.datacenter}/${owner.rack}`) % RACK_COLOURS.length];
  const owners = new Map(ring.owners.map((owner) => [owner.host_id, owner]));
  const shapes = [];
  for (const range of ring.ranges) {
    const owner = owners.get(range.owner);
    // A single token's range is the whole circle: drawn as two halves.
    const pieces = range.fraction > 0.999
      ? [[range.start_fraction, range.start_fraction + 0.5], [range.start_fraction + 0.5, range.start_fraction + 1]]
      : [[range.start_fraction, range.start_fraction + range.fraction]];
    for (const [from, to] of pieces) {
      const arc = svg("path", {
        d: segment(from, to, 70, 100), fill: colours.get(range.owner) || "#999",
        stroke: "#fff", "stroke-width": "0.4", class: "arc",
        "data-owner": range.owner, "data-start": range.start_token, "data-end": range.end_token,
      });
      const title = svg("title", {});
      title.textContent = `(${range.start_token}, ${range.end_token}] ${percent(range.fraction)} ` +
        `→ ${owner && owner.address ? owner.address : range.owner}`;
      arc.appendChild(title);
      shapes.push(arc);
      if (owner) {
        shapes.push(svg("path", {
          d: segment(from, to, 56, 67), fill: rackColour(owner), class: "rack-arc",
          "data-rack": owner.rack,
        }));
      }
    }
  }
  const label = svg("text", { x: 0, y: 4, "text-anchor": "middle", "font-size": 9, fill: "#556" });
  label.textContent = `${ring.ranges.length} ranges · epoch ${ring.epoch}`;
  shapes.push(label);
  picture.dataset.ranges = String(ring.ranges.length);
  picture.replaceChildren(...shapes);

  const state = new Map(nodes.nodes.map((n) => [n.host_id, n.status]));
  const legend = document.getElementById("ring-legend");
  legend.replaceChildren(...ring.owners.map((owner) => {
    const li = document.createElement("li");
    li.dataset.hostId = owner.host_id;
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colours.get(owner.host_id);
    const rack = document.createElement("span");
    rack.className = "swatch";
    rack.style.background = rackColour(owner);
    li.append(swatch, rack, `${owner.address || owner.host_id} ${state.get(owner.host_id) || ""} · ` +
      `${owner.datacenter}/${owner.rack} · ${owner.token_count} tokens · ${percent(owner.ownership)}`);
    return li;
  }));
}

function renderStreams(view) {
  document.getElementById("stream-throttle").textContent =
    `mode ${view.mode} · throttle ${view.stream_throughput_mib_per_sec === 0 ? "none" : `${view.stream_throughput_mib_per_sec} MiB/s`}`;
  const rows = view.streams.slice().reverse().map((stream) => {
    const tr = document.createElement("tr");
    tr.className = "stream";
    tr.dataset.state = stream.state.startsWith("failed") ? "failed" : stream.state;
    tr.dataset.progress = stream.progress.toFixed(4);
    tr.dataset.direction = stream.direction;
    const progress = document.createElement("td");
    const bar = document.createElement("span");
    bar.className = "bar";
    const fill = document.createElement("span");
    fill.style.width = percent(stream.progress);
    bar.appendChild(fill);
    progress.append(bar, `${percent(stream.progress)} of ${bytes(stream.bytes_total)}`);
    tr.append(
      cell(stream.operation), cell(stream.direction),
      cell(stream.peer_address || stream.peer_host_id), cell(stream.keyspace),
      cell(`${stream.ranges_done}/${stream.ranges_total}`), progress,
      cell(`${bytes(Math.round(stream.bytes_per_second))}/s`),
      cell(stream.eta_seconds == null ? "" : duration(stream.eta_seconds)), cell(stream.state));
    return tr;
  });
  fillTable("streams", rows, "no streams", 9);
}

function renderHints(view) {
  document.getElementById("hints-state").textContent =
    `${view.enabled ? "enabled" : "disabled"}${view.paused ? ", paused" : ""} · ` +
    `${view.stored} stored, ${view.replayed} replayed since start`;
  const rows = view.targets.map((target) => {
    const tr = document.createElement("tr");
    tr.dataset.hostId = target.host_id;
    tr.dataset.hints = String(target.hints);
    tr.append(cell(target.address || "(gone)"), cell(target.host_id),
      cell(String(target.hints)), cell(bytes(target.bytes)));
    return tr;
  });
  fillTable("hints", rows, "no hints pending", 4);
}

function renderRepair(view) {
  const job = view.current;
  document.getElementById("repair-state").textContent =
    `schedule ${view.schedule}${view.schedule === "off" ? "" : ` every ${duration(view.schedule_interval_seconds)}`} · ` +
    `tombstone gc ${view.tombstone_gc}` +
    (job ? ` · last job ${job.state}: ${job.ranges_done}/${job.ranges_total} ranges` +
      (job.ranges_failed ? `, ${job.ranges_failed} failed` : "") : " · no job since start");
  const repaired = view.ranges.filter((r) => r.seconds_since_repair != null).length;
  const rows = view.ranges.map((range) => {
    const tr = document.createElement("tr");
    tr.dataset.keyspace = range.keyspace;
    tr.dataset.repaired = String(range.seconds_since_repair != null);
    tr.append(cell(range.keyspace), cell(`(${range.start_token}, ${range.end_token}]`),
      cell(range.seconds_since_repair == null ? "never" : `${duration(range.seconds_since_repair)} ago`),
      cell(range.overdue ? "overdue" : "", range.overdue ? "overdue" : ""));
    return tr;
  });
  if (view.ranges.length) {
    document.getElementById("repair-state").textContent +=
      ` · ${repaired} of ${view.ranges.length} ranges repaired`;
  }
  fillTable("repair", rows, "no scheduled ranges (no keyspace, or repair off)", 4);
}

// A line chart of `series` ({name, colour, values: [[secondsAgo, y|null]]})
// over the last `window` seconds.
function chart(id, window, series, unit) {
  const picture = document.getElementById(id);
  const [width, height, left, bottom] = [400, 140, 40, 16];
  const values = series.flatMap((s) => s.values.map(([, y]) => y)).filter((y) => y != null);
  const top = Math.max(1e-9, ...values) * 1.1;
  const x = (ago) => left + (width - left - 4) * (1 - ago / window);
  const y = (value) => height - bottom - (height - bottom - 6) * (value / top);
  const shapes = [
    svg("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, stroke: "#ccd" }),
    svg("line", { x1: left, y1: 6, x2: left, y2: height - bottom, stroke: "#ccd" }),
  ];
  const text = (content, attributes) => {
    const t = svg("text", { "font-size": 9, fill: "#667", ...attributes });
    t.textContent = content;
    shapes.push(t);
  };
  text(values.length ? `${top.toFixed(top < 10 ? 2 : 0)} ${unit}` : "no requests yet", { x: 2, y: 12 });
  text(`${Math.round(window / 60)} min ago`, { x: left, y: height - 3 });
  text("now", { x: width - 20, y: height - 3 });
  let legendX = left + 60;
  for (const s of series) {
    let path = "";
    let pen = "M";
    for (const [ago, value] of s.values) {
      if (value == null) { pen = "M"; continue; }
      path += `${pen} ${x(ago).toFixed(1)} ${y(value).toFixed(1)} `;
      pen = "L";
    }
    if (path) {
      shapes.push(svg("path", { d: path, fill: "none", stroke: s.colour, "stroke-width": 1.5,
        "stroke-dasharray": s.dashed ? "4 2" : "", "data-series": s.name }));
    }
    text(s.name, { x: legendX, y: height - 3, fill: s.colour });
    legendX += 55;
  }
  picture.replaceChildren(...shapes);
}

function renderTraffic(view) {
  const window = view.sample_every_seconds * view.kept_intervals;
  const points = view.points;
  const of = (field) => points.map((p) => [p.seconds_ago, p[field]]);
  document.getElementById("chart-rate").dataset.points = String(points.length);
  chart("chart-rate", window, [
    { name: "reads", colour: "#2e86c1", values: of("reads_per_second") },
    { name: "writes", colour: "#e67e22", values: of("writes_per_second") },
  ], "/s");
  chart("chart-latency", window, [
    { name: "read p50", colour: "#2e86c1", values: of("read_p50_ms") },
    { name: "read p99", colour: "#2e86c1", dashed: true, values: of("read_p99_ms") },
    { name: "write p50", colour: "#e67e22", values: of("write_p50_ms") },
    { name: "write p99", colour: "#e67e22", dashed: true, values: of("write_p99_ms") },
  ], "ms");
}

// ---- refresh loop and token ---------------------------------------------

function showError(message) {
  const box = document.getElementById("error");
  box.hidden = message == null;
  box.textContent = message || "";
}

function askForToken(message) {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-message").textContent = message;
}

async function refresh() {
  try {
    const [node, nodes, ring, streams, hints, repair, traffic] = await Promise.all(
      ["node", "nodes", "ring", "streams", "hints", "repair", "traffic"].map(api));
    document.getElementById("token-form").hidden = true;
    renderNode(node);
    renderNodes(nodes);
    renderRing(ring, nodes);
    renderStreams(streams);
    renderHints(hints);
    renderRepair(repair);
    renderTraffic(traffic);
    showError(null);
    refreshes++;
    const status = document.getElementById("refresh");
    status.dataset.refreshes = String(refreshes);
    status.textContent = `refreshed ${new Date().toLocaleTimeString()} (every ${REFRESH_MS / 1000} s)`;
  } catch (error) {
    if (error instanceof Unauthorized) {
      askForToken(sessionStorage.getItem(TOKEN_KEY) ? "That token was refused." : "");
    } else {
      showError(`Cannot reach the node's API: ${error.message}`);
    }
  }
  setTimeout(refresh, REFRESH_MS);
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = document.getElementById("token-input").value.trim();
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("token-message").textContent = "checking…";
});

refresh();
