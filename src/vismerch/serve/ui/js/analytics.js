// A collection's analytics page (#/collections/<id>/analytics): what the shopper events of a
// period say. The funnel and its rates, its trend over days, each slot's observed CTR
// against what the slot usually gets, how each published version did, the pins' verdicts,
// and the products with their position-corrected attractiveness and its 95% interval.

import { enc, get, getAll } from "./api.js";
import { clear, fmt, h, thumb } from "./dom.js";
import * as charts from "./charts.js";
import { analytics, funnelCells, funnelTable, money, pct, periodSelect } from "./metrics.js";

const TREND = [["impressions", "Impressions"], ["clicks", "Clicks"], ["add_to_carts", "Add to carts"],
  ["orders", "Orders"], ["revenue", "Revenue"], ["ctr", "CTR"], ["conversion", "Conversion"]];
const RATES = new Set(["ctr", "conversion"]);
const TOP = 50;
const PRODUCT_COLS = [["id", "Product"], ["impressions", "Views"], ["clicks", "Clicks"], ["raw_ctr", "Raw CTR"],
  ["attractiveness_corrected", "Corrected attractiveness (95% interval)"], ["add_to_carts", "Add to carts"],
  ["orders", "Orders"], ["revenue", "Revenue"]];

export async function render(main, ctx, [id]) {
  const st = { days: 28, data: null, versions: new Map(), sort: "attractiveness_corrected", desc: true, all: false };
  const body = h("div", { id: "analytics-body" }, h("p", { class: "muted" }, "Loading…"));
  main.append(h("div", { class: "page analytics" },
    h("div", { class: "head" },
      h("h1", {}, h("a", { href: "#/collections" }, "Collections"), " / ",
        h("a", { href: `#/collections/${enc(id)}`, id: "editor-link" }, id), " / Analytics"),
      h("label", {}, "Period ", periodSelect("analytics-period", st.days, (d) => { st.days = d; load(); }))),
    body));

  try {
    for (const v of await getAll(`/collections/${enc(id)}/versions`)) st.versions.set(v.id, v.name);
  } catch (_) { /* versions are only names for the by-version table */ }

  async function load() {
    clear(body).append(h("p", { class: "muted" }, "Loading…"));
    try {
      st.data = await analytics(id, st.days, { products: true });
    } catch (e) {
      clear(body).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    draw();
  }

  function draw() {
    const d = st.data;
    const cur = d.currencies;
    clear(body);
    if (!d.totals.impressions && !d.totals.orders) {
      body.append(h("p", { class: "muted", id: "no-events" }, "No shopper events in this period. ",
        "Storefronts send them with vismerch-events.js (docs/storefront-events.md), or import a GA4 / UBI export: ",
        h("code", {}, "vismerch events import STORE FILE --format ga4")));
      return;
    }
    body.append(
      h("dl", { class: "kpis", id: "kpis" }, [...funnelCells(d.totals, cur), ["visitors", "Visitors", fmt(d.totals.visitors)]]
        .map(([name, label, text]) => h("div", { class: "kpi" }, h("dt", {}, label), h("dd", { id: `kpi-${name}` }, text)))),
      h("div", { class: "plots" },
        charts.funnel("funnel", "Funnel: impressions → clicks → add to carts → orders", [
          ["Impressions", d.totals.impressions, fmt(d.totals.impressions)], ["Clicks", d.totals.clicks, fmt(d.totals.clicks)],
          ["Add to carts", d.totals.add_to_carts, fmt(d.totals.add_to_carts)], ["Orders", d.totals.orders, fmt(d.totals.orders)]]),
        trendBox(d),
        d.slots.length ? charts.slots("slots-plot", "Slots: observed CTR against the slot's expected CTR",
          d.slots.slice(0, 48), (v) => pct(v, 1)) : h("p", { class: "muted" }, "No clicks yet: no slot estimates.")),
      h("h2", {}, "By version"),
      funnelTable("by-version", "Version", d.by_version.map((r) => ({ ...r, dataset: { version: String(r.version_id) } })),
        (r) => (r.version_id == null ? "unknown" : st.versions.get(r.version_id) || `#${r.version_id}`), cur),
      h("h2", {}, "Pins"), pinsTable(d.pins),
      h("h2", {}, "Products"),
      h("p", { class: "muted" }, "Attractiveness corrected for position: the chance a product is clicked once it is seen, ",
        "with the grid's position bias taken out and sparse products shrunk toward their category."),
      productsBox(d));
  }

  function trendBox(d) {
    const box = h("div", { class: "trend" });
    const sel = h("select", { id: "trend-metric", "aria-label": "Trend metric", on: { change: () => paint() } },
      TREND.map(([k, label]) => h("option", { value: k }, label)));
    const host = h("div");
    const days = h("details", {}, h("summary", {}, "By day as a table"),
      funnelTable("by-day", "Day", d.by_day, (r) => String(r.day).slice(0, 10), d.currencies));
    function paint() {
      const key = sel.value;
      const label = TREND.find(([k]) => k === key)[1];
      const format = RATES.has(key) ? (v) => pct(v, 1) : key === "revenue" ? (v) => money(v, d.currencies) : (v) => fmt(v, 0);
      clear(host).append(charts.series("trend", `${label} by day`,
        d.by_day.map((r) => ({ label: String(r.day).slice(5, 10), value: r[key] })), { line: RATES.has(key), format }));
    }
    paint();
    box.append(h("label", {}, "Trend ", sel), host, days);
    return box;
  }

  function pinsTable(pins) {
    if (!pins.length) return h("p", { class: "muted", id: "pins" }, "No pins in this collection.");
    return h("table", { class: "data", id: "pins" },
      h("thead", {}, h("tr", {}, ["Rule", "Product", "Position", "Verdict", "Clicks / expected"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, pins.map((p) => h("tr", { dataset: { verdict: p.verdict, product: p.product_id } },
        h("td", {}, `#${p.rule}`), h("td", { class: "code" }, p.product_id), h("td", { class: "num" }, String(p.position)),
        h("td", {}, h("span", { class: `verdict ${p.verdict}` }, p.text)),
        h("td", { class: "num" }, p.expected_clicks != null ? `${fmt(p.clicks)} / ${fmt(p.expected_clicks, 1)}` : "–")))));
  }

  function productsBox(d) {
    const box = h("div", { id: "products-box" });
    const rows = [...(d.products || [])].sort((a, b) => {
      const x = a[st.sort], y = b[st.sort];
      const c = typeof x === "string" ? String(x).localeCompare(String(y)) : (x ?? -1) - (y ?? -1);
      return st.desc ? -c : c;
    });
    const shown = st.all ? rows : rows.slice(0, TOP);
    const top = Math.max(...rows.map((r) => r.ci_high || 0), 1e-9);
    const head = PRODUCT_COLS.map(([key, label]) => h("th", { scope: "col", "aria-sort": st.sort === key ? (st.desc ? "descending" : "ascending") : null },
      h("button", { type: "button", class: "sort", dataset: { sort: key }, on: { click: () => {
        st.desc = st.sort === key ? !st.desc : key !== "id";
        st.sort = key;
        const next = productsBox(d);
        box.replaceWith(next);
        next.querySelector(`button[data-sort="${key}"]`).focus(); // keep the keyboard user's place
      } } }, label, st.sort === key ? (st.desc ? " ▼" : " ▲") : "")));
    box.append(h("table", { class: "data", id: "products-table" }, h("thead", {}, h("tr", {}, head)),
      h("tbody", {}, shown.map((p) => h("tr", { dataset: { id: p.id } },
        h("td", {}, h("span", { class: "product-cell" }, thumb(p.id, p.title || p.id, "tiny"), h("span", {}, p.title || p.id))),
        h("td", { class: "num" }, fmt(p.impressions)), h("td", { class: "num" }, fmt(p.clicks)),
        h("td", { class: "num" }, pct(p.raw_ctr, 2)),
        h("td", { class: "num attr" }, `${pct(p.attractiveness_corrected, 1)} `,
          charts.interval(p.attractiveness_corrected, p.ci_low, p.ci_high, top,
            `${pct(p.attractiveness_corrected, 1)}, 95% interval ${pct(p.ci_low, 1)} to ${pct(p.ci_high, 1)}${p.shrunk ? ", shrunk toward its category" : ""}`),
          h("span", { class: "muted" }, ` ${pct(p.ci_low, 1)}–${pct(p.ci_high, 1)}`)),
        h("td", { class: "num" }, fmt(p.add_to_carts)), h("td", { class: "num" }, fmt(p.orders)),
        h("td", { class: "num" }, money(p.revenue, d.currencies)))))));
    if (rows.length > TOP) {
      box.append(h("button", { type: "button", id: "products-all", on: { click: () => {
        st.all = !st.all;
        box.replaceWith(productsBox(d));
      } } }, st.all ? `Show the top ${TOP}` : `Show all ${rows.length}`));
    }
    return box;
  }

  await load();
}
