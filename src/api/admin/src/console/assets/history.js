// Hangar console: the plots of the cluster, workers and bucket pages,
// drawn from the admin API's history answers (GetClusterHistory,
// GetBucketHistory; doc/console.md). Each node keeps its own last hour;
// the node serving the console asks the others, and a node that does not
// answer is named as such in every legend.

import { api, h, bytes, short, table } from "./ui.js";
import { plot, perSecond, latency, count, timeLeft } from "./plot.js";

/** The windows a user can pick, in seconds; the choice lasts the session. */
const WINDOWS = [[300, "5 minutes"], [900, "15 minutes"], [3600, "1 hour"]];
let chosen = 900;

/** The window picker of the cluster page. */
export function windowPicker() {
  const id = "plot-window";
  const select = h("select", { id, onchange: (ev) => {
    chosen = Number(ev.currentTarget.value);
    ev.currentTarget.blur();
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } }, WINDOWS.map(([secs, text]) => h("option", { value: secs, selected: secs === chosen }, text)));
  return h("label", { for: id, class: "inline" }, "Plots show the last ", select);
}

/**
 * A node's name in legends: its host name, with the start of its id when
 * several nodes share the host (a test cluster on one machine).
 */
function namer(nodes) {
  const hosts = new Map();
  for (const n of nodes) hosts.set(n.hostname, (hosts.get(n.hostname) ?? 0) + 1);
  return (n) => {
    const base = !n.hostname ? short(n.id) : hosts.get(n.hostname) > 1 ? `${n.hostname} ${n.id.slice(0, 8)}` : n.hostname;
    return `${base}${n.is_self ? " (this node)" : ""}`;
  };
}

/** Why a node has no history, in a word or two. */
function missing(n) {
  if (n.history) return null;
  if (!n.is_up) return "down";
  return "no answer";
}

/** The window drawn: it ends at the newest point any node has. */
function span(hist) {
  const ts = hist.nodes.flatMap((n) => n.history?.points.map((p) => p.t) ?? []);
  const end = ts.length ? Math.max(...ts) : Math.floor(Date.now() / 1000);
  return { start: end - hist.window_secs, end };
}

/** One series per node of `value(point)`; `null` values are left out. */
function perNode(hist, value, extra = {}) {
  const nodeName = namer(hist.nodes);
  return hist.nodes.map((n, i) => ({
    name: `${nodeName(n)}${extra.suffix ?? ""}`,
    node: n.id,
    colour: i,
    dashed: extra.dashed,
    missing: missing(n),
    points: (n.history?.points ?? []).flatMap((p) => {
      const v = value(p);
      return v === null || v === undefined ? [] : [[p.t, v]];
    }),
  }));
}

/**
 * Per operation, the slowest node's p50 and p99 at each point: one node
 * slow is what an operator looks for, and averaging percentiles of
 * different nodes would give a number no request saw.
 */
function latencySeries(hist) {
  const rates = new Map();
  const byOp = new Map();
  for (const n of hist.nodes) {
    for (const p of n.history?.points ?? []) {
      for (const l of p.latency) {
        if (!(l.rate > 0)) continue;
        rates.set(l.op, (rates.get(l.op) ?? 0) + l.rate);
        const at = byOp.get(l.op) ?? new Map();
        const [p50, p99] = at.get(p.t) ?? [0, 0];
        at.set(p.t, [Math.max(p50, l.p50_secs), Math.max(p99, l.p99_secs)]);
        byOp.set(l.op, at);
      }
    }
  }
  // The busiest operations only: more lines than colours are unreadable.
  const ops = [...rates.entries()].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([op]) => op).sort();
  return ops.flatMap((op, i) => {
    const at = [...byOp.get(op).entries()].sort((a, b) => a[0] - b[0]);
    return [
      { name: `${op} p99`, colour: i, points: at.map(([t, [, p99]]) => [t, p99]) },
      { name: `${op} p50`, colour: i, dashed: true, points: at.map(([t, [p50]]) => [t, p50]) },
    ];
  });
}

/** The cluster page's plots. */
export async function clusterPlots() {
  const hist = await api("GetClusterHistory", { window_secs: chosen });
  const w = span(hist);
  const interval = hist.nodes.find((n) => n.history)?.history.interval_secs ?? 5;
  const common = { ...w, interval };
  const used = (p) => (p.data_total === null || p.data_avail === null ? null : p.data_total - p.data_avail);
  const lat = latencySeries(hist);
  return h("div", { class: "plots", id: "cluster-plots" },
    plot({ ...common, id: "requests", title: "S3 requests per second, per node", format: perSecond,
      series: perNode(hist, (p) => p.requests) }),
    plot({ ...common, id: "bytes", title: "Bytes per second received (solid) and sent (dashed), per node",
      format: (v) => `${bytes(v)}/s`,
      series: [...perNode(hist, (p) => p.bytes_in, { suffix: " in" }),
        ...perNode(hist, (p) => p.bytes_out, { suffix: " out", dashed: true })] }),
    plot({ ...common, id: "latency", title: "Latency per operation: p99 (solid) and p50 (dashed), slowest node",
      format: latency,
      series: lat.length ? lat : [{ name: "no requests in this window", colour: 0, points: [] }] }),
    plot({ ...common, id: "errors", title: "Error answers (solid) and SlowDown refusals (dashed) per second, per node",
      format: perSecond,
      series: [...perNode(hist, (p) => p.errors, { suffix: " errors" }),
        ...perNode(hist, (p) => p.slowdowns, { suffix: " SlowDown", dashed: true })] }),
    plot({ ...common, id: "disk", title: "Data disk used (solid) and free (dashed), per node", format: bytes,
      series: [...perNode(hist, used, { suffix: " used" }),
        ...perNode(hist, (p) => p.data_avail, { suffix: " free", dashed: true })] }));
}

function taskText(t) {
  if (t.unit === "pass") return `${Math.round((t.remaining ?? 0) * 100)} % of the pass`;
  return `${count(t.remaining ?? 0)} ${t.unit}`;
}

function rateText(t) {
  if (t.unit === "pass") return `${(t.rate * 6000).toFixed(1)} %/min`;
  return `${perSecond(t.rate).replace("/s", "")} ${t.unit}/s`;
}

function bar(t, node) {
  const label = `${t.name} on ${node}`;
  if (t.done === null || t.done === undefined) return h("span", { class: "muted" }, "—");
  const pct = Math.round(t.done * 1000) / 10;
  return h("span", {}, h("progress", { max: 100, value: pct, "aria-label": `${label}: progress` }), ` ${pct} %`);
}

/** The workers page's long tasks of every node, with progress, rate and time left. */
export async function taskTable() {
  const hist = await api("GetClusterHistory", { window_secs: 300 });
  const rows = [];
  const classes = [];
  const nodeName = namer(hist.nodes);
  for (const n of hist.nodes) {
    const name = nodeName(n);
    if (!n.history) {
      rows.push([name, h("span", { class: "badge down" }, missing(n)), "—", "—", "—", "—"]);
      classes.push("down-row");
      continue;
    }
    for (const t of n.history.tasks) {
      const left = t.remaining === 0 ? "done" : timeLeft(t.eta_secs);
      rows.push([name, t.name, bar(t, name), taskText(t), rateText(t), left]);
      classes.push("");
    }
  }
  return h("div", { id: "tasks" }, table("Long tasks in the cluster (last 5 minutes)",
    ["Node", "Task", "Progress", "Left", "Rate", "Time left"], rows, "none under way on any node", classes));
}

/** The bucket page's plots: stored bytes and objects, with the quotas. */
export async function bucketPlots(name) {
  const b = await api("GetBucketHistory", { name });
  const ts = b.points.map((p) => p.t);
  const end = ts.length ? Math.max(...ts) : Math.floor(Date.now() / 1000);
  const common = { start: end - 3600, end, interval: b.interval_secs };
  const of = (f) => b.points.map((p) => [p.t, f(p)]);
  return h("div", { class: "plots", id: "bucket-plots" },
    plot({ ...common, id: "bucket-bytes", title: "Bytes stored", format: bytes,
      series: [{ name: "bytes", colour: 0, points: of((p) => p.bytes) }],
      lines: b.max_size === null ? [] : [{ name: "quota", value: b.max_size }] }),
    plot({ ...common, id: "bucket-objects", title: "Objects stored", format: count,
      series: [{ name: "objects", colour: 1, points: of((p) => p.objects) }],
      lines: b.max_objects === null ? [] : [{ name: "quota", value: b.max_objects }] }));
}

/**
 * A part of a page that redraws itself every `every` ms while it is on
 * screen and live pages are refreshed (the header's checkbox), without
 * redrawing the page around it (its forms keep what the user typed).
 */
export function live(draw, every) {
  const box = h("div", { class: "live" }, h("p", { class: "muted" }, "Loading…"));
  const once = async () => {
    try {
      box.replaceChildren(await draw());
    } catch (e) {
      box.replaceChildren(h("p", { class: "error", role: "alert" }, e.message));
    }
  };
  once();
  const timer = setInterval(() => {
    if (!box.isConnected) return clearInterval(timer);
    if (document.getElementById("auto-refresh").checked) once();
  }, every);
  return box;
}
