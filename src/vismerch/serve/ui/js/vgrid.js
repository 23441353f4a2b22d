// A virtualised grid over a list that the API pages with a cursor. Only the rows in view
// (plus a margin) exist in the DOM, so 100,000 products scroll as smoothly as 100; pages are
// fetched in order, as the view reaches them (a cursor cannot jump ahead). A page refused for
// a while (429 rate limited, 503, a dropped connection) is asked for again after the server's
// Retry-After or a growing back-off, so the grid never stays grey until a reload.

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 15000;

function transient(e) {
  return !e || e.status === undefined || e.status === 429 || e.status === 503 || e.status === 502;
}

import { clear, h } from "./dom.js";

export class VirtualGrid {
  // fetchPage(cursor) -> {items, next_cursor, total}; renderCard(item, index) -> Node
  constructor(host, { fetchPage, renderCard, cardWidth = 170, rowHeight = 236, onError }) {
    this.fetchPage = fetchPage;
    this.renderCard = renderCard;
    this.cardWidth = cardWidth;
    this.rowHeight = rowHeight;
    this.onError = onError || (() => {});
    this.items = [];
    this.total = null;
    this.cursor = null;
    this.done = false;
    this.loading = false;
    this.generation = 0;
    this.failures = 0; // refusals in a row, for the back-off
    this.retryTimer = null;
    this.viewport = h("div", { class: "vgrid", tabindex: "-1" });
    this.spacer = h("div", { class: "vgrid-spacer" });
    this.layer = h("div", { class: "vgrid-layer" });
    this.spacer.append(this.layer);
    this.viewport.append(this.spacer);
    clear(host).append(this.viewport);
    this.frame = null;
    this.nodes = new Map(); // index -> {item, node} drawn last time
    this.viewport.addEventListener("scroll", () => this.schedule());
    this.resize = new ResizeObserver(() => this.schedule());
    this.resize.observe(this.viewport);
  }

  destroy() {
    clearTimeout(this.hydrateTimer);
    clearTimeout(this.retryTimer);
    this.resize.disconnect();
    this.generation++;
  }

  reset(fetchPage) {
    this.fetchPage = fetchPage || this.fetchPage;
    this.items = [];
    this.total = null;
    this.cursor = null;
    this.done = false;
    this.loading = false;
    this.generation++;
    this.failures = 0;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.nodes = new Map();
    this.viewport.scrollTop = 0;
    this.schedule();
  }

  columns() {
    return Math.max(1, Math.floor((this.viewport.clientWidth - 8) / this.cardWidth));
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = null; this.draw(); });
  }

  async ensure(count) {
    if (this.loading || this.done || this.retryTimer || this.items.length >= count) return;
    this.loading = true;
    const gen = this.generation;
    try {
      const page = await this.fetchPage(this.cursor);
      if (gen !== this.generation) return;
      this.items.push(...page.items);
      this.total = page.total ?? this.items.length;
      this.cursor = page.next_cursor || null;
      this.done = !this.cursor;
      this.failures = 0;
    } catch (e) {
      if (gen !== this.generation) return;
      if (transient(e)) this.retryLater(e);
      else { this.done = true; this.onError(e); }
    } finally {
      if (gen === this.generation) { this.loading = false; this.schedule(); }
    }
  }

  retryLater(e) {
    const backoff = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** this.failures);
    const wait = e && e.retryAfter !== null && e.retryAfter !== undefined ? Math.max(e.retryAfter * 1000, backoff) : backoff;
    this.failures++;
    this.viewport.dispatchEvent(new CustomEvent("vgrid:retry", { detail: { wait, attempt: this.failures } }));
    this.retryTimer = setTimeout(() => { this.retryTimer = null; this.schedule(); }, wait);
  }

  draw() {
    const cols = this.columns();
    const known = this.total ?? 0;
    const rows = Math.ceil(Math.max(known, this.items.length) / cols);
    this.spacer.style.height = `${rows * this.rowHeight}px`;
    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - 2);
    const last = Math.min(rows, Math.ceil((top + height) / this.rowHeight) + 2);
    // rows in view need their items; before the first page the total is unknown: fetch it
    const inView = Math.ceil((top + height) / this.rowHeight + 2) * cols;
    const want = this.total === null ? 1 : Math.min(known, inView);
    if (want > this.items.length) this.ensure(want);
    this.layer.style.transform = `translateY(${first * this.rowHeight}px)`;
    this.layer.style.gridTemplateColumns = `repeat(${cols}, ${this.cardWidth - 10}px)`;
    // cards still in view are reused (no new DOM, no image reload); placeholders are redrawn
    // once their page arrives
    const nodes = new Map();
    for (let i = first * cols; i < Math.min(last * cols, Math.max(known, this.items.length)); i++) {
      const item = this.items[i];
      const old = this.nodes.get(i);
      nodes.set(i, old && (old.item === item) ? old : { item, node: item ? this.renderCard(item, i) : h("div", { class: "card placeholder" }) });
    }
    this.nodes = nodes;
    this.layer.replaceChildren(...[...nodes.values()].map((n) => n.node));
    // thumbnails load once the scroll pauses (img[data-src]): a fast scroll requests none
    clearTimeout(this.hydrateTimer);
    this.hydrateTimer = setTimeout(() => {
      for (const img of this.layer.querySelectorAll("img[data-src]")) {
        img.src = img.dataset.src;
        img.removeAttribute("data-src");
      }
    }, 90);
    this.viewport.dispatchEvent(new CustomEvent("vgrid:drawn", { detail: { first: first * cols, total: known } }));
  }
}
