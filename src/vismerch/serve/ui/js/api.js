// The one way the web app talks to the server: the REST API under /api/v1, authenticated
// by the session cookie (sent by the browser), with the session's CSRF token on every write.

export const API = "/api/v1";
let csrf = null;

export function setCsrf(token) {
  csrf = token;
}

export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(err.message || `HTTP ${status}`);
    this.status = status;
    this.code = err.code || "http_error";
    this.field = err.field || null;
    this.hint = err.hint || null;
    this.retryAfter = null; // seconds, from a 429's or 503's Retry-After
  }
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === null || v === undefined || v === "") continue;
    q.append(k, String(v));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

// call("POST", "/rules", {body, ifMatch, params}) -> {data, etag, status}; cache: "no-cache"
// revalidates with the server (ETag) instead of trusting the browser's copy (max-age)
export async function call(method, path, { body, params, ifMatch, headers: extra, base = API, cache } = {}) {
  const headers = { Accept: "application/json", ...(extra || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  if (ifMatch) headers["If-Match"] = ifMatch;
  const res = await fetch(base + path + query(params), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: cache || "default",
  });
  let data = null;
  const type = res.headers.get("content-type") || "";
  if (type.includes("json")) data = await res.json();
  else if (res.status !== 204 && res.status !== 304) data = await res.text();
  if (!res.ok) {
    const error = new ApiError(res.status, data);
    error.etag = res.headers.get("ETag");
    const wait = Number(res.headers.get("Retry-After"));
    if (wait >= 0 && res.headers.has("Retry-After")) error.retryAfter = wait;
    if (res.status === 401 && base === API) window.dispatchEvent(new CustomEvent("vm:signed-out"));
    throw error;
  }
  return { data, etag: res.headers.get("ETag"), status: res.status };
}

export async function get(path, params) {
  return (await call("GET", path, { params })).data;
}

// Every list answers a page ({items, next_cursor}); the app shows whole lists, so it follows
// the cursors (at most `pages` pages; the API caps each page at serve_page_limit).
export async function getAll(path, params = {}, pages = 50) {
  const items = [];
  let cursor = null;
  for (let i = 0; i < pages; i += 1) {
    const page = await get(path, cursor ? { ...params, cursor } : params);
    items.push(...page.items);
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return items;
}

export async function post(path, body, opts = {}) {
  return (await call("POST", path, { ...opts, body })).data;
}

export const enc = encodeURIComponent;

// Product titles by id, for pages whose lists carry only ids (diffs, review groups): asked
// for in batches (one request per 100 ids named in the same tick), remembered for the page.
const titleCache = new Map();
let titleWaiting = new Map(); // id -> [resolve, ...]
let titleTimer = null;

// id -> title (the id itself when the product has none or is unknown), for all of ids
export async function titlesOf(ids) {
  const names = await Promise.all(ids.map(titleOf));
  return new Map(ids.map((id, i) => [id, names[i] || id]));
}

export function titleOf(id) {
  if (titleCache.has(id)) return Promise.resolve(titleCache.get(id));
  return new Promise((resolve) => {
    if (!titleWaiting.has(id)) titleWaiting.set(id, []);
    titleWaiting.get(id).push(resolve);
    if (!titleTimer) titleTimer = setTimeout(flushTitles, 0);
  });
}

async function flushTitles() {
  const waiting = titleWaiting;
  titleWaiting = new Map();
  titleTimer = null;
  const ids = [...waiting.keys()];
  for (let i = 0; i < ids.length; i += 100) {
    const chunk = ids.slice(i, i + 100);
    let found = {};
    try {
      const q = new URLSearchParams();
      for (const id of chunk) q.append("ids", id);
      found = (await call("GET", `/products/titles?${q}`)).data.titles;
    } catch (_) { /* the alt text stays empty: the page shows the ids beside the images */ }
    for (const id of chunk) {
      const title = found[id] || null;
      if (id in found) titleCache.set(id, title);
      for (const resolve of waiting.get(id)) resolve(title);
    }
  }
}
