// Catalog browser: facets (colour swatches, category, quality flag, stock), a text/colour
// search box, a virtualised thumbnail grid paged by the API's cursor, and a product drawer.

import { enc, get, titlesOf } from "./api.js";
import { clear, fmt, h, thumb } from "./dom.js";
import { VirtualGrid } from "./vgrid.js";

const PAGE = 200;
const SIMILAR_MODES = [["colour", "Same colour"], ["style", "Same style"], ["both", "Both"]];
let similarMode = null; // the drawer's last choice, kept while the page lives (null: the store's default)

export async function render(main, ctx) {
  const filters = { category: null, colour: null, flag: null, in_stock: null };
  const chosen = {}; // facet -> the value clicked
  let search = null; // {q, colour} when the grid shows search hits
  const summaries = new Map(); // id -> summary, for search hits drawn before their details arrive

  const q = h("input", { id: "search-q", type: "search", placeholder: "Search titles and images…",
    "aria-label": "Text search" });
  const colour = h("input", { id: "search-colour", type: "text", placeholder: "colour: navy or #1f3a93",
    "aria-label": "Colour", size: 18 });
  const picker = h("input", { type: "color", "aria-label": "Pick a colour", title: "Pick a colour",
    on: { input: () => { colour.value = picker.value; } } });
  const status = h("span", { class: "muted", id: "catalog-status" });
  const facetsBox = h("aside", { class: "facets", id: "facets" });
  const gridHost = h("div", { class: "grid-host", id: "catalog-grid" });
  const drawer = h("aside", { class: "drawer", id: "drawer", hidden: true });
  const form = h("form", { class: "toolbar", id: "search-form", on: { submit: (ev) => {
    ev.preventDefault();
    const text = q.value.trim();
    const col = colour.value.trim();
    search = text || col ? { q: text, colour: col } : null;
    reload();
  } } }, q, colour, picker, h("button", { type: "submit", class: "primary" }, "Search"),
  h("button", { type: "button", on: { click: () => { q.value = ""; colour.value = ""; search = null; reload(); } } },
    "Clear"), status);
  main.append(h("div", { class: "page catalog" }, form, h("div", { class: "split" }, facetsBox, gridHost, drawer)));

  function params(extra = {}) {
    return { ...filters, ...extra };
  }

  async function fetchPage(cursor) {
    if (search) {
      // a colour facet chosen during a text search narrows it (hybrid: text within the colour)
      const res = await get("/search", { q: search.q || null, colour: search.colour || filters.colour || null,
        category: filters.category, k: 200 });
      status.textContent = `${res.hits.length} ${res.mode} results`;
      return { items: res.hits.map((hit) => ({ id: hit.id, score: hit.score })), next_cursor: null,
        total: res.hits.length };
    }
    const page = await get("/products", params({ cursor, limit: PAGE }));
    status.textContent = `${page.total.toLocaleString("en")} products`;
    for (const item of page.items) summaries.set(item.id, item);
    return page;
  }

  function fill(card, item) {
    const info = summaries.get(item.id);
    if (!info) return false;
    const title = card.querySelector(".title");
    title.textContent = info.title || info.id;
    card.querySelector("img").alt = info.title || info.id;
    card.querySelector(".meta").textContent =
      [info.category, info.price != null ? fmt(info.price) : null, info.stock === 0 ? "out of stock" : null]
        .filter(Boolean).join(" · ");
    if (info.flags && info.flags.length) card.classList.add("flagged");
    return true;
  }

  function renderCard(item) {
    const card = h("div", { class: "card product", tabindex: "0", role: "button", dataset: { id: item.id },
      on: { click: () => openDrawer(item.id), keydown: (ev) => { if (ev.key === "Enter") openDrawer(item.id); } } },
    thumb(item.id, "", "thumb", true), h("div", { class: "title" }, item.title || item.id), h("div", { class: "meta" }));
    if (!fill(card, item)) {
      get(`/products/${enc(item.id)}`, { similar: 0 }).then((detail) => {
        summaries.set(item.id, detail);
        fill(card, item);
      }).catch(() => {});
    }
    return card;
  }

  const grid = new VirtualGrid(gridHost, { fetchPage, renderCard, onError: ctx.fail });
  grid.viewport.addEventListener("vgrid:retry", (ev) => {
    status.textContent = `The server is busy: trying again in ${Math.ceil(ev.detail.wait / 1000)} s…`;
  });

  function reload() {
    grid.reset(fetchPage);
    loadFacets();
  }

  async function loadFacets() {
    let facets;
    try {
      facets = await get("/products/facets", params());
    } catch (e) {
      ctx.fail(e);
      return;
    }
    clear(facetsBox);
    const group = (title, name, values, render) => {
      const list = h("ul", { class: "facet", dataset: { facet: name } });
      for (const { value, count, hex } of values) {
        const active = chosen[name] === value;
        list.append(h("li", {}, h("button", { type: "button", class: active ? "on" : "",
          dataset: { value }, on: { click: () => {
            chosen[name] = active ? null : value;
            // stock facet values are in / out / unknown; the API filters in_stock=true|false
            filters[name] = active ? null : (name === "in_stock" ? value !== "out" : value);
            reload();
          } } }, render ? render(value, hex) : null, h("span", {}, value), h("span", { class: "count" }, fmt(count)))));
      }
      facetsBox.append(h("h3", {}, title), list);
    };
    // the table's hex (a name such as "hot pink" is no CSS colour); multicolour gets a wheel
    group("Colour", "colour", facets.colour, (value, hex) => h("span", { class: hex ? "swatch" : "swatch multi",
      style: hex ? { background: hex } : {} }));
    group("Category", "category", facets.category);
    group("Quality flag", "flag", facets.flag);
    group("Stock", "in_stock", facets.stock);
    if (Object.values(filters).some((v) => v !== null)) {
      facetsBox.prepend(h("button", { type: "button", id: "clear-filters",
        on: { click: () => { for (const k in filters) { filters[k] = null; chosen[k] = null; } reload(); } } },
      "Clear filters"));
    }
  }

  async function openDrawer(id) {
    drawer.hidden = false;
    clear(drawer).append(h("p", { class: "muted" }, "Loading…"));
    let p;
    try {
      p = await get(`/products/${enc(id)}`, { similar: 12, similar_mode: similarMode || undefined });
    } catch (e) {
      clear(drawer).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    const names = await titlesOf([...(p.duplicate_group ? p.duplicate_group.members : []), ...p.similar.map((hit) => hit.id)]);
    const strip = (ids) => h("div", { class: "strip" }, ids.map((other) =>
      h("button", { type: "button", class: "mini", title: names.get(other), on: { click: () => openDrawer(other) } },
        thumb(other, names.get(other)))));
    clear(drawer).append(
      h("button", { type: "button", class: "close", "aria-label": "Close", on: { click: () => { drawer.hidden = true; } } }, "×"),
      thumb(p.id, p.title, "big"),
      h("h2", { class: "title" }, p.title || p.id),
      h("p", { class: "muted" }, p.id),
      h("dl", { class: "facts" },
        h("dt", {}, "Category"), h("dd", {}, fmt(p.category)),
        h("dt", {}, "Brand"), h("dd", {}, fmt(p.brand)),
        h("dt", {}, "Price"), h("dd", {}, fmt(p.price)),
        h("dt", {}, "Stock"), h("dd", {}, fmt(p.stock)),
        h("dt", {}, "Sales"), h("dd", {}, fmt(p.sales)),
        h("dt", {}, "Size"), h("dd", {}, p.width ? `${p.width}×${p.height}` : "–")),
      h("h3", {}, "Colours"),
      h("div", { class: "colours" }, p.colours.map((c) => h("span", { class: "chip" },
        h("span", { class: "swatch", style: { background: c.hex } }), `${c.name} ${Math.round(c.weight * 100)}%`))),
      h("h3", {}, "Quality flags"),
      p.flags.length ? h("ul", { class: "flags" }, p.quality.filter((m) => m.flagged).map((m) =>
        h("li", {}, `${m.name} (${fmt(m.value, 3)})`))) : h("p", { class: "muted" }, "none"),
      h("h3", {}, "Duplicate group"),
      p.duplicate_group
        ? h("div", {}, h("p", { class: "muted" }, `group ${p.duplicate_group.group} · ${p.duplicate_group.status}`),
          strip(p.duplicate_group.members.filter((m) => m !== p.id)))
        : h("p", { class: "muted" }, "none"),
      h("h3", {}, "More like this"),
      p.similar_mode ? similarChoice(p) : null,
      similarHost);
    showSimilar(p.similar.map((hit) => hit.id), names);
  }

  const similarHost = h("div", { id: "similar-items", "aria-live": "polite" });
  async function showSimilar(ids, names) {
    names = names || await titlesOf(ids);
    clear(similarHost).append(ids.length ? h("div", { class: "strip" }, ids.map((other) =>
      h("button", { type: "button", class: "mini", title: names.get(other), dataset: { id: other },
        on: { click: () => openDrawer(other) } },
        thumb(other, names.get(other))))) : h("p", { class: "muted" }, "nothing similar"));
  }

  // "Same colour / Same style / Both": native radios (arrow keys move the choice), shown
  // where the store has style vectors
  function similarChoice(p) {
    const pick = async (mode) => {
      similarMode = mode;
      try {
        const found = await get(`/products/${enc(p.id)}/similar`, { k: 12, mode });
        await showSimilar(found.hits.map((hit) => hit.id));
      } catch (e) {
        clear(similarHost).append(h("p", { class: "error" }, ctx.explain(e)));
      }
    };
    return h("fieldset", { class: "similar-mode", id: "similar-mode" },
      h("legend", {}, "Similar by"),
      SIMILAR_MODES.map(([mode, label]) => h("label", {},
        h("input", { type: "radio", name: "similar-mode", value: mode, checked: mode === p.similar_mode,
          on: { change: () => pick(mode) } }), ` ${label}`)));
  }

  loadFacets();
  return () => grid.destroy();
}
