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

// call("POST", "/rules", {body, ifMatch, params}) -> {data, etag, status}
export async function call(method, path, { body, params, ifMatch, headers: extra, base = API } = {}) {
  const headers = { Accept: "application/json", ...(extra || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrf) headers["X-CSRF-Token"] = csrf;
  if (ifMatch) headers["If-Match"] = ifMatch;
  const res = await fetch(base + path + query(params), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  let data = null;
  const type = res.headers.get("content-type") || "";
  if (type.includes("json")) data = await res.json();
  else if (res.status !== 204 && res.status !== 304) data = await res.text();
  if (!res.ok) {
    const error = new ApiError(res.status, data);
    error.etag = res.headers.get("ETag");
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
