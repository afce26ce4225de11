// The vfl dashboard: a read-only single page over /api/* (coordinator/ui/server.py).
// Routes: #/ jobs, #/job/ID a job with its curves, #/parties, #/models. Data is put
// into the page with textContent only (names and reasons come from users).
"use strict";

const POLL_MS = 1000;
const TERMINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];
let timer = null;
let shown = 0; // the route on screen: a read begun under an earlier one draws nothing
const STALE = new Error("the page changed while it was read");
let charts = {};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

function when(t) {
  return t ? new Date(t * 1000).toLocaleString() : "-";
}

function metrics(m) {
  return Object.entries(m || {}).map(([k, v]) => `${k}=${v.toFixed(4)}`).join(", ");
}

function table(id, head, rows) {
  const t = el("table", { id });
  if (head.some((h) => h)) t.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
  for (const r of rows) t.append(r);
  return t;
}

async function api(path) {
  const route = shown;
  const resp = await fetch(path, { credentials: "same-origin" });
  if (route !== shown) throw STALE;
  if (!resp.ok) {
    let why = resp.statusText;
    try { why = (await resp.json()).error || why; } catch (e) { /* not JSON */ }
    throw new Error(`${resp.status}: ${why}`);
  }
  const body = await resp.json();
  if (route !== shown) throw STALE;
  return body;
}

function show(...nodes) {
  document.getElementById("main").replaceChildren(...nodes);
}

function status(text) {
  document.getElementById("status").textContent = text;
}

// --- jobs --------------------------------------------------------------------------

async function jobsPage() {
  const jobs = await api("/api/jobs");
  const rows = jobs.map((j) => el("tr", { "data-job": j.job, "data-state": j.state },
    el("td", {}, el("a", { href: `#/job/${encodeURIComponent(j.job)}` }, j.job)),
    el("td", { class: `state ${j.state}` }, j.state),
    el("td", {}, j.total_rounds ? `${j.round}/${j.total_rounds}` : "-"),
    el("td", {}, metrics(j.metrics)),
    el("td", {}, when(j.created_at)),
    el("td", {}, j.reason)));
  show(el("h2", {}, `Jobs (${jobs.length})`),
    table("jobs", ["job", "state", "round", "validation", "submitted", "reason"], rows));
  return true;
}

// --- one job -----------------------------------------------------------------------

const CHARTS = [
  ["loss", "loss", "round", "training loss by round"],
  ["loss-seconds", "loss", "seconds", "training loss by seconds"],
  ["validation", "validation", "round", "validation by round"],
  ["validation-seconds", "validation", "seconds", "validation by seconds"],
  ["bytes", "bytes_per_round", "round", "bytes sent per round"],
  ["updates", "local_updates_per_round", "round", "local updates per round"],
];

function chartData(series, x) {
  // one table per series ([xs, ys]), joined on x by uPlot
  const tables = series.map((s) => [s[x === "round" ? "rounds" : "seconds"], s.values]);
  return tables.length === 1 ? tables[0] : uPlot.join(tables);
}

function drawChart(box, key, series, x, title) {
  const points = series.reduce((n, s) => n + s.values.length, 0);
  box.setAttribute("data-points", String(points));
  const labels = series.map((s) => s.label).join("|");
  const old = charts[key];
  if (!points) {
    if (old) { old.plot.destroy(); delete charts[key]; }
    box.replaceChildren(el("h3", {}, title), el("div", { class: "empty" }, "no points yet"));
    return;
  }
  const data = chartData(series, x);
  if (old && old.labels === labels) {
    old.plot.setData(data);
    return;
  }
  if (old) old.plot.destroy();
  box.replaceChildren(el("h3", {}, title));
  const colors = ["#1d5fbf", "#d1495b", "#2a9d8f", "#e9a23b", "#6a4c93"];
  const opts = {
    width: 400, height: 220,
    scales: { x: { time: false } },
    axes: [{ label: x === "round" ? "round" : "seconds since submitted" }, {}],
    series: [{ label: x }, ...series.map((s, i) => ({
      label: s.label, stroke: colors[i % colors.length], width: 2, spanGaps: true,
      points: { show: true, size: 4 },
    }))],
  };
  charts[key] = { labels, plot: new uPlot(opts, data, box) };
}

function facts(job) {
  const rows = [
    ["state", job.state + (job.reason ? `: ${job.reason}` : "")],
    ["round", job.total_rounds ? `${job.round || 0}/${job.total_rounds}` : "-"],
    ["validation", metrics(job.metrics) || "-"],
    ["parties", job.parties.map((p) => `${p.id} (${p.role})`).join(", ")],
    ["submitted", when(job.created_at)],
    ["common rows (PSI)", job.intersection_size || "-"],
    ["bytes sent", job.bytes_sent || "-"],
    ["local updates", job.local_updates || "-"],
    ["seconds", job.seconds || "-"],
  ];
  return table("facts", ["", ""], rows.map(([k, v]) => el("tr", {}, el("td", {}, k),
    el("td", { class: k === "state" ? `state ${job.state}` : "" }, v))));
}

// --- the risk team's reading: evaluation and population stability ------------------

function fixed(v, digits) {
  return typeof v === "number" ? v.toFixed(digits) : "-";
}

function rowsOf(cells) {
  return el("tr", {}, ...cells.map((c) => el("td", {}, c)));
}

function evaluationPart(e) {
  if (!e) return [];
  const lift = e.lift.map((b) => rowsOf([b.band, b.rows, b.events, fixed(b.event_rate, 4),
    fixed(b.cumulative_events_share, 4), fixed(b.lift, 3),
    `${b.min_score.toPrecision(4)} .. ${b.max_score.toPrecision(4)}`]));
  const calibration = e.calibration.map((c) => rowsOf([c.band, c.rows,
    fixed(c.mean_predicted, 4), fixed(c.event_rate, 4)]));
  return [
    el("h3", {}, "Evaluation"),
    el("p", { id: "evaluation-summary" }, `KS ${fixed(e.ks, 4)}, Gini ${fixed(e.gini, 4)}, ` +
      `AUC ${fixed(e.auc, 4)} over ${e.rows} rows (${e.events} events)`),
    el("div", { class: "charts" }, el("div", { class: "chart", id: "chart-gains" }),
      el("div", { class: "chart", id: "chart-calibration" })),
    el("h4", {}, "Lift and gains (ten bands of equal rows, highest scores first)"),
    table("lift", ["band", "rows", "events", "event rate", "cumulative events", "lift",
      "scores"], lift),
    el("h4", {}, "Calibration"),
    table("calibration", ["band", "rows", "mean predicted", "event rate"], calibration),
  ];
}

function drawEvaluation(e) {
  if (!e) return;
  let share = 0;
  const xs = [0, ...e.lift.map((b) => (share += b.rows / e.rows))];
  const gains = [0, ...e.lift.map((b) => b.cumulative_events_share)];
  const plot = (id, title, data, xlabel, ylabel) => {
    const box = document.getElementById(id);
    box.replaceChildren(el("h3", {}, title));
    const opts = {
      width: 400, height: 220, scales: { x: { time: false } },
      axes: [{ label: xlabel }, { label: ylabel }],
      series: [{ label: xlabel },
        { label: "model", stroke: "#1d5fbf", width: 2, points: { show: true, size: 5 } },
        { label: "reference", stroke: "#999", dash: [4, 4], width: 1 }],
    };
    return new uPlot(opts, data, box);
  };
  const order = [...e.calibration].sort((a, b) => a.mean_predicted - b.mean_predicted);
  const means = order.map((c) => c.mean_predicted);
  plot("chart-gains", "gains", [xs, gains, xs], "share of rows", "share of events");
  plot("chart-calibration", "calibration", [means, order.map((c) => c.event_rate), means],
    "mean predicted", "event rate");
}

function stabilityPart(parties) {
  const rows = Object.entries(parties || {})
    .map(([party, s]) => {
      const shared = (s.shared || []).map((c) => `${c.column} ${fixed(c.index, 3)} (${c.level})`);
      const scores = s.scores ? `${fixed(s.scores.index, 4)} (${s.scores.level})` : "-";
      return el("tr", { "data-party": party }, ...[party, s.columns, s.watch, s.shift, scores,
        shared.join(", ") || "-"].map((c) => el("td", {}, c)));
    });
  if (!rows.length) return [];
  return [el("h3", {}, "Population stability (watch 0.1+, shift 0.25+)"),
    table("stability", ["party", "columns", "watch", "shift", "scores", "columns shared"], rows)];
}

// An analysis job (`vfl analyze`): a table per party, strongest column first.
const STRENGTH = [[0.02, "useless"], [0.1, "weak"], [0.3, "medium"], [0.5, "strong"]];

function strength(iv) {
  if (iv === undefined) return "-";
  const found = STRENGTH.find(([bound]) => iv < bound);
  return found ? found[1] : "suspicious";
}

function analysisTables(job) {
  const columns = (job.analysis && job.analysis.columns) || [];
  const parties = [...new Set(columns.map((c) => c.party))];
  return parties.flatMap((party) => {
    const mine = columns.filter((c) => c.party === party)
      .sort((a, b) => (b.iv ?? 0) - (a.iv ?? 0));
    const rows = mine.map((c) => el("tr", { "data-column": c.column },
      el("td", {}, c.column),
      el("td", {}, c.iv === undefined ? "-" : c.iv.toFixed(4)),
      el("td", {}, strength(c.iv)),
      el("td", {}, (c.events || []).length || "-"),
      el("td", {}, c.selected === undefined ? "" : c.selected ? "yes" : "no"),
      el("td", {}, c.note || "")));
    return [el("h3", {}, `WOE and IV: ${party}`),
      table(`analysis-${party}`, ["column", "IV", "strength", "bins", "kept", "note"], rows)];
  });
}

async function jobPage(jobId, first) {
  const job = await api(`/api/jobs/${encodeURIComponent(jobId)}`);
  if (first) {
    charts = {};
    const boxes = CHARTS.map(([key]) => el("div", { class: "chart", id: `chart-${key}` }));
    show(el("h2", { id: "job-title", "data-state": job.state }, `Job ${job.job}`),
      el("div", { id: "facts" }), el("div", { id: "reading" }), el("div", { id: "analysis" }),
      el("div", { class: "charts" }, ...boxes),
      el("h3", {}, "Spec"), el("pre", { id: "spec" }, job.spec_yaml));
  }
  document.getElementById("job-title").setAttribute("data-state", job.state);
  document.getElementById("facts").replaceChildren(facts(job));
  const reading = document.getElementById("reading");
  const drawn = JSON.stringify([job.evaluation || null, job.stability || null]);
  if (reading.dataset.drawn !== drawn) { // parties report apart: redraw as each part arrives
    reading.dataset.drawn = drawn;
    reading.replaceChildren(...evaluationPart(job.evaluation), ...stabilityPart(job.stability));
    drawEvaluation(job.evaluation);
  }
  document.getElementById("analysis").replaceChildren(...analysisTables(job));
  for (const [key, name, x, title] of CHARTS) {
    drawChart(document.getElementById(`chart-${key}`), key, job.curves[name], x, title);
  }
  return !TERMINAL.includes(job.state); // keep polling while it runs
}

// --- parties and models ------------------------------------------------------------

async function partiesPage() {
  const parties = await api("/api/parties");
  const rows = parties.map((p) => el("tr", { "data-party": p.party },
    el("td", {}, p.party), el("td", {}, p.address),
    el("td", { class: `state ${p.health.replace(" ", "-")}` }, p.health),
    el("td", {}, `${when(p.last_contact)} (${p.seconds_since_contact} s ago)`),
    el("td", {}, p.running_jobs.join(", ")), el("td", {}, p.datasets.join(", ")),
    el("td", {}, p.problem)));
  show(el("h2", {}, `Parties (${parties.length})`), table("parties",
    ["party", "address", "health", "last contact", "running jobs", "datasets", "problem"], rows));
  return true;
}

async function modelsPage() {
  const models = await api("/api/models");
  const rows = models.map((m) => el("tr", { "data-model": m.model_id },
    el("td", {}, m.model_id), el("td", { class: `state ${m.state}` }, m.state),
    el("td", {}, m.protocol), el("td", {}, metrics(m.metrics)),
    el("td", {}, m.holders.join(", ")), el("td", {}, m.unreachable.join(", ")),
    el("td", {}, when(m.created_at))));
  show(el("h2", {}, `Models (${models.length})`), table("models",
    ["model", "state", "protocol", "validation", "held by", "unreachable", "trained"], rows));
  return true;
}

// --- routing -----------------------------------------------------------------------

function route() {
  clearTimeout(timer);
  const mine = ++shown;
  const hash = location.hash || "#/";
  for (const a of document.querySelectorAll("nav a")) {
    a.classList.toggle("here", a.getAttribute("href") === hash);
  }
  let page;
  let every = POLL_MS * 2;
  if (hash.startsWith("#/job/")) {
    const id = decodeURIComponent(hash.slice("#/job/".length));
    let first = true;
    page = async () => { const going = await jobPage(id, first); first = false; return going; };
    every = POLL_MS;
  } else if (hash === "#/parties") {
    page = partiesPage; every = POLL_MS * 5;
  } else if (hash === "#/models") {
    page = modelsPage; every = POLL_MS * 10;
  } else {
    page = jobsPage;
  }
  const tick = async () => {
    let again = true;
    try {
      again = await page();
      status(`updated ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (e === STALE || mine !== shown) return; // another page is on screen: its loop polls
      status(`cannot read the coordinator: ${e.message}`);
    }
    if (again && mine === shown) timer = setTimeout(tick, every);
  };
  tick();
}

window.addEventListener("hashchange", route);
route();
