// A/B experiments of a collection's versions (#/collections/<id>/experiments), and of every
// collection (#/experiments): the list, and for a merchandiser the form that starts one. The
// form shows, before the start, how many visitors and days the test needs to detect the
// chosen lift (GET /experiments/plan, from the collection's recent traffic). The server
// checks everything (split, metric, one running experiment); the form only shows its answer.

import { enc, get, getAll, post } from "./api.js";
import { clear, fmt, h } from "./dom.js";

export const METRICS = [["revenue_per_visitor", "Revenue per visitor"],
  ["conversion_per_visitor", "Conversion per visitor"], ["ctr", "Click-through rate"]];
export const metricLabel = (m) => (METRICS.find(([k]) => k === m) || [m, m])[1];
const STATUS = { running: "running", stopped: "stopped", promoted: "promoted" };

export async function render(main, ctx, [collection]) {
  const list = h("div", { id: "experiments-list" }, h("p", { class: "muted" }, "Loading…"));
  const title = collection
    ? h("h1", {}, h("a", { href: "#/collections" }, "Collections"), " / ",
      h("a", { href: `#/collections/${enc(collection)}`, id: "editor-link" }, collection), " / Experiments")
    : h("h1", {}, "Experiments");
  const page = h("div", { class: "page experiments" }, h("div", { class: "head" }, title,
    collection ? h("a", { href: `#/collections/${enc(collection)}/analytics` }, "Analytics") : null));
  main.append(page);
  let rows = [];
  try {
    rows = await getAll("/experiments", collection ? { collection } : {});
    drawList(list, rows, !collection);
  } catch (e) {
    clear(list).append(h("p", { class: "error" }, ctx.explain(e)));
  }
  const running = rows.find((x) => x.status === "running");
  if (collection && ctx.can("merchandiser")) {
    page.append(running
      ? h("p", { class: "card", id: "x-running" }, h("a", { href: `#/experiments/${running.id}` }, running.name),
        " is running: one experiment per collection at a time, so stop or promote it before starting another.")
      : await createForm(ctx, collection));
  }
  page.append(h("h2", {}, collection ? `Experiments of ${collection}` : "All experiments"), list);
}

function drawList(box, rows, withCollection) {
  clear(box);
  if (!rows.length) {
    box.append(h("p", { class: "muted", id: "no-experiments" }, "No experiments yet."));
    return;
  }
  const heads = ["#", withCollection ? "Collection" : null, "Name", "Status", "Variants", "Metric", "Started", "Ended"]
    .filter(Boolean);
  box.append(h("table", { class: "data", id: "experiments-table" },
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, [...rows].reverse().map((x) => h("tr", { dataset: { id: String(x.id), status: x.status } },
      h("td", { class: "num" }, String(x.id)),
      withCollection ? h("td", {}, h("a", { href: `#/collections/${enc(x.collection)}/experiments` }, x.collection)) : null,
      h("td", {}, h("a", { href: `#/experiments/${x.id}`, class: "watch" }, x.name)),
      h("td", {}, h("span", { class: `status ${x.status}` }, STATUS[x.status] || x.status),
        x.winner ? ` · ${x.winner}` : ""),
      h("td", {}, x.variants.map((v) => `${v.name} ${fmt(v.weight, 0)}%`).join(" · ")),
      h("td", {}, metricLabel(x.metric)),
      h("td", { title: x.starts_at }, String(x.starts_at).slice(0, 16).replace("T", " ")),
      h("td", { title: x.ended_at || "" }, x.ended_at ? String(x.ended_at).slice(0, 16).replace("T", " ") : "–"))))));
}

// one row per saved version: include it, make it the control, its share of the visitors
function versionRows(versions, onChange) {
  const live = versions.find((v) => v.published) || versions[0];
  const other = [...versions].reverse().find((v) => v !== live);
  return versions.map((v) => {
    const on = v === live || v === other;
    const include = h("input", { type: "checkbox", id: `xv-${v.name}`, checked: on, dataset: { version: v.name },
      on: { change: () => onChange(true) } });
    const control = h("input", { type: "radio", name: "x-control", value: v.name, checked: v === live,
      "aria-label": `${v.name} is the control`, on: { change: () => onChange(false) } });
    const share = h("input", { type: "number", min: "1", max: "99", step: "any", size: 5, class: "share",
      "aria-label": `${v.name}: share of visitors in percent`, on: { input: () => onChange(false) } });
    const tr = h("tr", { dataset: { version: v.name } },
      h("td", {}, include, " ", h("label", { for: `xv-${v.name}` }, v.name),
        v.published ? h("span", { class: "badge pinned" }, "live") : null),
      h("td", {}, control), h("td", {}, share, " %"));
    return { name: v.name, tr, include, control, share };
  });
}

// the form's settings besides the versions; onChange: a setting the plan depends on moved
function settings(onChange) {
  const f = {
    metric: h("select", { id: "x-metric", on: { change: onChange } }, METRICS.map(([k, label]) => h("option", { value: k }, label))),
    guards: METRICS.map(([k]) => h("input", { type: "checkbox", value: k, class: "x-guardrail" })),
    lift: h("input", { id: "x-lift", type: "number", min: "0.1", max: "100", step: "0.1", value: "5", on: { input: onChange } }),
    holdout: h("input", { id: "x-holdout", type: "number", min: "0", max: "49", step: "1", value: "0", on: { input: onChange } }),
    name: h("input", { id: "x-name", maxLength: 200, placeholder: "optional", autocomplete: "off" }),
  };
  f.nodes = [h("div", { class: "grid-form" },
    h("label", {}, "Primary metric", f.metric),
    h("label", {}, "Minimum lift to detect (%)", f.lift),
    h("label", {}, "Holdout: visitors kept on the live version (%)", f.holdout),
    h("label", {}, "Name", f.name)),
  h("fieldset", { class: "guardrails" }, h("legend", {}, "Guardrails: flag a variant that makes these worse"),
    f.guards.map((c, i) => h("label", { class: "check" }, c, METRICS[i][1])))];
  return f;
}

// the plan estimate, asked again (debounced) whenever the choice changes
function planner(ctx, collection, estimate, chosen, f) {
  let timer = null;
  let asked = 0;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const mine = ++asked; // a slow answer to an older question must not overwrite a newer one
      const n = chosen().length;
      if (n < 2) { estimate.textContent = "Choose two or more versions."; return; }
      try {
        const res = await get("/experiments/plan", { collection, metric: f.metric.value, variants: n,
          min_lift: Number(f.lift.value) / 100, holdout: Number(f.holdout.value) / 100 });
        if (mine === asked) showPlan(estimate, res, metricLabel(f.metric.value));
      } catch (e) {
        if (mine === asked) estimate.textContent = ctx.explain(e);
      }
    }, 250);
  };
}

async function createForm(ctx, collection) {
  const versions = await getAll(`/collections/${enc(collection)}/versions`);
  const box = h("section", { class: "card create-experiment", "aria-labelledby": "x-create-title" },
    h("h2", { id: "x-create-title" }, "Start an experiment"));
  if (versions.length < 2) {
    box.append(h("p", { class: "muted", id: "x-too-few" }, `An experiment compares two or more saved versions of ${collection}; `,
      "it has ", String(versions.length), ". Save another arrangement as a draft in the ",
      h("a", { href: `#/collections/${enc(collection)}` }, "editor"), "."));
    return box;
  }
  const estimate = h("p", { id: "plan-estimate", class: "estimate", "aria-live": "polite" }, "Estimating…");
  const error = h("p", { class: "error", id: "x-error", role: "alert" });
  const rows = versionRows(versions, (reshare) => { if (reshare) evenSplit(rows); refreshPlan(); });
  const f = settings(() => refreshPlan());
  const chosen = () => { // the control first, as the API wants
    const control = rows.find((r) => r.control.checked && r.include.checked);
    const rest = rows.filter((r) => r.include.checked && r !== control);
    return control ? [control, ...rest] : rest;
  };
  const refreshPlan = planner(ctx, collection, estimate, chosen, f);
  const form = h("form", { id: "x-create", on: { submit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const picked = chosen();
    try {
      const made = await post("/experiments", { collection, variants: picked.map((r) => r.name),
        split: picked.map((r) => Number(r.share.value)), metric: f.metric.value,
        guardrails: f.guards.filter((c) => c.checked).map((c) => c.value), min_lift: Number(f.lift.value) / 100,
        holdout: Number(f.holdout.value) / 100, name: f.name.value.trim() || null });
      ctx.toast(`Experiment ${made.name || made.id} started on ${collection}`);
      ctx.go(`#/experiments/${made.id}`);
    } catch (e) {
      error.textContent = ctx.explain(e);
    }
  } } },
  h("table", { class: "data compact", id: "x-versions" },
    h("caption", { class: "muted" }, "Versions to compare (the control is what shoppers see now, usually the live one)"),
    h("thead", {}, h("tr", {}, ["Version", "Control", "Share"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows.map((r) => r.tr))),
  f.nodes, estimate, h("button", { type: "submit", class: "primary", id: "x-start" }, "Start experiment"), error);
  box.append(form);
  evenSplit(rows);
  refreshPlan();
  return box;
}

function evenSplit(rows) {
  const picked = rows.filter((r) => r.include.checked);
  for (const r of rows) {
    r.share.disabled = !r.include.checked;
    r.share.value = r.include.checked ? String(+(100 / picked.length).toFixed(4)) : "";
  }
}

function showPlan(box, res, label) {
  const p = res.plan;
  clear(box);
  if (!p) {
    box.append("Too little recent traffic in this collection to estimate the sample: the experiment can start, ",
      "but its results will stay “not yet conclusive” without a plan.");
    return;
  }
  box.append(`To detect a +${fmt(res.min_lift * 100, 1)}% change in ${label.toLowerCase()} (α = ${p.alpha}, power ${fmt(p.power * 100, 0)}%): `,
    h("strong", { id: "plan-per-variant" }, p.per_variant.map((n) => fmt(n)).join(" / ")), " visitors per variant, ",
    h("strong", { id: "plan-total" }, fmt(p.total)), " in all",
    p.days ? [", about ", h("strong", { id: "plan-days" }, `${fmt(p.days)} day${p.days === 1 ? "" : "s"}`),
      ` at ${fmt(Math.round(p.visitors_per_day))} visitors a day (last 28 days).`] : ".");
}
