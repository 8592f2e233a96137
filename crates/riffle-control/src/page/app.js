// The job's web page: polls the REST API and draws the graph, the operators, the
// checkpoint history, savepoints and recovery records. Plain JavaScript, no library:
// the page is served by the job itself and must work offline.
"use strict";

const NS = "http://www.w3.org/2000/svg";
const state = { previous: new Map(), token: null };

// The token arrives in the URL's fragment (never sent to a server, never logged) and is
// kept for this tab only.
function readToken() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("riffle-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  state.token = sessionStorage.getItem("riffle-token");
  document.getElementById("token-field").hidden = Boolean(state.token);
}

function headers() {
  const token = state.token || document.getElementById("token").value.trim();
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(), cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new Error(body.error || response.status + " " + response.statusText);
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:")
    ? document.createElementNS(NS, tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.setAttribute("class", v);
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node.setAttribute(k, v);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const count = (n) => (n == null ? "–" : Math.round(n).toLocaleString("en-US"));
const bytes = (n) => {
  if (n == null) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
};
const millis = (ms) => (ms == null ? "–" : ms < 1000 ? ms.toFixed(0) + " ms" : (ms / 1000).toFixed(2) + " s");
const lag = (ms) => {
  if (ms == null) return "–";
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  if (s < 172800) return (s / 3600).toFixed(1) + " h";
  return (s / 86400).toFixed(0) + " d";
};
const utc = (ms) => (ms == null ? "–" : new Date(ms).toISOString().replace("T", " ").replace("Z", ""));

// Rates from the previous poll of the same operator.
function rates(op, now) {
  const before = state.previous.get(op.id);
  state.previous.set(op.id, { at: now, rows_in: op.rows_in, rows_out: op.rows_out, blocked_ms: op.blocked_ms });
  if (!before || now <= before.at) return { in: null, out: null, blocked: 0 };
  const seconds = (now - before.at) / 1000;
  const parallelism = Math.max(1, op.parallelism);
  return {
    in: Math.max(0, op.rows_in - before.rows_in) / seconds,
    out: Math.max(0, op.rows_out - before.rows_out) / seconds,
    // Share of wall time its subtasks were blocked, averaged over them.
    blocked: Math.min(1, Math.max(0, op.blocked_ms - before.blocked_ms) / (seconds * 1000 * parallelism)),
  };
}

function drawGraph(operators, rateOf) {
  const svg = document.getElementById("graph");
  svg.replaceChildren();
  const depth = new Map();
  const depthOf = (op) => {
    if (depth.has(op.id)) return depth.get(op.id);
    depth.set(op.id, 0);
    const ups = op.inputs.map((i) => operators.find((o) => o.id === i.from)).filter(Boolean);
    const d = ups.length ? 1 + Math.max(...ups.map(depthOf)) : 0;
    depth.set(op.id, d);
    return d;
  };
  operators.forEach(depthOf);
  const columns = [];
  for (const op of operators) {
    const d = depth.get(op.id);
    (columns[d] = columns[d] || []).push(op);
  }
  const [w, h, gapX, gapY] = [190, 58, 70, 22];
  const place = new Map();
  columns.forEach((column, x) =>
    column.forEach((op, y) => place.set(op.id, { x: 10 + x * (w + gapX), y: 10 + y * (h + gapY) })));
  const rowsUsed = Math.max(...columns.map((c) => c.length));
  svg.setAttribute("viewBox", `0 0 ${20 + columns.length * (w + gapX)} ${20 + rowsUsed * (h + gapY)}`);
  svg.setAttribute("height", String(20 + rowsUsed * (h + gapY)));
  svg.append(el("svg:defs", {}, el("svg:marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto" },
    el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#8a94a6" }))));
  for (const op of operators) {
    const to = place.get(op.id);
    for (const input of op.inputs) {
      const from = place.get(input.from);
      if (!from) continue;
      const [x1, y1, x2, y2] = [from.x + w, from.y + h / 2, to.x, to.y + h / 2];
      svg.append(el("svg:path", { class: "edge", d: `M${x1},${y1} C${x1 + 30},${y1} ${x2 - 30},${y2} ${x2},${y2}` }));
      svg.append(el("svg:text", { x: String((x1 + x2) / 2 - 20), y: String((y1 + y2) / 2 - 4), fill: "#5b6577" }, input.exchange));
    }
  }
  for (const op of operators) {
    const p = place.get(op.id);
    const r = rateOf.get(op.id);
    const blocked = r && r.blocked > 0.5;
    svg.append(el("svg:g", { class: "node" + (blocked ? " blocked" : ""), "data-operator": op.id },
      el("svg:rect", { x: String(p.x), y: String(p.y), width: String(w), height: String(h), rx: "5" }),
      el("svg:text", { x: String(p.x + 8), y: String(p.y + 18), "font-weight": "600" }, `${op.id} ×${op.parallelism}`),
      el("svg:text", { x: String(p.x + 8), y: String(p.y + 35) }, `${op.kind} · ${r && r.out != null ? count(op.kind === "sink" ? r.in : r.out) + " rows/s" : "…"}`),
      el("svg:text", { x: String(p.x + 8), y: String(p.y + 51), fill: "#5b6577" }, `blocked ${r ? (100 * r.blocked).toFixed(0) : 0}%`)));
  }
}

function drawOperators(job) {
  const now = Date.now();
  const rateOf = new Map(job.operators.map((op) => [op.id, rates(op, now)]));
  const body = document.querySelector("#operators tbody");
  body.replaceChildren(...job.operators.map((op) => {
    const r = rateOf.get(op.id);
    const lags = op.subtasks.map((s) => s.watermark_lag_ms).filter((v) => v != null);
    return el("tr", { "data-operator": op.id, class: r.blocked > 0.5 ? "blocked" : "" },
      el("td", {}, op.id), el("td", {}, op.kind), el("td", {}, op.parallelism),
      el("td", { class: "rate-in" }, count(r.in)), el("td", { class: "rate-out" }, count(r.out)),
      el("td", { class: "rows-out" }, count(op.rows_out)), el("td", {}, utc(op.watermark_ms)),
      el("td", {}, lag(lags.length ? Math.max(...lags) : null)),
      el("td", {}, (100 * r.blocked).toFixed(0) + "%"),
      el("td", {}, count(op.state_rows)), el("td", {}, bytes(op.state_bytes)));
  }));
  drawGraph(job.operators, rateOf);
  document.getElementById("pipeline").textContent = job.pipeline;
  const c = job.checkpoints;
  document.getElementById("summary").textContent =
    `${count(job.source_rows)} rows read · ${count(job.sink_rows)} rows written · ` +
    `${c.committed} checkpoints, ${c.failed} failed` +
    (c.last_epoch != null ? ` · last epoch ${c.last_epoch} in ${millis(c.last_duration_ms)}` : "") +
    ` · ${job.restarts} restarts`;
}

function drawCheckpoints(data) {
  const history = data.history.slice(-60);
  const svg = document.getElementById("chart");
  svg.replaceChildren();
  const [width, height] = [900, 140];
  svg.setAttribute("viewBox", `0 0 ${width} ${height + 20}`);
  svg.setAttribute("height", String(height + 20));
  const maxMs = Math.max(1, ...history.map((r) => r.duration_ms || 0));
  const maxBytes = Math.max(1, ...history.map((r) => r.bytes || 0));
  const step = width / Math.max(history.length, 1);
  const points = [];
  history.forEach((r, i) => {
    const failed = r.status !== "completed";
    const barHeight = failed ? height : Math.max(2, (height * (r.duration_ms || 0)) / maxMs);
    const bar = el("svg:rect", { class: "bar" + (failed ? " failed" : ""), "data-epoch": String(r.epoch),
      x: String(i * step + 1), y: String(height - barHeight), width: String(Math.max(1, step - 2)), height: String(barHeight) });
    bar.append(el("svg:title", {}, `epoch ${r.epoch}: ${failed ? "failed: " + r.failure : millis(r.duration_ms) + ", " + bytes(r.bytes)}`));
    svg.append(bar);
    if (!failed) points.push(`${i * step + step / 2},${height - (height * (r.bytes || 0)) / maxBytes}`);
  });
  if (points.length > 1) svg.append(el("svg:polyline", { class: "size", points: points.join(" ") }));
  svg.append(el("svg:text", { x: "0", y: String(height + 16), fill: "#5b6577" }, `longest ${millis(maxMs)} · largest ${bytes(maxBytes)}`));

  const body = document.querySelector("#checkpoints tbody");
  body.replaceChildren(...data.history.slice().reverse().map((r) =>
    el("tr", { class: "checkpoint" + (r.status === "completed" ? "" : " failed"), "data-epoch": String(r.epoch) },
      el("td", {}, r.epoch), el("td", {}, r.status), el("td", {}, utc(r.at_ms)),
      el("td", {}, millis(r.duration_ms)), el("td", {}, millis(r.alignment_ms)), el("td", {}, millis(r.snapshot_ms)),
      el("td", {}, millis(r.upload_ms)), el("td", {}, millis(r.commit_ms)), el("td", {}, bytes(r.bytes)),
      el("td", { class: "requests" }, requests(r.requests)), slowestTask(r.subtasks || []),
      el("td", {}, r.failure || (r.savepoint ? "savepoint " + r.savepoint : "")))));

  document.getElementById("recovery").replaceChildren(...data.recovery.map(describeRecovery));
}

// Object-store requests of one checkpoint, all phases; the split in the tooltip.
function requests(byPhase) {
  if (!byPhase) return "–";
  const total = (t) => t.put + t.get + t.head + t.list + t.delete + t.copy;
  const all = ["upload", "commit", "gc"].reduce((n, phase) => n + total(byPhase[phase]), 0);
  return String(all);
}

// The task whose alignment, snapshot and upload took longest; every task in the tooltip.
function slowestTask(tasks) {
  if (!tasks.length) return el("td", {}, "–");
  const cost = (t) => t.alignment + t.snapshot + t.upload;
  const slowest = tasks.reduce((a, b) => (cost(b) > cost(a) ? b : a));
  const cell = el("td", { class: "slowest-task" }, `${slowest.task}[${slowest.subtask}] ${millis(cost(slowest))}`);
  cell.title = tasks.map((t) =>
    `${t.task}[${t.subtask}]: align ${millis(t.alignment)}, snapshot ${millis(t.snapshot)}, upload ${millis(t.upload)}, ${bytes(t.bytes)}`).join("\n");
  return cell;
}

// One recovery record (`{state}/{pipeline}/recovery/`) in a line.
function describeRecovery(record) {
  if (typeof record !== "object" || record === null) return el("li", { class: "recovery" }, String(record));
  const parts = [utc(record.at_ms), "generation " + record.generation];
  parts.push(record.restored_epoch != null ? "restored epoch " + record.restored_epoch : "started from empty state");
  if (record.restored_from) parts.push("from " + record.restored_from);
  if (record.roll_forward) parts.push(`rolled forward (${record.recommitted} commits)`);
  if (record.aborted_staged) parts.push(`discarded ${record.aborted_staged} staged`);
  for (const [epoch, reason] of record.skipped_damaged || []) parts.push(`skipped epoch ${epoch}: ${reason}`);
  if ((record.swept_partial || []).length) parts.push("swept " + record.swept_partial.join(", "));
  for (const [epoch, reason] of record.replayed || []) parts.push(`replayed epoch ${epoch}: ${reason}`);
  if ((record.dropped_state || []).length) parts.push("dropped state of " + record.dropped_state.join(", "));
  return el("li", { class: "recovery" }, parts.join(" · "));
}

function drawSavepoints(data) {
  const body = document.querySelector("#savepoints tbody");
  body.replaceChildren(...data.savepoints.map((s) =>
    el("tr", { class: "savepoint", "data-label": s.label },
      el("td", {}, s.label), el("td", {}, s.status + (s.reason ? ": " + s.reason : "")), el("td", {}, s.epoch ?? "–"),
      el("td", {}, s.files ?? "–"), el("td", {}, bytes(s.bytes)), el("td", {}, utc(s.written_at_ms)))));
}

async function takeSavepoint(stop) {
  const result = document.getElementById("action-result");
  const label = document.getElementById("label").value.trim();
  const query = new URLSearchParams({ stop: String(stop) });
  if (label) query.set("label", label);
  result.className = "";
  result.textContent = stop ? "stopping with a savepoint…" : "taking a savepoint…";
  try {
    const done = await api("/api/savepoints?" + query, { method: "POST" });
    result.textContent = `savepoint ${done.label} at epoch ${done.epoch}: ${done.files} files, ${bytes(done.bytes)}` +
      (done.stopped ? "; the job stops" : "");
    refreshSavepoints();
  } catch (e) {
    result.className = "error";
    result.textContent = e.message;
    document.getElementById("token-field").hidden = false;
  }
}

function problem(e) {
  const box = document.getElementById("problem");
  box.hidden = !e;
  box.textContent = e ? "cannot reach the job: " + e.message : "";
}

async function refreshJob() {
  try { drawOperators(await api("/api/job")); problem(null); } catch (e) { problem(e); }
}
async function refreshCheckpoints() {
  try { drawCheckpoints(await api("/api/checkpoints")); } catch (e) { problem(e); }
}
async function refreshSavepoints() {
  try { drawSavepoints(await api("/api/savepoints")); } catch (e) { problem(e); }
}

readToken();
document.getElementById("take").addEventListener("click", () => takeSavepoint(false));
document.getElementById("stop").addEventListener("click", () => takeSavepoint(true));
refreshJob(); refreshCheckpoints(); refreshSavepoints();
setInterval(refreshJob, 1000);
setInterval(refreshCheckpoints, 2000);
setInterval(refreshSavepoints, 5000);
