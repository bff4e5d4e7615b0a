// Hangar console: login, navigation between the pages, and the refresh of
// pages that follow live state. The token lives in sessionStorage only: it
// is gone with the tab, and nothing is sent without it but this shell.

import { api, session, h } from "./ui.js";
import { pages } from "./pages.js";
import { objectsPage } from "./objects.js";

const all = { ...pages, objects: objectsPage };
const loginView = document.getElementById("login-view");
const view = document.getElementById("view");
const nav = document.getElementById("nav");
let timer = null;
let shown = 0;

function showLogin(message = "") {
  session.token = null;
  clearInterval(timer);
  nav.hidden = true;
  view.hidden = true;
  view.replaceChildren();
  loginView.hidden = false;
  document.getElementById("login-error").textContent = message;
  document.getElementById("token").focus();
}

function focusHeading() {
  const h1 = view.querySelector("h1");
  h1?.setAttribute("tabindex", "-1");
  h1?.focus();
}

async function show() {
  if (!session.token) return showLogin();
  const [name, ...rest] = (location.hash.slice(1) || "cluster").split("/");
  const page = all[name] ?? all.cluster;
  loginView.hidden = true;
  nav.hidden = false;
  view.hidden = false;
  for (const a of nav.querySelectorAll("a")) {
    if (a.getAttribute("href") === `#${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  clearInterval(timer);
  const mine = ++shown;
  const arg = rest.map(decodeURIComponent).join("/");
  const render = async () => {
    try {
      const content = await page.render(arg);
      // A page the user has left while it loaded is not drawn.
      if (mine !== shown) return;
      const focused = view.contains(document.activeElement);
      view.replaceChildren(content);
      // A redraw keeps the reader where a page change puts it.
      if (focused) focusHeading();
    } catch (e) {
      if (e.loggedOut) return showLogin(e.message);
      if (mine === shown) view.replaceChildren(h("h1", {}, page.title), h("p", { class: "error", role: "alert" }, e.message));
    }
  };
  await render();
  if (mine !== shown) return;
  document.title = `${page.title} — Hangar console`;
  focusHeading();
  if (page.refresh) {
    timer = setInterval(() => {
      if (!document.getElementById("auto-refresh").checked) return;
      // Do not redraw under a user who is using a control of the page.
      if (!view.contains(document.activeElement) || document.activeElement.tagName === "H1") render();
    }, page.refresh);
  }
}

document.getElementById("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("token");
  const err = document.getElementById("login-error");
  err.textContent = "";
  session.token = input.value.trim();
  try {
    await api("GetClusterHealth");
    input.value = "";
    if (!location.hash) location.hash = "#cluster";
    await show();
  } catch (e) {
    showLogin(e.message);
  }
});

document.getElementById("logout").addEventListener("click", () => {
  showLogin();
  history.replaceState(null, "", location.pathname);
});

window.addEventListener("hashchange", show);
show();
