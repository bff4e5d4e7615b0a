// Hangar console: the helpers every page uses — the session's token, the
// admin API call, DOM building (text only: data never becomes markup) and
// formatting.

const TOKEN = "hangar-console-token";

export const session = {
  get token() { return sessionStorage.getItem(TOKEN); },
  set token(t) {
    if (t) sessionStorage.setItem(TOKEN, t); else sessionStorage.removeItem(TOKEN);
  },
};

/**
 * An admin API call failed: `status` is the HTTP status, `code` the API's;
 * `loggedOut` when the token itself is no good (not merely too narrow for
 * a change), so the console asks for another.
 */
export class ApiError extends Error {
  constructor(status, code, message, loggedOut = false) {
    super(message);
    this.status = status;
    this.code = code;
    this.loggedOut = loggedOut;
  }
}

function refusal(status) {
  if (status === 401) return "No token was sent.";
  return "The token was refused (wrong token, or a read-only token for a change).";
}

/** Calls `/v2/<op>`: a GET with `fields` as the query, or a POST with them as JSON. */
export async function api(op, fields = {}, { post = false } = {}) {
  const headers = { Authorization: `Bearer ${session.token}` };
  let url = `/v2/${op}`;
  const init = { method: post ? "POST" : "GET", headers, cache: "no-store" };
  if (post) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(fields);
  } else {
    const q = new URLSearchParams(fields).toString();
    if (q) url += `?${q}`;
  }
  const resp = await fetch(url, init);
  if (resp.status === 401 || (resp.status === 403 && !resp.headers.get("content-type"))) {
    // A read-only token is refused the POST routes only.
    throw new ApiError(resp.status, "Refused", refusal(resp.status), resp.status === 401 || !post);
  }
  const body = await resp.json().catch(() => null);
  if (!resp.ok) {
    throw new ApiError(resp.status, body?.code ?? "Error", body?.message ?? `HTTP ${resp.status}`);
  }
  return body;
}

/** `h("button", {type: "button", onclick: f}, "Text", child…)`: an element. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

let fieldSeq = 0;

/** A labelled input: `field("Name", {name: "name", required: true})`. */
export function field(label, attrs = {}) {
  const id = attrs.id ?? `f${++fieldSeq}`;
  const input = h(attrs.options ? "select" : "input", { ...attrs, id, options: undefined });
  for (const o of attrs.options ?? []) {
    const [value, text] = Array.isArray(o) ? o : [o, o];
    input.append(h("option", { value }, text));
  }
  const cls = attrs.type === "checkbox" ? "check" : undefined;
  return attrs.type === "checkbox"
    ? h("label", { for: id, class: cls }, input, label)
    : h("label", { for: id }, label, input);
}

/** A table: `columns` are header texts (a leading "#" marks a number column). */
export function table(caption, columns, rows, empty = "None.", rowClasses = []) {
  if (!rows.length) return h("p", { class: "muted" }, `${caption}: ${empty}`);
  const num = columns.map((c) => c.startsWith("#"));
  return h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, columns.map((c, i) =>
      h("th", { scope: "col", class: num[i] ? "num" : undefined }, num[i] ? c.slice(1) : c)))),
    h("tbody", {}, rows.map((r, j) => h("tr", { class: rowClasses[j] || undefined }, r.map((cell, i) =>
      h(i === 0 ? "th" : "td", { scope: i === 0 ? "row" : undefined, class: num[i] ? "num" : undefined }, cell))))));
}

export function badge(text, kind = text) {
  return h("span", { class: `badge ${kind}` }, text);
}

/** Says `msg` in the status line (read out by screen readers). */
export function say(msg) {
  const s = document.getElementById("status");
  s.textContent = msg;
  clearTimeout(say.timer);
  say.timer = setTimeout(() => { s.textContent = ""; }, 4000);
}

/** An error line that a form shows under itself. */
export function errorLine() {
  return h("p", { class: "error", role: "alert" });
}

/** Runs `f`; an error goes to `line` (or the status), and the button is off meanwhile. */
export async function guarded(line, f, button) {
  if (line) line.textContent = "";
  if (button) button.disabled = true;
  try {
    return await f();
  } catch (e) {
    if (line) line.textContent = e.message; else say(e.message);
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

export function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB", "TB", "PB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
  return `${i ? v.toFixed(1) : v} ${units[i]}`;
}

/** "10G", "500 MB", "1TiB" or a number of bytes → bytes. */
export function parseBytes(s) {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?)b?\s*$/i.exec(s);
  if (!m) throw new Error(`${s} is not a size (like 100G or 1.5T)`);
  const base = m[3] ? 1024 : 1000;
  const exp = "kmgtp".indexOf(m[2].toLowerCase()) + 1;
  return Math.round(Number(m[1]) * base ** exp);
}

export function when(msec) {
  if (msec === null || msec === undefined) return "—";
  return new Date(msec).toLocaleString();
}

export function short(id) {
  return id ? `${id.slice(0, 16)}…` : "—";
}
