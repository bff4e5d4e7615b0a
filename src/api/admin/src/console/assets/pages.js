// Hangar console: the cluster, layout, bucket, key and worker pages. Each
// page is `{title, render(arg) → Node, refresh?}`; every change goes
// through the admin API and the page is drawn again from its answer.

import { api, h, field, table, badge, say, errorLine, guarded, bytes, parseBytes, when, short } from "./ui.js";
import { clusterPlots, windowPicker, taskTable, bucketPlots, live } from "./history.js";

function redraw() {
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

/** A form whose submit runs `f(form's values)` and then redraws the page. */
function form(label, fields, submit, f, extra = {}) {
  const err = errorLine();
  const button = h("button", { type: "submit", class: extra.danger ? "danger" : undefined }, submit);
  const el = h("form", { "aria-label": label }, ...fields, button, err);
  el.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const values = Object.fromEntries(new FormData(el).entries());
    for (const c of el.querySelectorAll("input[type=checkbox]")) values[c.name] = c.checked;
    const ok = await guarded(err, () => f(values), button);
    if (ok !== undefined) {
      say(extra.done ?? `${submit}: done.`);
      redraw();
    }
  });
  return el;
}

function action(text, f, { danger = false, confirmText = null, label = text } = {}) {
  return h("button", {
    type: "button",
    class: danger ? "danger" : "secondary",
    "aria-label": label,
    onclick: async (ev) => {
      if (confirmText && !confirm(confirmText)) return;
      const ok = await guarded(null, f, ev.currentTarget);
      if (ok !== undefined) { say(`${label}: done.`); redraw(); }
    },
  }, text);
}

function nodeState(p) {
  return p.is_up ? badge("up") : badge("down");
}

/** How long ago a peer was last heard from (`last_seen_msec` is a Unix time). */
function seen(p) {
  if (p.is_self) return "now";
  if (p.last_seen_msec === null || p.last_seen_msec === undefined) return "never";
  const s = Math.max(0, Math.round((Date.now() - p.last_seen_msec) / 1000));
  return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : when(p.last_seen_msec);
}

function disk(d) {
  return d ? `${bytes(d.avail)} free of ${bytes(d.total)}` : "—";
}

const cluster = {
  title: "Cluster",
  refresh: 5000,
  async render() {
    // The plots are drawn beside the status, and their failure (an older
    // node serving the console) does not hide it.
    const [st, plots] = await Promise.all([api("GetClusterStatus"),
      clusterPlots().catch((e) => h("p", { class: "error", role: "alert" }, `Plots: ${e.message}`))]);
    const hl = st.health;
    const up = st.peers.filter((p) => p.is_up).length;
    return h("div", {},
      h("h1", {}, "Cluster"),
      h("dl", { class: "facts" },
        h("dt", {}, "Health"), h("dd", {}, badge(hl.status, hl.status.split(" ")[0])),
        h("dt", {}, "Nodes up"), h("dd", { id: "nodes-up" }, `${up} of ${st.peers.length}`),
        h("dt", {}, "Partitions"), h("dd", {}, `${hl.healthy} healthy, ${hl.degraded} degraded, ${hl.unavailable} unavailable (of ${hl.partitions})`),
        h("dt", {}, "Quorums"), h("dd", {}, `read ${hl.read_quorum}, write ${hl.write_quorum}, ${hl.consistency_mode} mode, replication factor ${st.replication_factor}`),
        h("dt", {}, "Layout version"), h("dd", {}, String(st.layout_version), st.staged_changes ? [" ", badge("staged changes", "staged")] : ""),
        h("dt", {}, "Answered by"), h("dd", { class: "mono" }, st.node)),
      table("Nodes", ["Node", "State", "Host", "Address", "Zone", "#Capacity", "#Partitions", "Data disk", "Last seen"],
        st.peers.map((p) => [
          h("span", { class: "mono", title: p.id }, short(p.id), p.is_self ? " (this node)" : ""),
          nodeState(p),
          p.hostname ?? "—",
          p.addr ?? "—",
          p.gateway ? `${p.zone} (gateway)` : p.zone ?? "no role",
          p.capacity === null || p.capacity === undefined ? "—" : bytes(p.capacity),
          String(p.partitions),
          disk(p.data_disk),
          seen(p),
        ]), "no nodes known", st.peers.map((p) => (p.is_up ? "" : "down-row"))),
      h("h2", {}, "Activity"), windowPicker(), plots);
  },
};

function roleText(r) {
  if (!r) return "none";
  const cap = r.capacity === null ? "gateway" : bytes(r.capacity);
  return `${r.zone}, ${cap}${r.tags.length ? `, tags ${r.tags.join(" ")}` : ""}`;
}

const layout = {
  title: "Layout",
  async render() {
    const [l, st] = await Promise.all([api("GetClusterLayout"), api("GetClusterStatus")]);
    const cur = l.current;
    const staged = l.staged.roles;
    const out = l.outcome;
    const now = new Map(cur.roles.map((r) => [r.id, r.partitions]));
    const parts = [h("h1", {}, "Layout"),
      h("dl", { class: "facts" },
        h("dt", {}, "Current version"), h("dd", {}, String(cur.version)),
        h("dt", {}, "Zone redundancy"), h("dd", {}, String(cur.zone_redundancy)),
        h("dt", {}, "Partition size"), h("dd", {}, bytes(cur.partition_size)),
        h("dt", {}, "Replication factor"), h("dd", {}, String(l.replication_factor))),
      table("Roles now", ["Node", "Zone", "#Capacity", "#Partitions", "Tags"],
        cur.roles.map((r) => [h("span", { class: "mono", title: r.id }, short(r.id)), r.gateway ? `${r.zone} (gateway)` : r.zone,
          r.capacity === null ? "gateway" : bytes(r.capacity), String(r.partitions), r.tags.join(" ") || "—"]), "no roles yet"),
      h("h2", {}, "Staged changes"),
      table("Staged roles", ["Node", "Now", "Staged"],
        staged.map((s) => [h("span", { class: "mono", title: s.node }, short(s.node)), roleText(s.current), roleText(s.staged)]),
        "nothing staged"),
      l.staged.parameters ? h("p", {}, `Zone redundancy: ${l.staged.parameters.current} → ${l.staged.parameters.staged}`) : ""];
    if (out?.error) parts.push(h("p", { class: "error", role: "alert" }, `Applying would fail: ${out.error}`));
    if (out?.ok) {
      const r = out.ok;
      parts.push(h("h2", {}, "Preview of applying"),
        h("p", { id: "moves" }, `Version ${r.version} would move ${r.moves} partition replicas; usable capacity ${bytes(r.usable_capacity)} of ${bytes(r.total_capacity)}.`),
        table("Partitions per node", ["Node", "Zone", "#Partitions now", "#After", "#Usable"],
          r.nodes.map((n) => [h("span", { class: "mono", title: n.id }, short(n.id)), n.zone,
            String(now.get(n.id) ?? 0), String(n.partitions), bytes(n.usable)])),
        h("div", { class: "row-actions" },
          action(`Apply version ${r.version}`, () => api("ApplyClusterLayout", { version: r.version }, { post: true })),
          action("Revert staged changes", () => api("RevertClusterLayout", {}, { post: true }), { danger: true, confirmText: "Drop every staged change?" })));
    }
    const nodes = st.peers.map((p) => [p.id, `${short(p.id)} ${p.hostname ?? ""}${p.is_up ? "" : " (down)"}`]);
    parts.push(h("h2", {}, "Stage a role"),
      form("Stage a role", [
        field("Node", { name: "node", options: nodes, required: true }),
        field("Zone", { name: "zone", required: true, value: "dc1" }),
        field("Capacity (like 100G)", { name: "capacity", placeholder: "100G" }),
        field("Gateway (no storage)", { name: "gateway", type: "checkbox" }),
        field("Tags (space-separated)", { name: "tags" }),
      ], "Stage role", (v) => api("AssignClusterLayoutRoles", {
        nodes: [v.node], zone: v.zone, gateway: v.gateway,
        capacity: v.gateway || !v.capacity ? undefined : parseBytes(v.capacity),
        tags: v.tags.split(/\s+/).filter(Boolean),
      }, { post: true })),
      form("Remove a role", [field("Node", { name: "node", options: nodes, required: true })],
        "Stage removal", (v) => api("RemoveClusterLayoutRole", { node: v.node }, { post: true })));
    return h("div", {}, parts);
  },
};

function permissionForm(fixed) {
  return form("Bucket permission", [
    fixed.bucket ? "" : field("Bucket", { name: "bucket", options: fixed.buckets, required: true }),
    fixed.key ? "" : field("Key", { name: "key", options: fixed.keys, required: true }),
    field("Read", { name: "read", type: "checkbox" }),
    field("Write", { name: "write", type: "checkbox" }),
    field("Owner", { name: "owner", type: "checkbox" }),
    field("Change", { name: "change", options: [["allow", "Allow"], ["deny", "Deny"]] }),
  ], "Set permission", (v) => api(v.change === "deny" ? "DenyBucketKey" : "AllowBucketKey", {
    bucket: fixed.bucket ?? v.bucket, key: fixed.key ?? v.key, read: v.read, write: v.write, owner: v.owner,
  }, { post: true }));
}

function flags(p) {
  return ["read", "write", "owner"].filter((f) => p[f]).join(", ") || "none";
}

const buckets = {
  title: "Buckets",
  async render(name) {
    if (name) return bucketDetail(name);
    const list = await api("ListBuckets");
    return h("div", {}, h("h1", {}, "Buckets"),
      form("Create a bucket", [field("Bucket name", { name: "name", required: true, id: "new-bucket" })],
        "Create bucket", (v) => api("CreateBucket", { name: v.name.trim() }, { post: true })),
      table("Buckets", ["Name", "Created", "Actions"], list.map((b) => [
        h("a", { href: `#buckets/${encodeURIComponent(b.name)}` }, b.name),
        when(b.created),
        h("div", { class: "row-actions" },
          h("a", { href: `#objects/${encodeURIComponent(b.name)}` }, "Browse"),
          action("Delete", () => api("DeleteBucket", { name: b.name }, { post: true }),
            { danger: true, label: `Delete bucket ${b.name}`, confirmText: `Delete bucket ${b.name}? It must be empty.` })),
      ]), "no buckets yet"));
  },
};

async function bucketDetail(name) {
  const [b, keys] = await Promise.all([api("GetBucketInfo", { name }), api("ListKeys")]);
  return h("div", {}, h("h1", {}, `Bucket ${b.name}`),
    h("p", {}, h("a", { href: "#buckets" }, "All buckets"), " · ", h("a", { href: `#objects/${encodeURIComponent(b.name)}` }, "Browse objects")),
    h("dl", { class: "facts" },
      h("dt", {}, "Id"), h("dd", { class: "mono" }, b.id),
      h("dt", {}, "Aliases"), h("dd", { id: "bucket-aliases" }, b.aliases.length ? b.aliases.join(", ") : "none"),
      h("dt", {}, "Created"), h("dd", {}, when(b.created)),
      h("dt", {}, "Objects"), h("dd", { id: "bucket-objects" }, String(b.objects)),
      h("dt", {}, "Size"), h("dd", {}, bytes(b.bytes)),
      h("dt", {}, "Quotas"), h("dd", { id: "bucket-quotas" }, quotaText(b.quotas)),
      h("dt", {}, "Website"), h("dd", { id: "bucket-website" }, websiteText(b.website))),
    h("h2", {}, "Usage over the last hour"),
    live(() => bucketPlots(b.name), BUCKET_REFRESH_MS),
    table("Keys with access", ["Key", "Name", "Permissions"], b.keys.map((k) => [
      h("a", { href: `#keys/${encodeURIComponent(k.access_key_id)}`, class: "mono" }, k.access_key_id), k.name || "—", flags(k)]), "no key has access"),
    h("h2", {}, "Permissions"),
    permissionForm({ bucket: b.name, keys: keys.map((k) => [k.access_key_id, `${k.name || "(no name)"} ${k.access_key_id}`]) }),
    h("h2", {}, "Quotas"),
    form("Quotas", [
      field("Max size (like 10G; empty: no limit)", { name: "max_size", id: "quota-size", value: b.quotas.max_size ?? "" }),
      field("Max objects (empty: no limit)", { name: "max_objects", id: "quota-objects", inputmode: "numeric", value: b.quotas.max_objects ?? "" }),
    ], "Set quotas", (v) => api("UpdateBucketQuotas", {
      bucket: b.name,
      max_size: v.max_size.trim() ? parseBytes(v.max_size) : undefined,
      max_objects: v.max_objects.trim() ? count(v.max_objects) : undefined,
    }, { post: true })),
    h("h2", {}, "Website"),
    form("Website", [
      field("Serve as a website", { name: "allow", type: "checkbox", id: "website-allow", checked: b.website !== null }),
      field("Index document", { name: "index_document", id: "website-index", value: b.website?.index_document ?? "index.html" }),
      field("Error document (optional)", { name: "error_document", id: "website-error", value: b.website?.error_document ?? "" }),
    ], "Save website settings", (v) => api("UpdateBucketWebsite", {
      bucket: b.name, allow: v.allow,
      index_document: v.allow ? v.index_document.trim() : undefined,
      error_document: v.allow && v.error_document.trim() ? v.error_document.trim() : undefined,
    }, { post: true })));
}

/** How often the bucket page's plots are redrawn: the usage is sampled every 30 s. */
const BUCKET_REFRESH_MS = 10000;

function quotaText(q) {
  const size = q.max_size === null ? "no size limit" : `at most ${bytes(q.max_size)}`;
  const objects = q.max_objects === null ? "no object limit"
    : `at most ${q.max_objects} object${q.max_objects === 1 ? "" : "s"}`;
  return `${size}, ${objects}`;
}

function websiteText(w) {
  if (!w) return "no";
  return `yes: index ${w.index_document ?? "—"}, error document ${w.error_document ?? "none"}`;
}

function count(s) {
  if (!/^\s*\d+\s*$/.test(s)) throw new Error(`${s} is not a number of objects`);
  return Number(s);
}

const keys = {
  title: "Keys",
  async render(id) {
    if (id) return keyDetail(id);
    const list = await api("ListKeys");
    return h("div", {}, h("h1", {}, "Keys"),
      form("Create a key", [field("Key name", { name: "name", id: "new-key" })], "Create key",
        (v) => api("CreateKey", { name: v.name.trim() }, { post: true })),
      table("Keys", ["Access key id", "Name", "Actions"], list.map((k) => [
        h("a", { href: `#keys/${encodeURIComponent(k.access_key_id)}`, class: "mono" }, k.access_key_id),
        k.name || "—",
        action("Delete", () => api("DeleteKey", { key: k.access_key_id }, { post: true }),
          { danger: true, label: `Delete key ${k.access_key_id}`, confirmText: `Delete key ${k.access_key_id}? Clients using it lose access.` }),
      ]), "no keys yet"));
  },
};

async function keyDetail(id) {
  const [k, list] = await Promise.all([api("GetKeyInfo", { key: id }), api("ListBuckets")]);
  const secret = h("code", { id: "secret", hidden: true }, k.secret_access_key);
  const reveal = h("button", { type: "button", class: "secondary", "aria-controls": "secret", "aria-expanded": "false",
    onclick: (ev) => {
      secret.hidden = !secret.hidden;
      ev.currentTarget.setAttribute("aria-expanded", String(!secret.hidden));
      ev.currentTarget.textContent = secret.hidden ? "Show secret" : "Hide secret";
    } }, "Show secret");
  return h("div", {}, h("h1", {}, `Key ${k.name || k.access_key_id}`),
    h("p", {}, h("a", { href: "#keys" }, "All keys")),
    h("dl", { class: "facts" },
      h("dt", {}, "Access key id"), h("dd", { class: "mono" }, k.access_key_id),
      h("dt", {}, "Secret key"), h("dd", {}, reveal, " ", secret),
      h("dt", {}, "Canonical user id"), h("dd", { class: "mono" }, k.canonical_id),
      h("dt", {}, "Display name"), h("dd", {}, k.display_name || "—"),
      h("dt", {}, "May create buckets"), h("dd", {}, k.allow_create_bucket ? "yes" : "no", " ",
        action(k.allow_create_bucket ? "Forbid" : "Allow", () => api("SetKeyCreateBucket", { key: k.access_key_id, allow: !k.allow_create_bucket }, { post: true }),
          { label: `${k.allow_create_bucket ? "Forbid" : "Allow"} creating buckets` }))),
    table("Buckets", ["Bucket", "Permissions"], k.buckets.map((b) => [
      h("a", { href: `#buckets/${encodeURIComponent(b.bucket)}` }, b.bucket), flags(b)]), "no bucket permissions"),
    h("h2", {}, "Permissions"),
    permissionForm({ key: k.access_key_id, buckets: list.map((b) => b.name) }));
}

function progressCell(w) {
  const m = /(\d+(?:\.\d+)?)\s*%/.exec(w.progress ?? "");
  if (!m) return w.progress || "—";
  return h("span", {}, h("progress", { max: 100, value: m[1], "aria-label": `${w.name} progress` }), ` ${w.progress}`);
}

const workers = {
  title: "Workers",
  refresh: 3000,
  async render(name) {
    if (name) return workerDetail(name);
    const [list, tasks] = await Promise.all([api("ListWorkers"),
      taskTable().catch((e) => h("p", { class: "error", role: "alert" }, `Long tasks: ${e.message}`))]);
    return h("div", {}, h("h1", {}, "Workers"),
      tasks,
      h("p", { class: "muted" }, "The background workers of the node that serves this console; each node's console shows its own."),
      table("Workers", ["Name", "State", "#Processed", "#Errors", "#Queue", "Progress", "Last error", "Updated"], list.map((w) => [
        h("a", { href: `#workers/${encodeURIComponent(w.name)}` }, w.name), badge(w.state, w.state === "busy" ? "staged" : "healthy"),
        String(w.processed), String(w.errors),
        w.queue_length === null ? "—" : String(w.queue_length), progressCell(w), w.last_error ?? "—", when(w.updated_msec)])));
  },
};

async function workerDetail(name) {
  const w = await api("GetWorkerInfo", { name });
  const settings = Object.entries(w.settings ?? {});
  const parts = [h("h1", {}, `Worker ${w.name}`), h("p", {}, h("a", { href: "#workers" }, "All workers")),
    h("dl", { class: "facts" },
      h("dt", {}, "State"), h("dd", {}, badge(w.state, w.state === "busy" ? "staged" : "healthy")),
      h("dt", {}, "Progress"), h("dd", {}, progressCell(w)),
      h("dt", {}, "Processed"), h("dd", {}, String(w.processed)),
      h("dt", {}, "Errors"), h("dd", {}, String(w.errors)),
      h("dt", {}, "Queue"), h("dd", {}, w.queue_length === null ? "—" : String(w.queue_length)),
      h("dt", {}, "Last error"), h("dd", {}, w.last_error ?? "—"),
      h("dt", {}, "Updated"), h("dd", {}, when(w.updated_msec)))];
  if (w.stats) parts.push(table("Counters", ["Counter", "#Value"], Object.entries(w.stats).map(([k, v]) => [k, String(v)])));
  if (w.scrub) {
    const sc = w.scrub;
    parts.push(h("h2", {}, "Scrub"),
      h("dl", { class: "facts" },
        h("dt", {}, "Status"), h("dd", {}, sc.status),
        h("dt", {}, "This pass"), h("dd", {}, `${sc.checked} blocks (${bytes(sc.bytes)}) checked, ${sc.corrupt} corrupt`),
        h("dt", {}, "Started"), h("dd", {}, when(sc.pass_started_msec)),
        h("dt", {}, "Last pass done"), h("dd", {}, when(sc.last_pass_done_msec))),
      h("div", { class: "row-actions" }, ["start", "pause", "resume", "cancel"].map((c) =>
        action(c[0].toUpperCase() + c.slice(1), () => api("ScrubCommand", { command: c }, { post: true }), { label: `Scrub: ${c}` }))));
  }
  if (settings.length) {
    parts.push(table("Settings", ["Setting", "Value"], settings),
      form("Change a setting", [
        field("Setting", { name: "setting", options: settings.map(([k]) => k) }),
        field("Value", { name: "value", required: true }),
      ], "Set", (v) => api("SetWorkerVariable", { setting: v.setting, value: v.value }, { post: true })));
  }
  return h("div", {}, parts);
}

export const pages = { cluster, layout, buckets, keys, workers };
