// Shopper analytics shared by the analytics page, the editor's real-unit overlays and the
// version diff: the period choice, one cached read of GET /analytics/collections/{c}, and
// how its numbers are written. The server computes every figure; this only formats them.

import { enc, get } from "./api.js";
import { fmt, h } from "./dom.js";

export const PERIODS = [[7, "Last 7 days"], [28, "Last 28 days"], [90, "Last 90 days"], [0, "All time"]];
// the editor overlays that read shopper events, and the product field each shows
export const PERF = { views: "impressions", clicks: "clicks", orders: "orders", revenue: "revenue" };

// "last N days" counts today: since = the UTC date N-1 days ago (inclusive)
export function sinceOf(days) {
  if (!days) return null;
  return new Date(Date.now() - (days - 1) * 86400000).toISOString().slice(0, 10);
}

const cache = new Map(); // one answer per (collection, period, products) for a few seconds
export async function analytics(collection, days, { products = false } = {}) {
  const key = `${collection}|${days}|${products}`;
  const hit = cache.get(key);
  if (hit && Date.now() - hit.at < 5000) return hit.data;
  const data = await get(`/analytics/collections/${enc(collection)}`, { since: sinceOf(days), products: products || null });
  cache.set(key, { at: Date.now(), data });
  return data;
}

export function periodSelect(id, days, onChange) {
  const sel = h("select", { id, "aria-label": "Period", on: { change: () => onChange(Number(sel.value)) } },
    PERIODS.map(([d, label]) => h("option", { value: String(d), selected: d === days }, label)));
  return sel;
}

// revenue in the one currency of the period; several currencies are summed as they came
export function money(value, currencies) {
  if (value === null || value === undefined) return "–";
  const cur = currencies && currencies.length === 1 ? currencies[0] : null;
  if (cur) {
    try {
      return new Intl.NumberFormat("en", { style: "currency", currency: cur }).format(value);
    } catch (_) { /* not an ISO code: plain number below */ }
  }
  return `${value.toFixed(2)}${currencies && currencies.length > 1 ? " (mixed currencies)" : ""}`;
}

export function pct(value, digits = 1) {
  return value === null || value === undefined ? "–" : `${(value * 100).toFixed(digits)}%`;
}

// the funnel columns of a totals / by_version / by_day row, as [name, label, text]
export function funnelCells(row, currencies) {
  return [
    ["impressions", "Impressions", fmt(row.impressions)],
    ["clicks", "Clicks", fmt(row.clicks)],
    ["add_to_carts", "Add to carts", fmt(row.add_to_carts)],
    ["orders", "Orders", fmt(row.orders)],
    ["revenue", "Revenue", money(row.revenue, currencies)],
    ["ctr", "CTR", pct(row.ctr, 2)],
    ["conversion", "Conversion", pct(row.conversion, 2)],
    ["rpm", "Revenue / 1,000 impr.", money(row.revenue_per_1000_impressions, currencies)],
  ];
}

// a table of funnel rows; `label(row)` names each row (a version, a day); `only`: some columns
export function funnelTable(id, head, rows, label, currencies, only = null) {
  const cells = (row) => funnelCells(row, currencies).filter(([name]) => !only || only.includes(name));
  const cols = rows.length ? cells(rows[0]).map(([, l]) => l) : [];
  return h("table", { class: "data", id },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, head), cols.map((c) => h("th", { scope: "col", class: "num" }, c)))),
    h("tbody", {}, rows.map((row) => h("tr", { dataset: row.dataset || {} },
      h("th", { scope: "row" }, label(row)),
      cells(row).map(([name, , text]) => h("td", { class: `num ${name}` }, text))))));
}
