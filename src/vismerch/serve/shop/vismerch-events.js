// vismerch-events.js: send shopper events (impression, click, add_to_cart, purchase, search) from a
// storefront page to vismerch's POST /api/v1/events. Dependency-free ES module; see
// docs/storefront-events.md.
//
//   import { createTracker } from "/shop/vismerch-events.js";
//   const tracker = createTracker({ key: "vmk_…storefront key…" });
//   const slot = { collection, version_id, position, columns, product_id }; // from the storefront response
//   tracker.observe(tileElement, slot);        // one impression when half the tile is in view
//   tracker.click(slot);                       // the shopper opened the product
//   tracker.addToCart({ ...slot, quantity: 1 });
//   tracker.purchase({ ...slot, quantity: 1, revenue: 49.9, currency: "EUR" });
//   tracker.search("red dress", hits.length);   // a search the shop answered (0: nothing found)
//   tracker.click({ product_id, position, query: "red dress" }); // a click on a search result
//
// Delivery is at least once and counted exactly once: every event gets its event_id
// (crypto.randomUUID) when it is made, and a retry re-sends the same ids, which the server
// counts once. Events wait in a queue kept in sessionStorage (a reload or the next page of
// the same tab re-sends what was not acknowledged); they go in batches every `flushMs` or
// at `batchSize`, and with fetch keepalive when the page is hidden or unloaded.

const VISITOR_KEY = "vismerch.visitor";
const QUEUE_KEY = "vismerch.pending";
const MAX_BATCH = 500; // the server's limit per request
const KEEPALIVE_BYTES = 60000; // browsers cap keepalive bodies at 64 KiB in flight
const MAX_PENDING = 5000; // past this the oldest events are dropped, not the page's memory

function uuid() {
  if (globalThis.crypto && crypto.randomUUID) return crypto.randomUUID();
  // crypto.randomUUID needs a secure context (https or localhost): same format without it
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, "0")).join("");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

// storage may be disabled (privacy modes): then the id and the queue live for the page only
function stored(storage, key, make) {
  try {
    let value = storage.getItem(key);
    if (value === null) { value = make(); storage.setItem(key, value); }
    return value;
  } catch (_) {
    return make();
  }
}

// A stable, opaque visitor id: a random UUID kept in localStorage. The server stores only
// its salted hash; pass `visitor` to use your own id (a hash of it, never an e-mail address).
export function visitorId() {
  return stored(localStorage, VISITOR_KEY, uuid);
}

export function createTracker(options = {}) {
  const cfg = {
    endpoint: "/api/v1/events", batchSize: 50, flushMs: 2000, maxRetryMs: 30000,
    onRefused: (refused, event) => console.warn("vismerch refused an event", refused, event),
    onError: (error) => console.warn("vismerch events:", error),
    ...options,
  };
  const visitor = cfg.visitor || visitorId();
  let queue = load();
  let inflight = false;
  let timer = null;
  let failures = 0;
  const seen = new WeakMap();
  const handedOff = new Set(); // ids already given to a keepalive request by this page

  function load() {
    try { return JSON.parse(sessionStorage.getItem(QUEUE_KEY) || "[]"); } catch (_) { return []; }
  }
  function save() {
    try { sessionStorage.setItem(QUEUE_KEY, JSON.stringify(queue)); } catch (_) { /* memory only */ }
  }

  function schedule(ms) {
    if (timer === null) timer = setTimeout(() => { timer = null; flush(); }, ms);
  }

  function track(type, fields) {
    const event = { event_id: uuid(), type, ts: Date.now(), visitor, ...fields };
    queue.push(event);
    if (queue.length > MAX_PENDING) queue.splice(0, queue.length - MAX_PENDING);
    save();
    if (queue.length >= cfg.batchSize) flush(); else schedule(cfg.flushMs);
    return event;
  }

  function post(batch, keepalive) {
    return fetch(cfg.endpoint, {
      method: "POST", keepalive, credentials: "omit",
      headers: { Authorization: `Bearer ${cfg.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ events: batch }),
    });
  }

  function acknowledge(batch) {
    const sent = new Set(batch.map((e) => e.event_id));
    queue = queue.filter((e) => !sent.has(e.event_id));
    save();
  }

  // one batch at a time; a failure keeps the batch (same event ids) and backs off
  async function flush() {
    if (inflight || !queue.length) return;
    inflight = true;
    const batch = queue.slice(0, Math.min(MAX_BATCH, cfg.batchSize * 4));
    try {
      const res = await post(batch, false);
      if (res.ok) {
        const answer = await res.json();
        for (const r of answer.refused || []) cfg.onRefused(r, batch[r.index]);
        acknowledge(batch);
        failures = 0;
      } else if (res.status === 429 || res.status >= 500) {
        throw new Error(`HTTP ${res.status}`);
      } else {
        // a 4xx for the whole batch (bad key, bad body) will not pass on a retry either
        acknowledge(batch);
        cfg.onError(new Error(`HTTP ${res.status}: ${await res.text()}`));
      }
    } catch (error) {
      failures += 1;
      cfg.onError(error);
      const wait = Math.min(cfg.maxRetryMs, 500 * 2 ** failures) * (0.75 + Math.random() / 2);
      inflight = false;
      schedule(wait);
      return;
    }
    inflight = false;
    if (queue.length) schedule(queue.length >= cfg.batchSize ? 0 : cfg.flushMs);
  }

  // the page is going away: hand everything to keepalive requests, which outlive the page;
  // the queue stays in sessionStorage until acknowledged, so an unlucky one is re-sent later
  function flushOnExit() {
    let chunk = [];
    let bytes = 0;
    const send = () => {
      const batch = chunk;
      post(batch, true).then((res) => { if (res.ok) acknowledge(batch); }, () => {});
      chunk = [];
      bytes = 0;
    };
    for (const event of queue) {
      if (handedOff.has(event.event_id)) continue; // visibilitychange, then pagehide
      handedOff.add(event.event_id);
      const size = JSON.stringify(event).length + 1;
      if (chunk.length && (bytes + size > KEEPALIVE_BYTES || chunk.length >= MAX_BATCH)) send();
      chunk.push(event);
      bytes += size;
    }
    if (chunk.length) send();
  }

  const observer = typeof IntersectionObserver === "undefined" ? null : new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting || entry.intersectionRatio < 0.5) continue;
      observer.unobserve(entry.target); // one impression per tile and page view
      track("impression", seen.get(entry.target));
    }
  }, { threshold: [0.5] });

  document.addEventListener("visibilitychange", () => { if (document.visibilityState === "hidden") flushOnExit(); });
  window.addEventListener("pagehide", flushOnExit);
  if (queue.length) schedule(0); // left over from the previous page of this tab

  return {
    visitor,
    observe(element, slot) {
      seen.set(element, slot);
      if (observer) observer.observe(element); else track("impression", slot);
    },
    impression: (slot) => track("impression", slot),
    click: (slot) => track("click", slot),
    addToCart: (slot) => track("add_to_cart", { quantity: 1, ...slot }),
    purchase: (slot) => track("purchase", { quantity: 1, ...slot }),
    search: (query, results, extra = {}) => track("search", { ...extra, query, results }),
    flush,
    pending: () => queue.length,
  };
}
