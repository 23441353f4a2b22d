// The grid editor's Rules tab: every rule that reaches the page as a card (products by name
// and thumbnail, not id lists), with edit, disable/enable and delete; a "New rule" form
// (ruleform.js) for every kind; and undo of the last rule edits of this session: each edit
// pushes its inverse API call (delete <-> create again, change <-> change back).

import { call, enc, get, getAll, post } from "./api.js";
import { clear, fmt, h, thumb } from "./dom.js";
import { ruleForm } from "./ruleform.js";

const UNDO_DEPTH = 20;
const undo = []; // {label, run: async () => void}, newest last; lives as long as the page
const renamed = new Map(); // a deleted rule made again gets a new id: old id -> new id
const titles = new Map(); // product id -> title (or the id when it has none)

const live = (ruleId) => (renamed.has(ruleId) ? live(renamed.get(ruleId)) : ruleId);

const FIELDS = ["kind", "collection", "product", "position", "where", "factor", "starts_at", "ends_at", "reach", "oos_policy", "note", "enabled"];

// the fields a rule can be made again from (what POST /rules takes), or, with nulls, every
// field to change it back to (PATCH: a null clears a field the edit had set)
function recreatable(r, withNulls = false) {
  const out = {};
  for (const k of FIELDS) {
    if (withNulls || (r[k] !== null && r[k] !== undefined)) out[k] = r[k] === undefined ? null : r[k];
  }
  return out;
}

// products a condition names one by one (id == "x", id in ["x", "y"]): shown as thumbnails
export function namedProducts(where) {
  if (!where || !/^\s*id\s*(==|in)\s*/.test(where)) return [];
  return [...where.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]}"`));
}

async function titleOf(pid) {
  if (!titles.has(pid)) {
    try {
      titles.set(pid, (await get(`/products/${enc(pid)}`, { similar: 0 })).title || pid);
    } catch (_) {
      titles.set(pid, pid);
    }
  }
  return titles.get(pid);
}

function productChip(pid) {
  const name = h("span", {}, titles.get(pid) || pid);
  titleOf(pid).then((t) => { name.textContent = t; img.alt = t; });
  const img = thumb(pid, titles.get(pid) || pid, "tiny");
  return h("span", { class: "product-cell", title: pid }, img, name);
}

// a rule in words for a toast, its product by name
async function said(r) {
  if (r.kind === "pin") return `pin ${await titleOf(r.product)} at ${r.position}`;
  return `${r.kind} ${r.kind === "bury-out-of-stock" ? "" : r.where || ""}`.trim();
}

function when(r) {
  if (!r.starts_at && !r.ends_at) return "always";
  return `${r.starts_at ? fmt(r.starts_at) : "…"} → ${r.ends_at ? fmt(r.ends_at) : "…"}`;
}

function scopeText(r) {
  if (r.inherited_from) return `from ${r.inherited_from} (parent)`;
  if (!r.collection) return "every collection";
  return r.reach === "subtree" ? `${r.collection} and below` : r.collection;
}

// rulesPanel(ctx, collection, {editable, onChange}) -> {el, draw(rules)}
export function rulesPanel(ctx, collection, { editable, onChange }) {
  const el = h("div", { class: "rules-panel" });
  const head = h("div", { class: "inline" });
  const formBox = h("div", { id: "rule-form-box" });
  const list = h("ol", { class: "rule-list", id: "rule-list", "aria-label": "Rules on this page" });
  const settled = h("div", { class: "conflicts", id: "page-conflicts", role: "status" });
  const undoBtn = h("button", { type: "button", id: "rule-undo", on: { click: () => undoLast() } }, "Undo");
  let meta = null;
  let rules = [];

  el.append(head, formBox, settled, list);

  async function loadMeta() {
    if (!meta) {
      const [kinds, fields] = await Promise.all([get("/rules/kinds"), get("/rules/fields", { collection })]);
      meta = { kinds, fields };
    }
    return meta;
  }

  function drawUndo() {
    const top = undo[undo.length - 1];
    undoBtn.disabled = !top;
    undoBtn.textContent = top ? `Undo: ${top.label}` : "Undo";
    undoBtn.title = top ? `Undo the last rule edit (${undo.length} in this session)` : "Nothing to undo";
  }

  function push(label, run) {
    undo.push({ label, run });
    if (undo.length > UNDO_DEPTH) undo.shift();
    drawUndo();
  }

  async function undoLast() {
    const step = undo.pop();
    drawUndo();
    if (!step) return;
    try {
      await step.run();
      ctx.toast(`Undone: ${step.label}`);
    } catch (e) {
      ctx.fail(e);
    }
    await onChange();
  }

  async function openForm(rule = null) {
    let m;
    try {
      m = await loadMeta();
    } catch (e) {
      ctx.fail(e);
      return;
    }
    const form = ruleForm(ctx, { collection, kinds: m.kinds, fields: m.fields, rule,
      onCancel: () => clear(formBox),
      onSaved: async (saved, before) => {
        clear(formBox);
        if (before) {
          const back = recreatable(before, true);
          push(`edit of rule #${saved.id}`, () => call("PATCH", `/rules/${live(saved.id)}`, { body: back }));
          ctx.toast(`Rule #${saved.id} saved`);
        } else {
          push(`new rule #${saved.id}`, () => call("DELETE", `/rules/${live(saved.id)}`));
          ctx.toast(`Added rule #${saved.id}: ${await said(saved)}`);
        }
        await onChange();
      } });
    clear(formBox).append(form);
    form.querySelector("select, input").focus();
  }

  async function setEnabled(r, enabled) {
    try {
      await call("PATCH", `/rules/${live(r.id)}`, { body: { enabled } });
      push(`${enabled ? "enabling" : "disabling"} rule #${r.id}`, () => call("PATCH", `/rules/${live(r.id)}`, { body: { enabled: !enabled } }));
      ctx.toast(`Rule #${r.id} ${enabled ? "enabled" : "disabled"}`);
    } catch (e) {
      ctx.fail(e);
    }
    await onChange();
  }

  async function remove(r) {
    try {
      await call("DELETE", `/rules/${live(r.id)}`);
      const again = recreatable(r);
      push(`deleting rule #${r.id}`, async () => {
        const made = await post("/rules", again);
        renamed.set(live(r.id), made.id);
      });
      ctx.toast(`Deleted rule #${r.id}: ${await said(r)}`);
    } catch (e) {
      ctx.fail(e);
    }
    await onChange();
  }

  function what(r) {
    if (r.kind === "pin") return h("div", { class: "what" }, productChip(r.product), h("span", {}, ` at position ${r.position}`));
    const named = namedProducts(r.where);
    const strength = r.factor && r.kind !== "hide" ? ` · strength ${fmt(r.factor)}` : "";
    if (named.length) {
      return h("div", { class: "what" }, h("div", { class: "chips" }, named.slice(0, 6).map(productChip)),
        named.length > 6 ? h("span", { class: "muted" }, `and ${named.length - 6} more`) : null, h("span", { class: "muted" }, strength));
    }
    return h("div", { class: "what" }, h("code", {}, r.kind === "bury-out-of-stock" ? "stock <= 0" : r.where || ""), h("span", { class: "muted" }, strength));
  }

  function card(r) {
    const state = !r.enabled ? "disabled" : (r.active ? "active" : "not active now");
    const actions = editable && !r.inherited_from ? h("div", { class: "rule-actions" },
      h("button", { type: "button", class: "edit", "aria-label": `Edit rule ${r.id}`, on: { click: () => openForm(r) } }, "Edit"),
      h("button", { type: "button", class: "toggle", "aria-label": `${r.enabled ? "Disable" : "Enable"} rule ${r.id}`, on: { click: () => setEnabled(r, !r.enabled) } }, r.enabled ? "Disable" : "Enable"),
      h("button", { type: "button", class: "danger delete", "aria-label": `Delete rule ${r.id}`, on: { click: () => remove(r) } }, "Delete")) : null;
    return h("li", { class: `rule ${r.active ? "" : "inactive"}`, dataset: { rule: String(r.id), kind: r.kind } },
      h("div", { class: "rule-head" }, h("span", { class: `kind kind-${r.kind}` }, r.kind), h("span", { class: "muted" }, `#${r.id} · ${scopeText(r)}`),
        h("span", { class: `state ${state.replace(/ /g, "-")}` }, state)),
      what(r),
      h("div", { class: "muted when" }, when(r), r.note ? ` · ${r.note}` : ""),
      actions);
  }

  // the conflicts the arrangement settled (a pin that lost its slot, a pin on a hidden product)
  function drawConflicts(conflicts) {
    clear(settled);
    if (!conflicts.length) return;
    settled.append(h("strong", {}, "Settled on this page:"),
      h("ul", {}, conflicts.map((c) => h("li", { dataset: { kind: c.kind } }, `rule #${c.rule}: ${c.resolution}`))));
  }

  function draw(next, conflicts = []) {
    rules = next;
    clear(head).append(h("span", { class: "muted" }, `${rules.length} rules reach this page (own, inherited, global).`));
    if (editable) head.append(h("button", { type: "button", class: "primary", id: "new-rule", on: { click: () => openForm() } }, "New rule"), undoBtn);
    drawUndo();
    drawConflicts(conflicts);
    clear(list).append(...rules.map(card));
  }

  return { el, draw, openForm };
}

export async function loadRules(collection) {
  return getAll(`/collections/${enc(collection)}/rules`);
}
