// Search merchandising (#/queries): preview a search before and after query rules and
// synonyms (as of now or a date), the query rules and synonyms (add, enable/disable,
// delete), and the report of frequent zero-result and low-click queries. The server
// validates everything; the forms show its answer (the field it names).

import { call, enc, get, getAll, post } from "./api.js";
import { clear, fmt, h, thumb } from "./dom.js";

const KINDS = [["pin", "Pin a product at a position"], ["hide", "Hide products"], ["boost", "Boost products"],
  ["bury", "Bury products"], ["redirect", "Redirect to a collection"]];
const MATCHES = [["exact", "is exactly"], ["contains", "contains the words"], ["prefix", "starts with"],
  ["glob", "matches the pattern (* and ?)"]];
const COLS = { display: "grid", gridTemplateColumns: "1fr 1fr", gap: "16px" };

const titles = new Map(); // product id -> title, fetched once per page view

async function title(id) {
  if (!titles.has(id)) {
    titles.set(id, get(`/products/${enc(id)}`).then((p) => p.title || id, () => id));
  }
  return titles.get(id);
}

function field(id, label, input) {
  input.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), " ", input);
}

function select(options, value) {
  return h("select", {}, options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
}

const stamp = (local) => (local ? new Date(local).toISOString().replace(/\.\d{3}Z$/, "Z") : null);

export async function render(main, ctx) {
  const page = h("div", { class: "page queries" }, h("div", { class: "head" }, h("h1", {}, "Search merchandising")));
  main.append(page);
  // a preview's product can be taken into the rule form (called after `rules` exists)
  const preview = previewSection(ctx, ctx.can("merchandiser") ? (id) => rules.pick(id) : null);
  const rules = rulesSection(ctx, (q) => preview.show(q), () => preview.refresh());
  const synonyms = synonymsSection(ctx, () => preview.refresh());
  const report = h("section", { id: "qr-report", "aria-labelledby": "qr-report-h" },
    h("h2", { id: "qr-report-h" }, "Queries to look at"), h("p", { class: "muted" }, "Loading…"));
  page.append(preview.el, rules.el, synonyms.el, report);
  await Promise.all([rules.load(), synonyms.load(), loadReport(report, ctx, (q) => preview.show(q))]);
}

// ------------------------------------------------------------------ preview

function previewSection(ctx, pick) {
  const q = h("input", { type: "search", required: true, placeholder: "red dress", size: 24 });
  const at = h("input", { type: "datetime-local" });
  const status = h("p", { class: "muted", id: "qp-status", role: "status" });
  const before = h("ol", { id: "qp-before", class: "qp-list" });
  const after = h("ol", { id: "qp-after", class: "qp-list" });
  const notes = h("div", { id: "qp-notes" });
  const form = h("form", { id: "qp-form", class: "toolbar", on: { submit: (ev) => { ev.preventDefault(); run(); } } },
    field("qp-q", "Query", q), field("qp-at", "As of (optional)", at),
    h("button", { type: "submit", class: "primary" }, "Preview"));
  const el = h("section", { id: "qr-preview", "aria-labelledby": "qp-h", class: "card" },
    h("h2", { id: "qp-h" }, "Preview a search"), form, status,
    h("div", { style: COLS }, h("div", {}, h("h3", {}, "Without query rules"), before),
      h("div", {}, h("h3", {}, "With query rules and synonyms"), after)), notes);

  async function run() {
    const text = q.value.trim();
    if (!text) return;
    status.textContent = "Searching…";
    try {
      const res = await get("/search/preview", { q: text, k: 12, at: stamp(at.value) });
      const info = res.after.merchandising || { effects: [], conflicts: [], searched: [text] };
      draw(before, res.before.hits, [], pick);
      draw(after, res.after.hits, info.effects, pick);
      status.textContent = `${res.after.hits.length} results · searched: ${info.searched.join("; ")}`;
      clear(notes);
      if (res.after.redirect) {
        notes.append(h("p", { id: "qp-redirect", class: "card" }, "Shoppers are sent to the collection ",
          h("a", { href: `#/collections/${enc(res.after.redirect)}` }, res.after.redirect), "."));
      }
      for (const c of info.conflicts) {
        notes.append(h("p", { class: "card conflict" }, `Rule #${c.rule} does not apply: ${c.reason}` +
          (c.winner ? ` (rule #${c.winner} wins).` : ".")));
      }
    } catch (e) {
      status.textContent = ctx.explain(e);
    }
  }
  return {
    el,
    show(text) { q.value = text; run(); q.focus(); },
    refresh() { if (q.value.trim()) run(); },
  };
}

// the title is written beside it: the picture is decorative for a screen reader
function small(img) {
  img.alt = "";
  Object.assign(img.style, { width: "56px", flex: "none" });
  return img;
}

function draw(list, hits, effects, pick) {
  clear(list);
  const why = new Map();
  for (const e of effects) if (e.product) why.set(e.product, e.action);
  for (const hit of hits) {
    const name = h("span", { class: "title" }, hit.id);
    title(hit.id).then((t) => { name.textContent = t; });
    const action = why.get(hit.id);
    list.append(h("li", { dataset: { id: hit.id }, style: { display: "flex", gap: "8px", alignItems: "center" } },
      small(thumb(hit.id, hit.id, "thumb", false)), h("span", {}, name, h("br"), h("small", { class: "muted" }, hit.id)),
      action ? h("span", { class: "badge pinned" }, action) : null,
      pick ? h("button", { type: "button", class: "pick", "aria-label": `Use ${hit.id} in the rule form`,
        on: { click: () => pick(hit.id) } }, "Add to rule") : null));
  }
  if (!hits.length) list.append(h("li", { class: "muted" }, "No results."));
}

// ------------------------------------------------------------------ rules

function rulesSection(ctx, onPreview, onChange) {
  const table = h("div", { id: "qr-rules" }, h("p", { class: "muted" }, "Loading…"));
  const el = h("section", { id: "qr-rules-section", "aria-labelledby": "qr-h" },
    h("h2", { id: "qr-h" }, "Query rules"), table);
  async function load() {
    try {
      drawRules(table, await getAll("/query-rules"), ctx, async () => { await load(); onChange(); }, onPreview);
    } catch (e) {
      clear(table).append(h("p", { class: "error" }, ctx.explain(e)));
    }
  }
  let form = null;
  if (ctx.can("merchandiser")) {
    form = ruleForm(ctx, load, onPreview);
    el.append(form);
  }
  // a product taken from the preview joins the form's product list, and the form shows
  const pick = (id) => {
    const input = form && form.querySelector("#qr-products");
    if (!input) return;
    const ids = input.value.split(",").map((x) => x.trim()).filter(Boolean);
    if (!ids.includes(id)) ids.push(id);
    input.value = ids.join(", ");
    input.focus();
  };
  return { el, load, pick };
}

function drawRules(box, rows, ctx, reload, onPreview) {
  clear(box);
  if (!rows.length) {
    box.append(h("p", { class: "muted", id: "no-query-rules" }, "No query rules yet."));
    return;
  }
  const act = async (fn) => { try { await fn(); await reload(); } catch (e) { ctx.fail(e); } };
  box.append(h("table", { class: "data", id: "query-rules-table" },
    h("thead", {}, h("tr", {}, ["#", "Rule", "From", "Until", "In force", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => h("tr", { dataset: { id: String(r.id) } },
      h("td", { class: "num" }, String(r.id)),
      h("td", {}, r.description.replace(/^rule #\d+: /, "")),
      h("td", {}, r.starts_at || "–"), h("td", {}, r.ends_at || "–"),
      h("td", {}, r.active ? "yes" : (r.enabled ? "not now" : "disabled")),
      h("td", {},
        h("button", { type: "button", "aria-label": `Preview query rule ${r.id}`,
          on: { click: () => onPreview(r.query.replace(/[*?]/g, "").trim() || r.query) } }, "Preview"),
        ctx.can("merchandiser") ? [
          h("button", { type: "button", "aria-label": `${r.enabled ? "Disable" : "Enable"} query rule ${r.id}`,
            on: { click: () => act(() => call("PATCH", `/query-rules/${r.id}`,
              { body: { enabled: !r.enabled } })) } }, r.enabled ? "Disable" : "Enable"),
          h("button", { type: "button", "aria-label": `Delete query rule ${r.id}`,
            on: { click: () => act(() => call("DELETE", `/query-rules/${r.id}`)) } }, "Delete")] : null))))));
}

function ruleForm(ctx, reload, onPreview) {
  const kind = select(KINDS, "pin");
  const query = h("input", { type: "text", required: true, size: 20 });
  const match = select(MATCHES, "exact");
  const products = h("input", { type: "text", size: 28, placeholder: "product ids, comma separated" });
  const position = h("input", { type: "number", min: "1", value: "1", size: 4 });
  const factor = h("input", { type: "number", min: "0", max: "100", value: "50", size: 4 });
  const collection = h("input", { type: "text", size: 16 });
  const starts = h("input", { type: "datetime-local" });
  const ends = h("input", { type: "datetime-local" });
  const error = h("p", { class: "error", id: "qr-error", role: "alert" });
  const parts = { position: field("qr-position", "Position", position), factor: field("qr-factor", "Strength (0–100)", factor),
    collection: field("qr-collection", "Collection", collection), products: field("qr-products", "Products", products) };
  const shown = { pin: ["products", "position"], hide: ["products"], boost: ["products", "factor"],
    bury: ["products", "factor"], redirect: ["collection"] };
  const sync = () => { for (const [name, node] of Object.entries(parts)) node.hidden = !shown[kind.value].includes(name); };
  kind.addEventListener("change", sync);
  const form = h("form", { id: "qr-form", class: "card", on: { submit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const body = { kind: kind.value, query: query.value, match: match.value,
      products: products.value.split(",").map((x) => x.trim()).filter(Boolean),
      starts_at: stamp(starts.value), ends_at: stamp(ends.value) };
    if (kind.value === "pin") body.position = Number(position.value);
    if (kind.value === "boost" || kind.value === "bury") body.factor = Number(factor.value);
    if (kind.value === "redirect") { body.collection = collection.value.trim(); body.products = []; }
    try {
      const rule = await post("/query-rules", body);
      ctx.toast(`Added: ${rule.description}`);
      await reload();
      onPreview(rule.query.replace(/[*?]/g, "").trim() || rule.query);
    } catch (e) {
      error.textContent = ctx.explain(e);
    }
  } } },
  h("h3", {}, "Add a query rule"),
  field("qr-kind", "Action", kind), field("qr-query", "When the query", query), field("qr-match", "Match", match),
  parts.products, parts.position, parts.factor, parts.collection,
  field("qr-starts", "From (optional)", starts), field("qr-ends", "Until (optional)", ends),
  h("button", { type: "submit", class: "primary" }, "Add rule"), error);
  sync();
  return form;
}

// ------------------------------------------------------------------ synonyms

function synonymsSection(ctx, onChange) {
  const box = h("div", { id: "qr-synonyms" });
  const el = h("section", { id: "qr-synonyms-section", "aria-labelledby": "qs-h" },
    h("h2", { id: "qs-h" }, "Synonyms"), box);
  async function load() {
    try {
      const rows = await getAll("/synonyms");
      clear(box).append(rows.length ? h("table", { class: "data", id: "synonyms-table" },
        h("thead", {}, h("tr", {}, ["#", "Kind", "Terms", ""].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows.map((s) => h("tr", { dataset: { id: String(s.id) } },
          h("td", { class: "num" }, String(s.id)), h("td", {}, s.kind),
          h("td", {}, s.description.replace(/^synonym #\d+ \([^)]*\): /, "")),
          h("td", {}, ctx.can("merchandiser") ? h("button", { type: "button", "aria-label": `Delete synonym ${s.id}`,
            on: { click: async () => {
              try { await call("DELETE", `/synonyms/${s.id}`); await load(); onChange(); } catch (e) { ctx.fail(e); }
            } } }, "Delete") : null)))))
        : h("p", { class: "muted" }, "No synonyms yet."));
    } catch (e) {
      clear(box).append(h("p", { class: "error" }, ctx.explain(e)));
    }
  }
  if (ctx.can("merchandiser")) {
    const kind = select([["equivalent", "Equivalent (each stands for the others)"],
      ["one-way", "One-way (the term stands for the others)"]], "equivalent");
    const term = h("input", { type: "text", size: 14 });
    const terms = h("input", { type: "text", size: 30, required: true, placeholder: "sofa, couch, settee" });
    const error = h("p", { class: "error", id: "qs-error", role: "alert" });
    el.append(h("form", { id: "qs-form", class: "card", on: { submit: async (ev) => {
      ev.preventDefault();
      error.textContent = "";
      try {
        await post("/synonyms", { kind: kind.value, term: kind.value === "one-way" ? term.value : null,
          synonyms: terms.value.split(",").map((x) => x.trim()).filter(Boolean) });
        terms.value = "";
        await load();
        onChange();
      } catch (e) {
        error.textContent = ctx.explain(e);
      }
    } } }, h("h3", {}, "Add synonyms"), field("qs-kind", "Kind", kind),
    field("qs-term", "Term (one-way)", term), field("qs-terms", "Synonyms", terms),
    h("button", { type: "submit", class: "primary" }, "Add synonyms"), error));
  }
  return { el, load };
}

// ------------------------------------------------------------------ report

async function loadReport(box, ctx, onPreview) {
  let res;
  try {
    res = await get("/search/report");
  } catch (e) {
    clear(box).append(h("h2", { id: "qr-report-h" }, "Queries to look at"), h("p", { class: "error" }, ctx.explain(e)));
    return;
  }
  const table = (id, rows, cols) => (rows.length
    ? h("table", { class: "data", id }, h("thead", {}, h("tr", {}, [...cols.map(([t]) => t), ""].map((t) =>
      h("th", { scope: "col" }, t)))), h("tbody", {}, rows.map((r) => h("tr", {},
      cols.map(([, f]) => h("td", {}, fmt(f(r)))),
      h("td", {}, h("button", { type: "button", "aria-label": `Preview ${r.query}`,
        on: { click: () => onPreview(r.query) } }, "Preview"))))))
    : h("p", { class: "muted" }, "None in this window."));
  clear(box).append(h("h2", { id: "qr-report-h" }, "Queries to look at"),
    h("p", { class: "muted" }, `${res.searches.toLocaleString("en")} searches since ${res.since.slice(0, 10)} `,
      "(from the storefront's search events)."),
    h("h3", {}, "Nothing found"),
    table("zero-results-table", res.zero_results, [["Query", (r) => r.query], ["Searches", (r) => r.searches],
      ["Found nothing", (r) => r.zero_results], ["Last searched", (r) => (r.last_seen || "").slice(0, 16)]]),
    h("h3", {}, "Results seldom clicked"),
    table("low-clicks-table", res.low_clicks, [["Query", (r) => r.query], ["Searches", (r) => r.searches],
      ["Clicks", (r) => r.clicks], ["Click rate", (r) => `${(100 * (r.click_rate || 0)).toFixed(1)}%`],
      ["Results", (r) => r.avg_results]]));
}
