// Hangar console: time plots, drawn by hand as SVG (no library, no build
// step). A plot is a <figure>: a title, the SVG (an image whose label says
// what it shows and the latest values), and a legend that names each
// series with its latest value. Colours and dashes are CSS classes
// (console.css): the console's Content-Security-Policy allows no inline
// style.

import { h } from "./ui.js";

const NS = "http://www.w3.org/2000/svg";
/** The SVG's coordinate box and the margins around the drawing area. */
const W = 640;
const H = 190;
const LEFT = 70;
const RIGHT = 12;
const TOP = 10;
const BOTTOM = 24;
/** Colour classes (c0…c7 in console.css). */
const COLOURS = 8;

function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c !== undefined && c !== null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * The smallest of 1, 2, 4, 6, 8 × a power of ten that is at least `x`:
 * a quarter of it, one grid step, is a round number too.
 */
function niceCeil(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 4, 6, 8, 10]) if (m * p >= x * (1 - 1e-9)) return m * p;
  return 10 * p;
}

/** Seconds between two labelled times, for about five labels over `span`. */
function timeStep(span) {
  for (const s of [30, 60, 120, 300, 600, 900, 1800, 3600]) if (span / s <= 6) return s;
  return 7200;
}

function clock(t) {
  return new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/**
 * The path of `points` ([t, v] pairs, oldest first) in drawing
 * coordinates, broken where more than `gap` seconds pass between two
 * points (a node that was down, or restarted).
 */
function pathOf(points, x, y, gap) {
  let d = "";
  let prev = null;
  for (const [t, v] of points) {
    const cmd = prev === null || t - prev > gap ? "M" : "L";
    d += `${cmd}${x(t).toFixed(1)} ${y(v).toFixed(1)} `;
    prev = t;
  }
  return d.trim();
}

/**
 * A plot of series over time.
 *
 * - `id`: names the figure (`data-plot`), for tests and links.
 * - `title`: the heading; `format(v)`: a value as text (axis, legend).
 * - `start`, `end`: the window drawn, Unix seconds; `interval`: seconds
 *   between points (a longer gap breaks a line).
 * - `series`: `{name, points: [[t, v]…], colour, dashed, missing, node}`;
 *   a series with `missing` (why it has no points, such as a node that is
 *   down) is named in the legend with the reason and not drawn; `node`
 *   (a node id) marks its legend entry.
 * - `lines`: horizontal limits `{name, value}` (quotas), drawn dashed.
 */
export function plot({ id, title, format, start, end, interval, series, lines = [] }) {
  const drawn = series.filter((s) => !s.missing && s.points.length);
  const values = drawn.flatMap((s) => s.points.map((p) => p[1]));
  const top = niceCeil(Math.max(0, ...values, ...lines.map((l) => l.value)));
  const span = Math.max(1, end - start);
  const x = (t) => LEFT + ((t - start) / span) * (W - LEFT - RIGHT);
  const y = (v) => TOP + (1 - v / top) * (H - TOP - BOTTOM);
  const grid = [];
  for (let i = 0; i <= 4; i += 1) {
    const v = (top * i) / 4;
    grid.push(svg("line", { class: "grid", x1: LEFT, x2: W - RIGHT, y1: y(v), y2: y(v) }),
      svg("text", { class: "tick", x: LEFT - 6, y: y(v) + 4, "text-anchor": "end" }, format(v)));
  }
  const step = timeStep(span);
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) {
    grid.push(svg("line", { class: "grid", x1: x(t), x2: x(t), y1: TOP, y2: H - BOTTOM }));
    // A label that would run off the drawing is left out, not its line.
    if (x(t) > LEFT + 24 && x(t) < W - RIGHT - 24) {
      grid.push(svg("text", { class: "tick", x: x(t), y: H - 6, "text-anchor": "middle" }, clock(t)));
    }
  }
  const marks = drawn.map((s) => {
    const cls = `series c${s.colour % COLOURS}${s.dashed ? " dashed" : ""}`;
    if (s.points.length === 1) {
      const [[t, v]] = s.points;
      return svg("circle", { class: `${cls} dot`, cx: x(t), cy: y(v), r: 2.5, "data-series": s.name, "data-points": 1 });
    }
    return svg("path", { class: cls, d: pathOf(s.points, x, y, interval * 2.5), "data-series": s.name, "data-points": s.points.length });
  });
  const limits = lines.map((l) => [
    svg("line", { class: "limit", x1: LEFT, x2: W - RIGHT, y1: y(l.value), y2: y(l.value), "data-limit": l.name }),
    // The label goes under a line drawn at the top of the plot.
    svg("text", { class: "tick limit-label", x: W - RIGHT - 4, y: y(l.value) < TOP + 14 ? y(l.value) + 13 : y(l.value) - 4, "text-anchor": "end" },
      `${l.name} ${format(l.value)}`),
  ]);
  const latest = (s) => s.points[s.points.length - 1];
  const summary = drawn.map((s) => `${s.name} ${format(latest(s)[1])}`).join(", ");
  const titleId = `plot-${id}-title`;
  const image = svg("svg", {
    viewBox: `0 0 ${W} ${H}`, role: "img", class: "plot-area",
    "aria-label": `${title}, last ${Math.round(span / 60)} minutes${summary ? `; now ${summary}` : ": no data yet"}`,
  }, svg("line", { class: "axis", x1: LEFT, x2: W - RIGHT, y1: H - BOTTOM, y2: H - BOTTOM }), grid, limits, marks);
  const legend = h("ul", { class: "legend" }, series.map((s) => h("li", {
    class: s.missing ? "missing" : undefined,
    "data-series": s.name,
    "data-node": s.node,
  },
  h("span", { class: `swatch c${s.colour % COLOURS}${s.dashed ? " dashed" : ""}`, "aria-hidden": "true" }),
  s.name, " ",
  s.missing ? h("span", { class: "badge down" }, s.missing)
    : h("span", { class: "muted" }, s.points.length ? format(latest(s)[1]) : "no data yet"))),
  lines.map((l) => h("li", { "data-limit": l.name },
    h("span", { class: "swatch limit", "aria-hidden": "true" }), `${l.name} ${format(l.value)}`)));
  const last = Math.max(0, ...drawn.map((s) => latest(s)[0]));
  return h("figure", { class: "plot", "data-plot": id, "data-last": last, "aria-labelledby": titleId },
    h("figcaption", { id: titleId }, title), image, legend);
}

/** `n` per second as text: "12.3/s". */
export function perSecond(n) {
  if (n === 0) return "0/s";
  if (n < 10) return `${n.toFixed(2)}/s`;
  if (n < 1000) return `${n.toFixed(1)}/s`;
  return `${(n / 1000).toFixed(1)}k/s`;
}

/** A duration in seconds as text: "350 µs", "12 ms", "1.2 s". */
export function latency(secs) {
  if (secs === 0) return "0";
  if (secs < 0.001) return `${Math.round(secs * 1e6)} µs`;
  if (secs < 1) return `${(secs * 1000).toFixed(secs < 0.01 ? 1 : 0)} ms`;
  return `${secs.toFixed(1)} s`;
}

/** A count as text: "950", "12.5k", "3.1M". */
export function count(n) {
  if (n < 1000) return String(Math.round(n * 100) / 100);
  if (n < 1e6) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

/** Time left as text: "45 s", "12 min", "3.5 h". */
export function timeLeft(secs) {
  if (secs === null || secs === undefined) return "—";
  if (secs < 90) return `${Math.round(secs)} s`;
  if (secs < 5400) return `${Math.round(secs / 60)} min`;
  return `${(secs / 3600).toFixed(1)} h`;
}
