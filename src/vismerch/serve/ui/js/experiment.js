// One experiment (#/experiments/<id>): its status and the reason, how much of the planned
// sample is in, a loud warning when the split is broken (sample-ratio mismatch), the primary
// metric per variant over time with intervals, the per-variant table (value, interval, lift
// against the control with its interval, Holm-adjusted p), the guardrails, and Stop /
// Promote for the roles allowed them. Every figure comes from GET /experiments/{id}/results.

import { enc, get, post } from "./api.js";
import { append, clear, confirmDialog, fmt, h } from "./dom.js";
import { pct } from "./metrics.js";
import { metricLabel } from "./experiments.js";
import { timeline } from "./xchart.js";

const STATUS_TEXT = { not_yet_conclusive: "Not yet conclusive", winner: "Winner",
  no_difference: "No difference", sample_ratio_mismatch: "Sample ratio mismatch" };
const REFRESH_MS = 30000;

// how a metric's values are written: revenue as a number, rates as percentages
export function formatter(metric) {
  return metric === "revenue_per_visitor" ? (v) => fmt(v, 2) : (v) => pct(v, 2);
}

export async function render(main, ctx, [id]) {
  const body = h("div", { id: "experiment-body" }, h("p", { class: "muted" }, "Loading…"));
  const title = h("h1", {}, h("a", { href: "#/experiments" }, "Experiments"), " / ", h("span", { id: "x-title" }, `#${id}`));
  main.append(h("div", { class: "page experiment" }, h("div", { class: "head" }, title), body));
  let timer = null;

  async function load() {
    let r;
    try {
      r = await get(`/experiments/${enc(id)}/results`);
    } catch (e) {
      clear(body).append(h("p", { class: "error" }, ctx.explain(e)));
      return;
    }
    const x = r.experiment;
    clear(title).append(h("a", { href: "#/collections" }, "Collections"), " / ",
      h("a", { href: `#/collections/${enc(x.collection)}` }, x.collection), " / ",
      h("a", { href: `#/collections/${enc(x.collection)}/experiments`, id: "experiments-link" }, "Experiments"), " / ",
      h("span", { id: "x-title" }, x.name));
    const keep = document.activeElement && document.activeElement.id; // a refresh keeps the keyboard user's place
    append(clear(body), view(r, ctx, load));
    if (keep && document.getElementById(keep)) document.getElementById(keep).focus();
    clearTimeout(timer);
    if (x.status === "running") timer = setTimeout(load, REFRESH_MS);
  }
  await load();
  return () => clearTimeout(timer);
}

function view(r, ctx, reload) {
  const x = r.experiment;
  const format = formatter(x.metric);
  const names = x.variants.map((v) => v.name);
  return [
    statusBox(r),
    r.srm.flagged ? srmWarning(r.srm) : null,
    x.status === "running" ? actions(r, ctx, reload) : null,
    h("div", { class: "plots" }, timeline("x-timeline", `${metricLabel(x.metric)} per variant, cumulative by day (95% intervals)`,
      r.timeline || [], names, format)),
    h("h2", {}, `Primary metric: ${r.primary.label}`),
    metricTable("x-table", r.primary, format, true),
    r.guardrails.length ? h("h2", {}, "Guardrails") : null,
    r.guardrails.map((g) => [h("h3", {}, g.label), metricTable(`x-guardrail-${g.metric}`, g, formatter(g.metric), false)]),
    h("p", { class: "muted", id: "x-quality" }, `${fmt(r.data_quality.visitors)} visitors in the experiment's events`,
      r.data_quality.holdout ? `, ${fmt(r.data_quality.holdout)} of them in the holdout` : "",
      `; ${fmt(r.data_quality.mislabelled)} of them sent events naming another variant than their own.`,
      ` Fixed-horizon test at α = ${r.alpha}: intervals and p-values before the planned sample is in are for watching, not deciding.`),
  ];
}

function statusBox(r) {
  const x = r.experiment;
  const progress = r.sample.progress || 0;
  const ended = x.status === "running" ? null
    : h("p", { id: "x-ended" }, x.status === "promoted"
      ? `Promoted: ${x.winner} was published${x.ended_by ? ` by ${x.ended_by}` : ""} on ${String(x.ended_at).slice(0, 16).replace("T", " ")}.`
      : `Stopped${x.ended_by ? ` by ${x.ended_by}` : ""} on ${String(x.ended_at).slice(0, 16).replace("T", " ")}: shoppers see the live version.`);
  const planned = r.sample.planned_per_variant;
  return h("section", { class: `card x-status ${r.status}`, id: "x-status", dataset: { status: r.status } },
    h("p", {}, h("span", { class: `status ${x.status}` }, x.status), " ",
      h("strong", { id: "x-verdict" }, STATUS_TEXT[r.status] || r.status, r.winner ? `: ${r.winner}` : ""),
      r.reason ? h("span", { id: "x-reason" }, ` — ${r.reason}`) : null),
    ended,
    planned
      ? h("div", { class: "x-progress" },
        h("span", { id: "x-progress-label" }, `Planned sample: ${pct(progress, 0)} in (${Object.entries(planned).map(([k, n]) => `${k} ${fmt(n)}`).join(", ")} visitors per variant)`),
        h("div", { class: "progress", role: "progressbar", "aria-labelledby": "x-progress-label",
          "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(Math.round(progress * 100)) },
        h("div", { class: "fill", style: { width: `${Math.min(100, progress * 100)}%` } })))
      : h("p", { class: "muted" }, "No sample plan (too little traffic when it started): the results stay “not yet conclusive”."),
    h("p", { class: "muted" }, `Variants: ${x.variants.map((v, i) => `${v.name}${i ? "" : " (control)"} ${fmt(v.weight, 0)}%`).join(" · ")}`,
      x.holdout ? ` · holdout ${pct(x.holdout, 0)}` : "", ` · started ${String(x.starts_at).slice(0, 16).replace("T", " ")}`));
}

function srmWarning(srm) {
  const list = (counts) => Object.entries(counts).map(([k, n]) => `${k} ${fmt(Math.round(n))}`).join(", ");
  return h("div", { class: "srm-warning", id: "srm-warning", role: "alert" },
    h("strong", {}, "Sample ratio mismatch: do not trust these results. "),
    `The visitors per variant (${list(srm.observed)}) do not fit the planned split (expected ${list(srm.expected)}; `,
    `χ² = ${fmt(srm.chi2, 1)}, p = ${srm.p_value == null ? "–" : srm.p_value.toExponential(1)} < ${srm.threshold}). `,
    "Something loses or adds visitors in one variant: events not sent from one version, a redirect, bots, ",
    "or a storefront that does not pass the visitor id. Fix it, then start a new experiment.");
}

function metricTable(id, block, format, primary) {
  const comps = new Map(block.comparisons.map((c) => [c.variant, c]));
  const interval = (ci, f) => (ci && ci[0] !== null ? `${f(ci[0])} to ${f(ci[1])}` : "–");
  const signed = (v) => (v === null || v === undefined ? "–" : `${v >= 0 ? "+" : ""}${pct(v, 1)}`);
  return h("table", { class: "data", id },
    h("thead", {}, h("tr", {}, ["Variant", "Visitors", block.label, "95% interval", "Lift vs control", "Lift 95% interval",
      primary && block.correction === "holm" ? "p (Holm-adjusted)" : "p", "Verdict"]
      .map((t, i) => h("th", { scope: "col", class: i && i < 7 ? "num" : null }, t)))),
    h("tbody", {}, block.variants.map((v) => {
      const c = comps.get(v.variant);
      const verdict = !c ? "control" : c.better ? "better" : c.worse ? "worse" : "no significant difference";
      return h("tr", { dataset: { variant: v.variant } },
        h("th", { scope: "row" }, v.variant),
        h("td", { class: "num n" }, fmt(v.n)), h("td", { class: "num value" }, format(v.value)),
        h("td", { class: "num" }, interval(v.ci, format)),
        h("td", { class: "num lift" }, c ? signed(c.relative_lift) : "–"),
        h("td", { class: "num" }, c ? interval(c.relative_ci, signed) : "–"),
        h("td", { class: "num p" }, c && c.p_adjusted !== null ? fmt(c.p_adjusted, 3) : "–"),
        h("td", {}, h("span", { class: `verdict ${c ? (c.better ? "above" : c.worse ? "below" : "") : ""}` }, verdict)));
    })));
}

function actions(r, ctx, reload) {
  const x = r.experiment;
  const box = h("section", { class: "inline x-actions", "aria-label": "Experiment actions" });
  if (ctx.can("publisher")) {
    const pick = h("select", { id: "x-promote-variant", "aria-label": "Variant to publish" },
      r.winner ? null : h("option", { value: "" }, "Choose a variant…"),
      x.variants.map((v) => h("option", { value: v.name, selected: v.name === r.winner },
        `${v.name}${v.name === r.winner ? " (winner)" : ""}`)));
    box.append(pick, h("button", { type: "button", class: "primary", id: "x-promote", on: { click: async () => {
      const variant = pick.value;
      if (!variant) { ctx.toast("Choose the variant to publish", "error"); pick.focus(); return; }
      const caution = variant === r.winner ? "" : " It is not a conclusive winner: the results do not show it sells more.";
      if (!await confirmDialog(`Publish ${variant}?`, `${variant} becomes the live version of ${x.collection} for every shopper, `
        + `and experiment ${x.id} ends.${caution}`, `Publish ${variant}`)) return;
      try {
        await post(`/experiments/${x.id}/promote`, { variant });
        ctx.toast(`Published ${variant}; the experiment ended`);
      } catch (e) { ctx.fail(e); }
      reload();
    } } }, "Promote"));
  }
  if (ctx.can("merchandiser")) {
    box.append(h("button", { type: "button", class: "danger", id: "x-stop", on: { click: async () => {
      if (!await confirmDialog(`Stop experiment ${x.id}?`, `Every shopper sees the live version of ${x.collection} again; `
        + "nothing is published. A stopped experiment cannot be restarted.", "Stop experiment")) return;
      try {
        await post(`/experiments/${x.id}/stop`, {});
        ctx.toast(`Experiment ${x.name || x.id} stopped`);
      } catch (e) { ctx.fail(e); }
      reload();
    } } }, "Stop"));
  }
  return box.childNodes.length ? box : null;
}
