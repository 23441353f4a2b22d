// The shell: sign-in, navigation by URL hash, the role the signed-in key has, toasts.
// Pages live in their own modules; each renders into <main> and may return a cleanup function.

import { ApiError, call, setCsrf } from "./api.js";
import { clear, h } from "./dom.js";
import * as catalog from "./catalog.js";
import * as collections from "./collections.js";
import * as editor from "./editor.js";
import * as analytics from "./analytics.js";
import * as experiments from "./experiments.js";
import * as experiment from "./experiment.js";
import * as review from "./review.js";
import * as ingest from "./ingest.js";
import * as plan from "./plan.js";
import * as queries from "./queries.js";
import * as history from "./history.js";

const ROLES = ["viewer", "merchandiser", "publisher", "admin"];
const PAGES = [
  { path: "catalog", label: "Catalog", module: catalog, role: "viewer" },
  { path: "collections", label: "Collections", module: collections, role: "viewer" },
  { path: "review", label: "Review", module: review, role: "viewer" },
  { path: "experiments", label: "Experiments", module: experiments, role: "viewer" },
  { path: "queries", label: "Search", module: queries, role: "viewer" },
  { path: "ingest", label: "Ingest", module: ingest, role: "admin" },
  { path: "plan", label: "Plan", module: plan, role: "viewer" },
  { path: "history", label: "History", module: history, role: "viewer" },
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signout = document.getElementById("signout");
let session = null;
let cleanup = null;

// May the signed-in key do what needs `role`? (The API refuses it anyway: this only hides controls.)
export function can(role) {
  return !!session && ROLES.indexOf(session.role) >= ROLES.indexOf(role);
}

let toastTimer = null;
export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = `show ${kind}`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.className = ""; }, kind === "error" ? 9000 : 4000);
}

export function explain(error) {
  if (error instanceof ApiError) {
    const where = error.field ? ` (field: ${error.field})` : "";
    const hint = error.hint ? ` — ${error.hint}` : "";
    return `${error.status}: ${error.message}${where}${hint}`;
  }
  return String(error && error.message ? error.message : error);
}

export function fail(error) {
  toast(explain(error), "error");
}

const ctx = { can, toast, fail, explain, go: (hash) => { location.hash = hash; } };

function signInPage(message) {
  clear(nav);
  who.textContent = "";
  signout.hidden = true;
  const input = h("input", { id: "api-key", type: "password", autocomplete: "off", required: true,
    placeholder: "vmk_…", "aria-label": "API key" });
  const error = h("p", { class: "error", id: "signin-error", role: "alert" }, message || "");
  const form = h("form", { id: "signin", class: "card signin", on: { submit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      const res = await call("POST", "/ui/session", {
        base: "", headers: { Authorization: `Bearer ${input.value.trim()}` } });
      startSession(res.data);
    } catch (e) {
      error.textContent = explain(e);
    }
  } } },
  h("h1", {}, "Sign in"),
  // the key goes once, in the Authorization header of the sign-in request
  h("p", { class: "muted" }, "Paste an API key (make one with: vismerch keys create STORE --role merchandiser). ",
    "It is exchanged for a session cookie and not kept in the page."),
  h("label", { for: "api-key" }, "API key"), input,
  h("button", { type: "submit", class: "primary" }, "Sign in"), error);
  clear(main).append(form);
  input.focus();
}

function startSession(info) {
  session = info;
  setCsrf(info.csrf);
  who.textContent = `${info.role} · ${info.key_id}`;
  signout.hidden = false;
  clear(nav);
  for (const page of PAGES) {
    if (!can(page.role)) continue;
    nav.append(h("a", { href: `#/${page.path}`, dataset: { page: page.path } }, page.label));
  }
  if (!location.hash || location.hash === "#/" || location.hash === "#") location.hash = "#/catalog";
  else route();
}

async function route() {
  if (!session) return;
  if (cleanup) { try { cleanup(); } catch (_) { /* a page's teardown must not stop navigation */ } }
  cleanup = null;
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  let page = PAGES.find((p) => p.path === parts[0]) || PAGES[0];
  let module = page.module;
  if (page.path === "collections" && parts[1]) {
    module = { analytics, experiments }[parts[2]] || editor;
  }
  if (page.path === "experiments" && parts[1]) module = experiment;
  for (const a of nav.querySelectorAll("a")) a.classList.toggle("active", a.dataset.page === page.path);
  clear(main);
  if (!can(page.role)) {
    main.append(h("p", { class: "error" }, `This page needs a ${page.role} key.`));
    return;
  }
  try {
    cleanup = (await module.render(main, ctx, parts.slice(1))) || null;
  } catch (e) {
    main.append(h("p", { class: "error" }, explain(e)));
  }
}

signout.addEventListener("click", async () => {
  try { await call("DELETE", "/ui/session", { base: "" }); } catch (_) { /* signed out anyway */ }
  session = null;
  setCsrf(null);
  signInPage("Signed out.");
});

window.addEventListener("hashchange", route);
window.addEventListener("vm:signed-out", () => { if (session) { session = null; signInPage("Your session ended: sign in again."); } });

(async () => {
  try {
    const res = await call("GET", "/ui/session", { base: "" });
    startSession(res.data);
  } catch (_) {
    signInPage();
  }
})();
