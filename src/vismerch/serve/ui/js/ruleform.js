// The rule form: every registered kind (GET /rules/kinds builds the choices), with a product
// picker (thumbnails and names) for pins, a condition builder (fields from GET /rules/fields,
// a live match count from GET /rules/count), strength, scope and dates. Before saving, the
// rule is checked (POST /rules/check) and conflicting pins are shown in the form; a second
// click saves anyway. Errors name the field they concern.

import { call, enc, get, post } from "./api.js";
import { clear, h, thumb } from "./dom.js";

const OPS = [["==", "is"], ["!=", "is not"], ["<", "<"], ["<=", "≤"], [">", ">"], [">=", "≥"],
  ["in", "is one of"], ["contains", "contains"]];
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
let seq = 0;

// a typed value as the expression language reads it: numbers bare, true/false, else quoted
function literal(value, type) {
  const text = value.trim();
  if (type === "number" && text !== "" && !Number.isNaN(Number(text))) return text;
  if (type === "boolean" && (text === "true" || text === "false")) return text;
  return JSON.stringify(text);
}

export function conditionText(rows, joiner) {
  const parts = rows.filter((r) => r.field && r.value.trim() !== "").map((r) => {
    if (r.op === "in") return `${r.field} in [${r.value.split(",").map((v) => literal(v, r.type)).join(", ")}]`;
    if (r.op === "contains") return `${literal(r.value, "text")} in ${r.field}`;
    return `${r.field} ${r.op} ${literal(r.value, r.type)}`;
  });
  return parts.join(` ${joiner} `);
}

// "2026-12-24T08:00:00Z" <-> the value of an <input type="datetime-local"> (shown in UTC)
const toLocal = (stamp) => (stamp ? stamp.replace(/Z$/, "").slice(0, 16) : "");
const toStamp = (local) => (local ? `${local.length === 16 ? `${local}:00` : local}Z` : null);

function labelled(text, control, extra = {}) {
  return h("label", { class: "field", ...extra }, h("span", {}, text), control);
}

// ruleForm(ctx, {collection, kinds, fields, rule, onSaved, onCancel}) -> <form>
export function ruleForm(ctx, { collection, kinds, fields, rule = null, onSaved, onCancel }) {
  const id = `rf${++seq}`;
  const usable = fields.filter((f) => FIELD_NAME.test(f.name));
  const typeOf = new Map(usable.map((f) => [f.name, f.type]));
  const st = { rows: [], joiner: "and", product: rule ? rule.product : null, acknowledged: null, timer: null };

  const kind = h("select", { id: `${id}-kind`, name: "kind" }, kinds.map((k) => h("option", { value: k.name, title: k.summary }, k.name)));
  kind.value = rule ? rule.kind : "boost";
  const summary = h("p", { class: "muted kind-summary", id: `${id}-summary` });

  // ---- pin: product picker and position
  const pick = h("input", { id: `${id}-find`, type: "search", placeholder: "Name or id…", autocomplete: "off" });
  const picked = h("div", { class: "picked", id: `${id}-picked`, "aria-live": "polite" });
  const choices = h("div", { class: "place-results", id: `${id}-choices` });
  const position = h("input", { id: `${id}-position`, name: "position", type: "number", min: 1, value: rule && rule.position ? rule.position : 1, size: 5 });
  const oos = h("select", { id: `${id}-oos`, name: "oos_policy" },
    [["release", "release the slot"], ["substitute", "most similar in stock"], ["keep", "keep it"]].map(([v, t]) => h("option", { value: v }, t)));
  oos.value = rule ? rule.oos_policy : "release";
  const pinBox = h("fieldset", { class: "pin-fields" }, h("legend", {}, "Product"),
    labelled("Find a product", pick), choices, picked,
    labelled("Position", position), labelled("When out of stock", oos));

  // ---- condition builder
  const rowsBox = h("div", { class: "cond-rows", id: `${id}-rows` });
  const joiner = h("select", { id: `${id}-joiner`, "aria-label": "Combine conditions" },
    h("option", { value: "and" }, "all of"), h("option", { value: "or" }, "any of"));
  const advanced = h("textarea", { id: `${id}-where`, name: "where", rows: 2, spellcheck: "false", class: "code" });
  const count = h("div", { class: "match-count", id: `${id}-count`, "aria-live": "polite" });
  const addRow = h("button", { type: "button", id: `${id}-add-row`, on: { click: () => { st.rows.push({ field: usable[0] ? usable[0].name : "", op: "==", value: "", type: usable[0] ? usable[0].type : "text" }); drawRows(); } } }, "+ condition");
  const condBox = h("fieldset", { class: "cond-fields" }, h("legend", {}, "Products matching"),
    h("div", { class: "inline" }, "Match ", joiner, " these:"), rowsBox, addRow,
    labelled("Expression", advanced), count);

  // ---- strength, scope, dates, note
  const factor = h("input", { id: `${id}-factor`, name: "factor", type: "number", min: 0, max: 100, step: 1, size: 5 });
  const factorHelp = h("span", { class: "muted" });
  const factorBox = h("div", { class: "inline" }, labelled("Strength (0-100)", factor), factorHelp);
  const scope = h("select", { id: `${id}-scope`, name: "scope" },
    h("option", { value: "collection" }, `this collection (${collection})`),
    h("option", { value: "subtree" }, `${collection} and its sub-collections`),
    h("option", { value: "global" }, "every collection (global)"));
  scope.value = !rule ? "collection" : (rule.collection === null ? "global" : rule.reach);
  const starts = h("input", { id: `${id}-starts`, name: "starts_at", type: "datetime-local", value: toLocal(rule && rule.starts_at) });
  const ends = h("input", { id: `${id}-ends`, name: "ends_at", type: "datetime-local", value: toLocal(rule && rule.ends_at) });
  const note = h("input", { id: `${id}-note`, name: "note", type: "text", value: (rule && rule.note) || "", maxlength: 2000 });
  const warnings = h("div", { class: "conflicts", id: `${id}-conflicts`, role: "alert" });
  const error = h("p", { class: "error", id: `${id}-error`, role: "alert" });
  const save = h("button", { type: "submit", class: "primary", id: `${id}-save` }, rule ? "Save changes" : "Add rule");

  const form = h("form", { class: "rule-form card", id: "rule-form", "aria-label": rule ? `Edit rule ${rule.id}` : "New rule", on: { submit: (ev) => { ev.preventDefault(); submit(); } } },
    h("h3", {}, rule ? `Edit rule #${rule.id}` : "New rule"),
    labelled("Kind", kind), summary, pinBox, condBox, factorBox,
    labelled("Applies to", scope),
    h("div", { class: "inline" }, labelled("From (UTC)", starts), labelled("Until (UTC, exclusive)", ends)),
    labelled("Note", note), warnings, error,
    h("div", { class: "inline" }, save, h("button", { type: "button", id: `${id}-cancel`, on: { click: () => onCancel && onCancel() } }, "Cancel")));

  const kindInfo = () => kinds.find((k) => k.name === kind.value) || kinds[0];

  function drawKind() {
    const k = kindInfo();
    summary.textContent = k.summary;
    pinBox.hidden = k.target !== "product";
    condBox.hidden = k.target !== "condition" || !!k.fixed_condition;
    factorBox.hidden = !k.uses_factor;
    if (factor.value === "" || (!rule && factor.dataset.touched !== "1")) factor.value = String(rule && rule.kind === k.name ? rule.factor : k.default_factor);
    drawFactorHelp();
    changed();
  }

  function drawFactorHelp() {
    const k = kindInfo();
    const v = Number(factor.value) || 0;
    factorHelp.textContent = k.uses_factor ? `${k.name.startsWith("boost") ? "up" : "down"} by ${v}% of the positions${v >= 100 ? " (to the " + (k.name.startsWith("boost") ? "top" : "bottom") + ")" : ""}` : "";
  }

  function drawRows() {
    clear(rowsBox);
    st.rows.forEach((row, i) => {
      const field = h("select", { "aria-label": `Field of condition ${i + 1}`, class: "cond-field" }, usable.map((f) => h("option", { value: f.name }, f.name)));
      field.value = row.field;
      const op = h("select", { "aria-label": `Operator of condition ${i + 1}`, class: "cond-op" }, OPS.map(([v, t]) => h("option", { value: v }, t)));
      op.value = row.op;
      const listId = `${id}-values-${i}`;
      const info = usable.find((f) => f.name === row.field);
      const values = h("datalist", { id: listId }, ((info && info.values) || (info && info.type === "boolean" ? ["true", "false"] : [])).map((v) => h("option", { value: v })));
      const value = h("input", { "aria-label": `Value of condition ${i + 1}`, class: "cond-value", list: listId, value: row.value, placeholder: row.op === "in" ? "a, b, c" : "value" });
      field.addEventListener("change", () => { row.field = field.value; row.type = typeOf.get(field.value) || "text"; drawRows(); fromRows(); });
      op.addEventListener("change", () => { row.op = op.value; fromRows(); });
      value.addEventListener("input", () => { row.value = value.value; fromRows(); });
      rowsBox.append(h("div", { class: "cond-row" }, field, op, value, values,
        h("button", { type: "button", class: "danger", "aria-label": `Remove condition ${i + 1}`, on: { click: () => { st.rows.splice(i, 1); drawRows(); fromRows(); } } }, "×")));
    });
  }

  function fromRows() {
    advanced.value = conditionText(st.rows, st.joiner);
    changed();
  }

  function where() {
    const k = kindInfo();
    return k.target === "condition" && !k.fixed_condition ? advanced.value.trim() : null;
  }

  function body() {
    const k = kindInfo();
    const out = { kind: k.name, collection: scope.value === "global" ? null : collection,
      reach: scope.value === "subtree" ? "subtree" : "collection",
      starts_at: toStamp(starts.value), ends_at: toStamp(ends.value), note: note.value || null };
    if (k.target === "product") Object.assign(out, { product: st.product, position: parseInt(position.value, 10) || null, oos_policy: oos.value });
    else if (!k.fixed_condition) out.where = where();
    if (k.uses_factor) out.factor = Number(factor.value);
    return out;
  }

  // the live count (debounced): how many of the collection's products the condition matches
  async function countNow() {
    const text = where();
    clear(count);
    if (!text) { count.append(h("span", { class: "muted" }, "Add a condition to see how many products it matches.")); return; }
    try {
      const res = await get("/rules/count", { where: text, collection: scope.value === "global" ? null : collection });
      if (text !== where()) return; // typed on meanwhile
      count.append(h("strong", { id: `${id}-matches` }, `${res.matches} of ${res.total} products match`),
        h("div", { class: "strip" }, res.sample.map((p) => h("figure", { class: "mini", title: p.title || p.id }, thumb(p.id, p.title || p.id), h("figcaption", {}, p.title || p.id)))));
    } catch (e) {
      count.append(h("span", { class: "error" }, ctx.explain(e)));
    }
  }

  // a change of what would be saved drops the warning (a blur's "change" event alone does not)
  function changed() {
    if (st.acknowledged !== null && st.acknowledged === JSON.stringify(body())) return;
    st.acknowledged = null;
    save.textContent = rule ? "Save changes" : "Add rule";
    clear(warnings);
    error.textContent = "";
    clearTimeout(st.timer);
    st.timer = setTimeout(() => { if (!condBox.hidden) countNow(); if (!pinBox.hidden) check(); }, 250);
  }

  // conflicts the rule would have, shown before saving; the answer's JSON is remembered so
  // that a second click on "Save anyway" saves exactly what was warned about
  async function check() {
    const k = kindInfo();
    if (k.target !== "product" || !st.product) return [];
    const sent = body();
    try {
      const res = await post("/rules/check", rule ? { ...sent, id: rule.id } : sent);
      clear(warnings);
      if (res.conflicts.length) {
        warnings.append(h("strong", {}, "Conflicts with other rules:"),
          h("ul", {}, res.conflicts.map((c) => h("li", { class: "conflict", dataset: { kind: c.kind } }, c.message))));
      }
      return res.conflicts;
    } catch (e) {
      showError(e);
      return null;
    }
  }

  function showError(e) {
    error.textContent = ctx.explain(e);
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    const named = { where: advanced, factor, position, product: pick, starts_at: starts, ends_at: ends, collection: scope, kind }[e.field];
    if (named) { named.setAttribute("aria-invalid", "true"); named.focus(); }
  }

  async function submit() {
    const sent = body();
    const key = JSON.stringify(sent);
    if (kindInfo().target === "product") {
      if (!st.product) { showError({ field: "product", message: "Choose the product to pin" }); error.textContent = "Choose the product to pin."; return; }
      if (st.acknowledged !== key) {
        const found = await check();
        if (found === null) return;
        if (found.length) { st.acknowledged = key; save.textContent = "Save anyway"; return; }
      }
    }
    try {
      const saved = rule ? (await call("PATCH", `/rules/${rule.id}`, { body: sent })).data : await post("/rules", sent);
      onSaved(saved, rule);
    } catch (e) {
      showError(e);
    }
  }

  async function choose(pid, title) {
    st.product = pid;
    clear(choices);
    clear(picked).append(h("div", { class: "product-cell" }, thumb(pid, title || pid, "tiny"), h("span", { id: `${id}-picked-name` }, title || pid)));
    changed();
  }

  // the picker searches the collection's titles and ids (the count endpoint's sample)
  pick.addEventListener("input", () => {
    clearTimeout(st.findTimer);
    st.findTimer = setTimeout(async () => {
      const text = pick.value.trim();
      clear(choices);
      if (!text) return;
      try {
        const q = JSON.stringify(text);
        const res = await get("/rules/count", { where: `${q} in title or id == ${q}`, collection });
        if (!res.sample.length) choices.append(h("span", { class: "muted" }, "no match"));
        for (const p of res.sample) {
          choices.append(h("button", { type: "button", class: "mini choice", title: `Pin ${p.title || p.id}`, on: { click: () => choose(p.id, p.title) } },
            thumb(p.id, p.title || p.id), h("span", {}, p.title || p.id)));
        }
      } catch (e) {
        choices.append(h("span", { class: "error" }, ctx.explain(e)));
      }
    }, 200);
  });

  kind.addEventListener("change", drawKind);
  joiner.addEventListener("change", () => { st.joiner = joiner.value; fromRows(); });
  advanced.addEventListener("input", changed);
  factor.addEventListener("input", () => { factor.dataset.touched = "1"; drawFactorHelp(); changed(); });
  for (const el of [position, oos, scope, starts, ends]) el.addEventListener("change", changed);

  if (rule && rule.where) advanced.value = rule.where;
  if (rule && rule.product) {
    get(`/products/${enc(rule.product)}`, { similar: 0 }).then((p) => choose(p.id, p.title)).catch(() => choose(rule.product, rule.product));
  }
  if (!rule) { st.rows.push({ field: usable.some((f) => f.name === "brand") ? "brand" : (usable[0] || {}).name, op: "==", value: "", type: "text" }); st.rows[0].type = typeOf.get(st.rows[0].field) || "text"; }
  drawRows();
  drawKind();
  return form;
}
