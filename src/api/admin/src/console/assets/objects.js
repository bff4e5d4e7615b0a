// Hangar console: the object browser. It acts as one of the cluster's keys,
// chosen by the user among those with access to the bucket, without ever
// holding its secret: each S3 request is presigned by the node
// (/v2/PresignObject) and sent through the admin endpoint's same-origin
// proxy (/console/s3/…), which the S3 code answers in-process.

import { api, session, h, field, table, say, errorLine, guarded, bytes } from "./ui.js";

const LINK_ENDPOINT = "hangar-console-link-endpoint";

function go(bucket, prefix = "") {
  location.hash = `#objects/${encodeURIComponent(bucket)}${prefix ? `/${encodeURIComponent(prefix)}` : ""}`;
}

function presign(ctx, action, fields = {}) {
  return api("PresignObject", { bucket: ctx.bucket, key: ctx.key, action, ...fields }, { post: true });
}

/** Sends the presigned request `pre` through the proxy; an S3 error is thrown. */
async function s3(pre, init = {}) {
  const resp = await fetch(`/console/s3${pre.path_and_query}`, {
    ...init,
    cache: "no-store",
    headers: { ...(init.headers ?? {}), Authorization: `Bearer ${session.token}`, "X-Hangar-S3-Host": pre.host },
  });
  if (resp.ok) return resp;
  const text = await resp.text();
  const xml = new DOMParser().parseFromString(text, "application/xml");
  const code = xml.querySelector("Code")?.textContent;
  const message = xml.querySelector("Message")?.textContent;
  if (code) throw new Error(`S3 said ${code}: ${message ?? ""} (key ${pre.access_key_id})`);
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON either */ }
  throw new Error(json?.message ?? `S3 request failed: HTTP ${resp.status}`);
}

function texts(el, tag) {
  return [...el.getElementsByTagName(tag)];
}

function one(el, tag) {
  return el.getElementsByTagName(tag)[0]?.textContent ?? "";
}

async function list(ctx, token) {
  const pre = await presign(ctx, "list", { prefix: ctx.prefix, delimiter: "/", continuation_token: token ?? undefined });
  const xml = new DOMParser().parseFromString(await (await s3(pre)).text(), "application/xml");
  return {
    folders: texts(xml, "CommonPrefixes").map((p) => one(p, "Prefix")),
    objects: texts(xml, "Contents").map((c) => ({ key: one(c, "Key"), size: Number(one(c, "Size")), modified: one(c, "LastModified") })),
    next: one(xml, "IsTruncated") === "true" ? one(xml, "NextContinuationToken") : null,
  };
}

function base(name) {
  return name.split("/").filter(Boolean).pop() ?? name;
}

async function download(ctx, key) {
  const pre = await presign(ctx, "get", { object: key, download: true });
  const blob = await (await s3(pre)).blob();
  // Served as bytes, never as a page of this origin, whatever its type.
  const url = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
  const a = h("a", { href: url, download: base(key), hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  return true;
}

function linkPanel(ctx) {
  const out = h("input", { id: "link-url", class: "link-out mono", readonly: true, "aria-label": "Presigned URL" });
  const expiry = field("Valid for", { name: "expires", id: "link-expires", options: [["900", "15 minutes"], ["3600", "1 hour"], ["86400", "1 day"], ["604800", "7 days"]] });
  const endpoint = field("S3 endpoint for links (empty: the node's)", {
    id: "link-endpoint", placeholder: "https://s3.example.com", value: sessionStorage.getItem(LINK_ENDPOINT) ?? "" });
  const err = errorLine();
  const copy = h("button", { type: "button", class: "secondary", onclick: async () => {
    await guarded(err, async () => { await navigator.clipboard.writeText(out.value); say("Link copied."); return true; });
  } }, "Copy link");
  let current = null;
  const again = h("button", { type: "button", class: "secondary", onclick: (ev) => guarded(err, () => panel.show(current), ev.currentTarget) },
    "New link with these settings");
  const panel = h("section", { "aria-labelledby": "link-title", hidden: true },
    h("h2", { id: "link-title" }, "Presigned link"),
    h("p", {}, "Anyone with this link can download ", h("span", { id: "link-for", class: "mono" }), " until it expires, without a token."),
    h("div", { class: "row-actions" }, expiry, endpoint, again), out, copy, err);
  panel.show = async (key) => {
    current = key;
    panel.hidden = false;
    panel.querySelector("#link-for").textContent = key;
    const ep = panel.querySelector("#link-endpoint").value.trim();
    sessionStorage.setItem(LINK_ENDPOINT, ep);
    const pre = await presign(ctx, "get", {
      object: key, expires_secs: Number(panel.querySelector("#link-expires").value), endpoint: ep || undefined });
    out.value = pre.url;
    out.focus();
    out.select();
    return true;
  };
  return panel;
}

function uploadForm(ctx) {
  const input = h("input", { type: "file", id: "upload-files", name: "files", multiple: true, required: true });
  const err = errorLine();
  const button = h("button", { type: "submit", id: "upload" }, "Upload");
  const f = h("form", { "aria-label": "Upload files" },
    h("label", { for: "upload-files" }, `Files to upload into ${ctx.prefix || "the bucket's top"}`, input), button, err);
  f.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const done = await guarded(err, async () => {
      for (const file of input.files) {
        say(`Uploading ${file.name}…`);
        const pre = await presign(ctx, "put", { object: ctx.prefix + file.name });
        await s3(pre, { method: "PUT", body: file, headers: { "Content-Type": file.type || "application/octet-stream" } });
      }
      return input.files.length;
    }, button);
    if (done !== undefined) { say(`Uploaded ${done} file(s).`); go(ctx.bucket, ctx.prefix); window.dispatchEvent(new HashChangeEvent("hashchange")); }
  });
  return f;
}

function crumbs(ctx) {
  const parts = ctx.prefix.split("/").filter(Boolean);
  const items = [h("li", {}, h("a", { href: `#objects/${encodeURIComponent(ctx.bucket)}` }, ctx.bucket))];
  parts.forEach((p, i) => {
    const pre = `${parts.slice(0, i + 1).join("/")}/`;
    items.push(h("li", {}, i === parts.length - 1 ? h("span", { "aria-current": "location" }, p)
      : h("a", { href: `#objects/${encodeURIComponent(ctx.bucket)}/${encodeURIComponent(pre)}` }, p)));
  });
  return h("nav", { "aria-label": "Folder" }, h("ol", { class: "crumbs" }, items));
}

function rows(ctx, page, link, err) {
  const act = (text, label, f, danger = false) => h("button", {
    type: "button", class: danger ? "danger" : "secondary", "aria-label": label,
    onclick: async (ev) => { await guarded(err, f, ev.currentTarget); } }, text);
  return [
    ...page.folders.map((p) => [
      h("a", { href: `#objects/${encodeURIComponent(ctx.bucket)}/${encodeURIComponent(p)}`, class: "folder" }, `${base(p)}/`),
      "folder", "—", "—"]),
    ...page.objects.map((o) => [
      h("span", { class: "object-name" }, o.key.slice(ctx.prefix.length)), bytes(o.size), new Date(o.modified).toLocaleString(),
      h("div", { class: "row-actions" },
        act("Download", `Download ${o.key}`, () => download(ctx, o.key)),
        act("Link", `Presigned link to ${o.key}`, () => link.show(o.key)),
        act("Delete", `Delete ${o.key}`, async () => {
          if (!confirm(`Delete ${o.key}?`)) return true;
          await s3(await presign(ctx, "delete", { object: o.key }), { method: "DELETE" });
          say(`Deleted ${o.key}.`);
          window.dispatchEvent(new HashChangeEvent("hashchange"));
          return true;
        }, true))]),
  ];
}

async function browser(ctx) {
  const err = errorLine();
  const link = linkPanel(ctx);
  const page = await list(ctx);
  const body = h("div", { id: "listing" }, table(`Objects in ${ctx.bucket}/${ctx.prefix}`, ["Name", "Size", "Last modified", "Actions"],
    rows(ctx, page, link, err), "this folder is empty"));
  let next = page.next;
  const more = h("button", { type: "button", class: "secondary", hidden: !next, onclick: async (ev) => {
    await guarded(err, async () => {
      const p = await list(ctx, next);
      next = p.next;
      ev.currentTarget.hidden = !next;
      body.append(table("More objects", ["Name", "Size", "Last modified", "Actions"], rows(ctx, p, link, err)));
      return true;
    }, ev.currentTarget);
  } }, "More");
  return [crumbs(ctx), uploadForm(ctx), err, body, more, link];
}

export const objectsPage = {
  title: "Objects",
  async render(arg) {
    const buckets = await api("ListBuckets");
    const [bucket, ...rest] = arg ? arg.split("/") : [buckets[0]?.name];
    const head = [h("h1", {}, "Objects")];
    if (!bucket) return h("div", {}, head, h("p", {}, "No buckets yet: ", h("a", { href: "#buckets" }, "create one"), "."));
    const info = await api("GetBucketInfo", { name: bucket });
    const usable = info.keys.filter((k) => k.read);
    const stored = sessionStorage.getItem(`hangar-console-key:${bucket}`);
    const key = usable.find((k) => k.access_key_id === stored)?.access_key_id ?? usable[0]?.access_key_id;
    const picker = h("form", { "aria-label": "Bucket and key" },
      field("Bucket", { id: "pick-bucket", options: buckets.map((b) => b.name) }),
      usable.length ? field("Act as key", { id: "pick-key", options: usable.map((k) => [k.access_key_id, `${k.name || "(no name)"} ${k.access_key_id} (${["read", "write", "owner"].filter((f) => k[f]).join(", ")})`]) }) : "");
    picker.querySelector("#pick-bucket").value = bucket;
    picker.querySelector("#pick-bucket").addEventListener("change", (ev) => go(ev.target.value));
    picker.querySelector("#pick-key")?.addEventListener("change", (ev) => {
      sessionStorage.setItem(`hangar-console-key:${bucket}`, ev.target.value);
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    });
    if (key) picker.querySelector("#pick-key").value = key;
    head.push(picker);
    if (!key) {
      return h("div", {}, head, h("p", {}, "No key may read this bucket; the browser acts as one of the cluster's keys. ",
        h("a", { href: `#buckets/${encodeURIComponent(bucket)}` }, "Give a key read (and write) permission"), " first."));
    }
    try {
      return h("div", {}, head, await browser({ bucket, key, prefix: rest.join("/") }));
    } catch (e) {
      if (e.code !== "Refused") throw e;
      return h("div", {}, head, h("p", { class: "error", role: "alert" },
        `${e.message} The object browser needs the full admin_token: its S3 requests are presigned by a POST route.`));
    }
  },
};
