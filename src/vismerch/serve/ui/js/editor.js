// Collection grid editor: the arrangement as the storefront shows it at 2-5 columns, with row
// boundaries; drag and drop / typed position / keyboard moves create pin rules; multi-select
// pin, hide and bury; search-to-place; overlays; badges; a "why here" panel; the rules that
// affect the page; versions (save draft, diff, publish, rollback) in versions.js. The views,
// clicks, orders and revenue overlays are real units from the shopper events of a period.

import { call, enc, get, getAll, post, titlesOf } from "./api.js";
import { append, clear, fmt, h, spinner, thumb } from "./dom.js";
import { versionsPanel } from "./versions.js";
import { rulesPanel } from "./rules.js";
import { PERF, analytics, money, periodSelect } from "./metrics.js";

const WIDTHS = [2, 3, 4, 5];
const PAGE = 120;
const OVERLAYS = ["none", "sales", "stock", "margin", "newness", ...Object.keys(PERF)];

function quoteList(ids) {
  return `id in [${ids.map((id) => JSON.stringify(id)).join(", ")}]`;
}

export async function render(main, ctx, [id]) {
  const st = { columns: 4, mode: "mix", overlay: "none", slots: [], total: 0, rules: [], applied: [],
    selected: new Set(), focus: null, share: null, loading: false, perf: null, perfDays: 28 };
  const editable = ctx.can("merchandiser");

  // ---- layout
  const widthSwitch = h("div", { class: "segmented", id: "width-switch", role: "radiogroup", "aria-label": "Grid width" },
    WIDTHS.map((w) => h("button", { type: "button", dataset: { columns: String(w) }, role: "radio",
      on: { click: () => { st.columns = w; drawGrid(); } } }, `${w} columns`)));
  const modeSel = h("select", { id: "mode", "aria-label": "Arrangement mode", on: { change: () => { st.mode = modeSel.value; reload(); } } },
    ["mix", "flow", "plain"].map((m) => h("option", { value: m }, m)));
  const overlaySel = h("select", { id: "overlay", "aria-label": "Overlay", on: { change: () => { st.overlay = overlaySel.value; drawGrid(); loadPerf(); } } },
    OVERLAYS.map((o) => h("option", { value: o }, o === "none" ? "no overlay" : `overlay: ${o}`)));
  const periodSel = periodSelect("overlay-period", st.perfDays, (d) => { st.perfDays = d; st.perf = null; loadPerf(); });
  periodSel.setAttribute("aria-label", "Period of the views, clicks, orders and revenue overlays");
  const summary = h("span", { class: "muted", id: "editor-summary" });
  // preview as of a date: rules apply as they will be (or were) active then
  const asOf = h("input", { id: "preview-at", type: "datetime-local", on: { change: () => { st.at = asOf.value ? `${asOf.value}:00Z` : null; reload(); } } });
  const grid = h("div", { class: "arrangement", id: "arrangement" });
  const more = h("button", { type: "button", id: "load-more", hidden: true, on: { click: () => loadMore() } }, "Load more");
  const side = h("aside", { class: "side" });
  const tabs = {};
  const tabBar = h("div", { class: "tabs" });
  for (const [name, label] of [["why", "Why here"], ["rules", "Rules"], ["versions", "Versions"]]) {
    tabs[name] = h("section", { class: "tab", id: `tab-${name}`, hidden: name !== "why" });
    tabBar.append(h("button", { type: "button", dataset: { tab: name }, class: name === "why" ? "on" : "",
      on: { click: () => showTab(name) } }, label));
  }
  side.append(tabBar, ...Object.values(tabs));

  const toolbar = h("div", { class: "toolbar", id: "edit-toolbar" });
  if (editable) {
    const target = h("input", { id: "move-to", type: "number", min: 1, placeholder: "position", "aria-label": "Position", size: 6 });
    const count = h("span", { id: "selection-count", class: "muted" }, "0 selected");
    toolbar.append(count,
      h("button", { type: "button", id: "pin-selected", on: { click: () => pinSelected() } }, "Pin here"),
      h("button", { type: "button", id: "hide-selected", on: { click: () => conditionRule("hide") } }, "Hide"),
      h("button", { type: "button", id: "bury-selected", on: { click: () => conditionRule("bury") } }, "Bury"),
      h("label", {}, "Move to ", target),
      h("button", { type: "button", id: "move-selected", on: { click: () => {
        const pos = parseInt(target.value, 10);
        const ids = [...st.selected];
        if (!ids.length || !(pos >= 1)) { ctx.toast("Select products and type a position", "error"); return; }
        pinMany(ids.map((pid, i) => [pid, pos + i]));
      } } }, "Move"),
      placeBox(),
      h("span", { class: "muted hint" }, "Drag a card onto a position to pin it · Alt+arrows move the focused card · Ctrl/⌘-click or Space selects several"));
  } else {
    toolbar.append(h("span", { class: "muted" }, "Read-only: your key may not edit arrangements."));
  }

  const viewSel = h("div", { class: "segmented", id: "view-switch" },
    h("button", { type: "button", class: "on", dataset: { view: "editor" }, on: { click: () => setView("editor") } }, "Editor"),
    h("button", { type: "button", dataset: { view: "storefront" }, on: { click: () => setView("storefront") } }, "Storefront"));
  const storefront = h("div", { class: "arrangement", id: "storefront", hidden: true });

  main.append(h("div", { class: "page editor" },
    h("div", { class: "head" }, h("h1", {}, h("a", { href: "#/collections" }, "Collections"), " / ", h("span", { id: "collection-id" }, id)),
      viewSel, widthSwitch, modeSel, overlaySel, periodSel, h("label", { class: "as-of" }, "Preview as of (UTC) ", asOf),
      h("a", { href: `#/collections/${enc(id)}/analytics`, id: "analytics-link" }, "Analytics"),
      h("a", { href: `#/collections/${enc(id)}/experiments`, id: "experiments-link" }, "Experiments"), summary),
    toolbar,
    h("div", { class: "split" }, h("div", { class: "grid-col" }, grid, storefront, more), side)));

  function showTab(name) {
    for (const [n, el] of Object.entries(tabs)) el.hidden = n !== name;
    for (const b of tabBar.children) b.classList.toggle("on", b.dataset.tab === name);
  }

  async function setView(view) {
    for (const b of viewSel.children) b.classList.toggle("on", b.dataset.view === view);
    grid.hidden = view !== "editor";
    more.hidden = view !== "editor" || st.slots.length >= st.total;
    storefront.hidden = view !== "storefront";
    if (view === "storefront") await drawStorefront();
  }

  // ---- data
  async function fetchSlots(offset, limit) {
    const res = await post(`/collections/${enc(id)}/preview`, { columns: WIDTHS, mode: st.mode, offset, limit, at: st.at || null });
    st.total = res.total;
    st.applied = res.rules || [];
    st.conflicts = res.conflicts || [];
    st.share = res.business_share;
    return res.slots;
  }

  async function reload() {
    const want = Math.max(PAGE, st.slots.length);
    const slots = [];
    try {
      while (slots.length < want) {
        const page = await fetchSlots(slots.length, Math.min(PAGE, want - slots.length));
        slots.push(...page);
        if (!page.length || slots.length >= st.total) break;
      }
    } catch (e) {
      ctx.fail(e);
      return;
    }
    st.slots = slots;
    drawGrid();
    await loadRules();
    // the "why here" panel follows the product it shows (its position, reasons and rules changed)
    const shown = st.whyId && st.slots.find((s) => s.id === st.whyId);
    if (shown) why(shown, false);
  }

  async function loadMore() {
    try {
      st.slots.push(...await fetchSlots(st.slots.length, PAGE));
    } catch (e) {
      ctx.fail(e);
    }
    drawGrid();
  }

  async function loadRules() {
    try {
      st.rules = await getAll(`/collections/${enc(id)}/rules`, { at: st.at });
    } catch (e) {
      st.rules = [];
      st.rulesPanel = null;
      clear(tabs.rules).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    drawRules();
  }

  // ---- writes (each creates a rule, then the page re-arranges)
  async function addRule(body, message) {
    try {
      await post("/rules", { collection: id, ...body });
      ctx.toast(message);
      st.selected.clear();
      await reload();
    } catch (e) {
      ctx.fail(e);
    }
  }

  async function pinMany(pairs) {
    try {
      for (const [product, position] of pairs) await post("/rules", { kind: "pin", collection: id, product, position });
      ctx.toast(pairs.length === 1 ? `Pinned ${nameOf(pairs[0][0])} at ${pairs[0][1]}` : `Pinned ${pairs.length} products`);
      st.selected.clear();
      st.focus = pairs[0][0];
      await reload();
    } catch (e) {
      ctx.fail(e);
      await reload();
    }
  }

  // a product's name for messages: its title when the page has it (an untitled product: its id)
  function nameOf(pid) {
    const slot = st.slots.find((s) => s.id === pid);
    return (slot && slot.title) || (st.names && st.names.get(pid)) || pid;
  }

  function pinSelected() {
    const pos = new Map(st.slots.map((s) => [s.id, s.position]));
    const ids = [...st.selected].filter((pid) => pos.has(pid));
    if (!ids.length) { ctx.toast("Select products first (click, Ctrl/⌘-click, or Space)", "error"); return; }
    pinMany(ids.map((pid) => [pid, pos.get(pid)]));
  }

  function conditionRule(kind) {
    const ids = [...st.selected];
    if (!ids.length) { ctx.toast("Select products first", "error"); return; }
    const body = { kind, where: quoteList(ids) };
    if (kind === "bury") body.factor = 100;
    addRule(body, `${kind === "hide" ? "Hid" : "Buried"} ${ids.length} product${ids.length > 1 ? "s" : ""}`);
  }

  // an exact product id first; otherwise a text search, within the category for a category page
  async function findToPlace(text) {
    try {
      const exact = await get(`/products/${enc(text)}`, { similar: 0 });
      return [{ id: exact.id }];
    } catch (e) {
      if (e.status !== 404) throw e;
    }
    const info = st.info || {};
    const category = info.kind === "category" ? ((info.definition || {}).category || info.id) : null;
    return (await get("/search", { q: text, k: 8, category })).hits;
  }

  // search-to-place: find a product far down (or outside the first pages) and pin it
  function placeBox() {
    const q = h("input", { id: "place-q", type: "search", placeholder: "Find a product to place…", "aria-label": "Find a product to place" });
    const pos = h("input", { id: "place-pos", type: "number", min: 1, value: 1, "aria-label": "Place at position", size: 5 });
    const results = h("div", { class: "place-results", id: "place-results" });
    const run = async (ev) => {
      ev.preventDefault();
      const text = q.value.trim();
      if (!text) return;
      const busy = spinner("Searching…", "place-busy");
      clear(results).append(busy);
      find.disabled = true;
      results.setAttribute("aria-busy", "true");
      let hits;
      try {
        hits = await findToPlace(text);
        st.names = await titlesOf(hits.map((hit) => hit.id));
      } catch (e) {
        ctx.fail(e);
        return;
      } finally {
        busy.remove();
        find.disabled = false;
        results.removeAttribute("aria-busy");
      }
      if (!hits.length) results.append(h("span", { class: "muted" }, "no match"));
      for (const hit of hits) {
        results.append(h("button", { type: "button", class: "mini", title: `Place ${hit.id}`, on: { click: () => {
          clear(results);
          pinMany([[hit.id, parseInt(pos.value, 10) || 1]]);
        } } }, thumb(hit.id, st.names.get(hit.id)), h("span", {}, st.names.get(hit.id))));
      }
    };
    const find = h("button", { type: "submit" }, "Find");
    return h("form", { class: "place", on: { submit: run } }, q, h("label", {}, "at ", pos), find, results);
  }

  // ---- drawing
  function badges(slot) {
    const out = [];
    if (slot.pinned) out.push(h("span", { class: "badge pinned", title: "Pinned by a rule" }, "pinned"));
    if (slot.substituted_for) out.push(h("span", { class: "badge substituted", title: `Stands in for ${slot.substituted_for} (out of stock)` }, "substituted"));
    if (slot.flags && slot.flags.length) out.push(h("span", { class: "badge flagged", title: slot.flags.join(", ") }, "flagged"));
    if ((slot.lookalike_at || []).includes(st.columns)) out.push(h("span", { class: "badge lookalike", title: `Has a look-alike neighbour at ${st.columns} columns` }, "look-alike"));
    if (slot.stock !== null && slot.stock !== undefined && slot.stock <= 0) out.push(h("span", { class: "badge oos" }, "out of stock"));
    return out;
  }

  // real units of the period: the product's row of the collection's analytics (fetched once
  // a performance overlay is chosen); a product without events in the period shows 0
  async function loadPerf() {
    if (!PERF[st.overlay] || st.perf) return;
    try {
      const data = await analytics(id, st.perfDays, { products: true });
      const rows = data.products || [];
      const top = Object.fromEntries(Object.values(PERF).map((f) => [f, Math.max(0, ...rows.map((p) => p[f] || 0))]));
      st.perf = { byId: new Map(rows.map((p) => [p.id, p])), currencies: data.currencies, any: rows.length > 0, top };
    } catch (e) {
      ctx.fail(e);
      return;
    }
    drawGrid();
  }

  function perfOverlay(slot) {
    const field = PERF[st.overlay];
    if (!st.perf) return h("div", { class: "overlay none" }, `${st.overlay}: …`);
    const value = (st.perf.byId.get(slot.id) || {})[field] || 0;
    const top = st.perf.top[field];
    const text = field === "revenue" ? money(value, st.perf.currencies) : fmt(value);
    return h("div", { class: "overlay perf", title: `${st.overlay} over the period: ${text}` },
      h("div", { class: "bar", style: { width: `${top > 0 ? (100 * value) / top : 0}%` } }), h("span", {}, `${st.overlay} ${text}`));
  }

  function overlay(slot) {
    if (st.overlay === "none") return null;
    if (PERF[st.overlay]) return perfOverlay(slot);
    const parts = (slot.score && slot.score.parts) || {};
    let value = parts[st.overlay];
    if (st.overlay === "stock" && value === undefined) value = slot.stock > 0 ? 1 : 0;
    if (value === undefined || value === null) return h("div", { class: "overlay none" }, `${st.overlay}: –`);
    const top = overlayMax(st.overlay);
    const pct = top > 0 ? Math.max(0, Math.min(1, value / top)) * 100 : 0;
    return h("div", { class: `overlay ${st.overlay}`, title: `${st.overlay} ${fmt(value, 3)}` },
      h("div", { class: "bar", style: { width: `${pct}%` } }), h("span", {}, `${st.overlay} ${fmt(value, 2)}`));
  }

  // the largest value of a score part among the loaded slots: overlay bars are relative to it
  function overlayMax(part) {
    let top = 0;
    for (const slot of st.slots) {
      const v = slot.score && slot.score.parts ? slot.score.parts[part] : undefined;
      if (typeof v === "number" && v > top) top = v;
    }
    return part === "stock" && top === 0 ? 1 : top;
  }

  function card(slot, index) {
    const el = h("div", { class: "card slot", tabindex: "0", draggable: editable ? "true" : "false",
      dataset: { id: slot.id, position: String(slot.position) }, "aria-label": `Position ${slot.position}` },
    h("span", { class: "pos" }, String(slot.position)),
    thumb(slot.id, slot.title),
    h("div", { class: "title" }, slot.title || slot.id),
    h("div", { class: "meta" }, [slot.price != null ? fmt(slot.price) : null, slot.colour].filter(Boolean).join(" · ")),
    h("div", { class: "badges" }, badges(slot)),
    overlay(slot));
    if (st.selected.has(slot.id)) el.classList.add("selected");
    if (slot.pinned) el.classList.add("is-pinned");
    el.addEventListener("click", (ev) => {
      if (ev.ctrlKey || ev.metaKey || ev.shiftKey) toggle(slot.id);
      else { st.selected.clear(); st.selected.add(slot.id); markSelection(); }
      st.focus = slot.id;
      why(slot);
    });
    el.addEventListener("keydown", (ev) => onKey(ev, index));
    if (editable) {
      el.addEventListener("dragstart", (ev) => {
        ev.dataTransfer.setData("text/plain", slot.id);
        ev.dataTransfer.effectAllowed = "move";
        el.classList.add("dragging");
      });
      el.addEventListener("dragend", () => el.classList.remove("dragging"));
      el.addEventListener("dragover", (ev) => { ev.preventDefault(); el.classList.add("drop"); });
      el.addEventListener("dragleave", () => el.classList.remove("drop"));
      el.addEventListener("drop", (ev) => {
        ev.preventDefault();
        el.classList.remove("drop");
        const dragged = ev.dataTransfer.getData("text/plain");
        if (dragged && dragged !== slot.id) pinMany([[dragged, slot.position]]);
      });
    }
    return el;
  }

  function toggle(pid) {
    if (st.selected.has(pid)) st.selected.delete(pid); else st.selected.add(pid);
    markSelection();
  }

  function markSelection() {
    for (const el of grid.querySelectorAll(".slot")) el.classList.toggle("selected", st.selected.has(el.dataset.id));
    const count = document.getElementById("selection-count");
    if (count) count.textContent = `${st.selected.size} selected`;
  }

  function onKey(ev, index) {
    const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -st.columns, ArrowDown: st.columns }[ev.key];
    const slot = st.slots[index];
    if (step !== undefined) {
      ev.preventDefault();
      const to = index + step;
      if (to < 0) return;
      if (ev.altKey && editable) { pinMany([[slot.id, to + 1]]); return; } // Alt+arrow moves the product
      const next = grid.querySelector(`.slot[data-position="${to + 1}"]`);
      if (next) { next.focus(); st.focus = next.dataset.id; }
    } else if (ev.key === " ") {
      ev.preventDefault();
      toggle(slot.id);
    } else if (ev.key === "Enter") {
      why(slot);
    }
  }

  function drawGrid() {
    for (const b of widthSwitch.children) {
      const on = Number(b.dataset.columns) === st.columns;
      b.classList.toggle("on", on);
      b.setAttribute("aria-checked", String(on));
    }
    grid.style.setProperty("--cols", String(st.columns));
    grid.dataset.columns = String(st.columns);
    const hadFocus = grid.contains(document.activeElement); // clearing the grid drops it to <body>
    clear(grid);
    for (let r = 0; r * st.columns < st.slots.length; r++) {
      const row = h("div", { class: "row", dataset: { row: String(r + 1) } }, h("span", { class: "row-label" }, `row ${r + 1}`));
      const cells = h("div", { class: "cells" });
      cells.style.gridTemplateColumns = `repeat(${st.columns}, minmax(0, 1fr))`;
      for (let c = 0; c < st.columns; c++) {
        const i = r * st.columns + c;
        if (i < st.slots.length) cells.append(card(st.slots[i], i));
      }
      row.append(cells);
      grid.append(row);
    }
    more.hidden = grid.hidden || st.slots.length >= st.total;
    markSelection();
    // say which overlays have data on this page (margin needs a cost column, for one)
    for (const option of overlaySel.options) {
      if (option.value === "none") continue;
      if (PERF[option.value]) {
        option.textContent = `overlay: ${option.value}${st.perf && !st.perf.any ? " (no events)" : ""}`;
        continue;
      }
      const has = option.value === "stock" || st.slots.some((x) => x.score && x.score.parts && x.score.parts[option.value] !== undefined);
      option.textContent = `overlay: ${option.value}${has ? "" : " (no data)"}`;
    }
    summary.textContent = `${st.total.toLocaleString("en")} products · ${st.slots.length} shown` + (st.at ? ` · as of ${st.at}` : "") +
      (st.share != null ? ` · business share ${fmt(st.share * 100, 1)}%` : "");
    if (st.focus) {
      const el = grid.querySelector(`.slot[data-id="${CSS.escape(st.focus)}"]`);
      if (el && (hadFocus || grid.contains(document.activeElement))) el.focus();
    }
  }

  function why(slot, show = true) {
    if (show) showTab("why");
    st.whyId = slot.id;
    const box = clear(tabs.why);
    const rules = st.rules.filter((r) => r.product === slot.id || (r.where && r.where.includes(JSON.stringify(slot.id))));
    const parts = (slot.score && slot.score.parts) || {};
    append(box, [
      thumb(slot.id, slot.title, "big"),
      h("h2", { class: "title" }, slot.title || slot.id),
      h("p", { class: "muted" }, `${slot.id} · position ${slot.position}`),
      h("h3", {}, "Why here"),
      h("ul", { class: "reasons" }, (slot.reasons || []).map((r) => h("li", {}, r))),
      slot.substituted_for ? h("p", { class: "note" }, `Substituted for ${slot.substituted_for}, which is out of stock.`) : null,
      h("h3", {}, `Business score ${fmt(slot.score ? slot.score.total : null, 3)}`),
      h("table", { class: "parts" }, Object.entries(parts).map(([k, v]) => h("tr", {},
        h("td", {}, k), h("td", { class: "num" }, fmt(v, 3)),
        h("td", {}, h("div", { class: "bar", style: { width: `${Math.max(0, Math.min(1, v || 0)) * 160}px` } }))))),
      h("h3", {}, "Look-alike neighbours"),
      h("p", {}, (slot.lookalike_at || []).length ? `at ${slot.lookalike_at.join(", ")} columns` : "none at any width"),
      h("h3", {}, "Rules on this product"),
      rules.length ? h("ul", {}, rules.map((r) => h("li", {}, ruleText(r)))) : h("p", { class: "muted" }, "none")]);
    if (editable) {
      const pos = h("input", { id: "why-position", type: "number", min: 1, value: slot.position, "aria-label": "Pin at position", size: 5 });
      const from = h("input", { id: "pin-from", type: "date", "aria-label": "From" });
      const until = h("input", { id: "pin-until", type: "date", "aria-label": "Until" });
      box.append(h("form", { class: "inline", id: "pin-form", on: { submit: (ev) => {
        ev.preventDefault();
        const when = { starts_at: from.value || null, ends_at: until.value || null };
        if (when.starts_at || when.ends_at) {
          addRule({ kind: "pin", product: slot.id, position: parseInt(pos.value, 10), ...when },
            `Scheduled pin of ${slot.title || slot.id} at ${pos.value}`);
        } else {
          pinMany([[slot.id, parseInt(pos.value, 10)]]);
        }
      } } }, h("label", {}, "Pin at position ", pos), h("label", {}, "from ", from), h("label", {}, "until ", until),
      h("button", { type: "submit", class: "primary" }, "Pin")));
    }
  }

  function ruleText(r) {
    const what = r.kind === "pin" ? `pin ${r.product} at ${r.position}` : `${r.kind} ${r.where || ""}${r.factor ? ` (${r.factor})` : ""}`;
    const when = r.starts_at || r.ends_at ? ` · ${r.starts_at || "…"} → ${r.ends_at || "…"}` : "";
    return `#${r.id} ${what}${when}${r.active === false ? " · inactive" : ""}`;
  }

  function drawRules() {
    if (!st.rulesPanel) {
      st.rulesPanel = rulesPanel(ctx, id, { editable, onChange: reload });
      clear(tabs.rules).append(st.rulesPanel.el);
    }
    st.rulesPanel.draw(st.rules, st.conflicts);
  }

  async function drawStorefront() {
    clear(storefront);
    try {
      // no-cache: revalidated with its ETag, so a publish or rollback shows at once (max-age is 60 s)
      const page = (await call("GET", `/storefront/collections/${enc(id)}`, { params: { columns: st.columns, limit: 48 },
        cache: "no-cache" })).data;
      const names = await titlesOf(page.items.map((item) => item.id));
      storefront.append(h("p", { class: "muted", id: "storefront-version" }, `Published: ${page.version} · ${page.total} products · as a storefront sees it`));
      const cells = h("div", { class: "cells" });
      cells.style.gridTemplateColumns = `repeat(${st.columns}, minmax(0, 1fr))`;
      for (const item of page.items) {
        cells.append(h("div", { class: "card slot", dataset: { id: item.id } }, h("span", { class: "pos" }, String(item.position)), thumb(item.id, names.get(item.id)), h("div", { class: "title" }, names.get(item.id))));
      }
      storefront.append(cells);
    } catch (e) {
      storefront.append(h("p", { class: e.status === 404 ? "muted" : "error" }, e.status === 404 ? "Nothing published yet." : ctx.explain(e)));
    }
  }

  // the next page of slots loads as the "Load more" button comes into view
  const observer = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && !more.hidden && !st.loading) {
      st.loading = true;
      loadMore().finally(() => { st.loading = false; });
    }
  }, { rootMargin: "400px" });
  observer.observe(more);
  try { st.info = await get(`/collections/${enc(id)}`); } catch (_) { st.info = null; }

  tabs.versions.append(versionsPanel(ctx, id, { current: () => st, onChange: () => { reload(); if (!storefront.hidden) drawStorefront(); } }));
  await reload();
  // the panel starts on the first product, unless a card was clicked meanwhile; the tab shown
  // is left as it is (the user may have opened Rules or Versions while the page loaded)
  if (st.slots.length && !st.whyId) why(st.slots[0], false);
  return () => observer.disconnect();
}
