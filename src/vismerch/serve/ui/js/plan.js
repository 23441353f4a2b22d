// Plan: the hardware planner's form, its options table and two plots (hours and cost per
// option) drawn as inline SVG from the plan JSON.

import { post } from "./api.js";
import { clear, fmt, h, s } from "./dom.js";

const FIELDS = [
  ["model", "text", "vit-b-16", "Model"],
  ["images", "number", "1000000", "Images"],
  ["deadline", "number", "", "Deadline (hours)"],
  ["gpus", "number", "", "GPUs (fixed)"],
  ["vectors", "number", "", "Vectors (search)"],
  ["dim", "number", "", "Dimensions (search)"],
  ["queries", "number", "", "Queries (search)"],
  ["epochs", "number", "", "Epochs (fine-tune)"],
];

export async function render(main, ctx) {
  const workload = h("select", { id: "plan-workload", name: "workload", "aria-label": "Workload" },
    ["embed", "search", "finetune"].map((w) => h("option", { value: w }, w)));
  const inputs = Object.fromEntries(FIELDS.map(([name, type, value, label]) => [name,
    h("input", { id: `plan-${name}`, name, type, value, step: "any", placeholder: label, "aria-label": label })]));
  const out = h("div", { id: "plan-out" });
  const form = h("form", { class: "card grid-form", id: "plan-form", on: { submit: async (ev) => {
    ev.preventDefault();
    const body = { workload: workload.value };
    for (const [name, input] of Object.entries(inputs)) {
      const v = input.value.trim();
      if (v) body[name] = input.type === "number" ? Number(v) : v;
    }
    clear(out).append(h("p", { class: "muted" }, "Planning…"));
    try {
      draw(out, await post("/plan", body));
    } catch (e) {
      clear(out).append(h("p", { class: "error" }, ctx.explain(e)));
    }
  } } },
  h("label", {}, "Workload", workload),
  FIELDS.map(([name, , , label]) => h("label", {}, label, inputs[name])),
  h("button", { type: "submit", class: "primary" }, "Plan"));
  main.append(h("div", { class: "page plan" }, h("h1", {}, "Plan hardware"), form, out));
}

function draw(out, plan) {
  const options = plan.options || [];
  clear(out);
  if (!options.length) { out.append(h("p", { class: "muted" }, "No option fits.")); return; }
  const label = (o) => `${o.gpus}× ${o.gpu} ${o.precision || ""}`.trim();
  out.append(
    h("div", { class: "plots" },
      bars("Hours", options.map((o) => [label(o), o.hours]), "h", "plot-hours"),
      bars("Cost to rent (USD)", options.map((o) => [label(o), o.rent_usd]), "$", "plot-cost")),
    h("table", { class: "data", id: "plan-table" },
      h("thead", {}, h("tr", {}, ["GPU", "GPUs", "Precision", "Hours", "Rent $", "Own $", "Bound", "Strategy", "Deadline"].map((t) => h("th", {}, t)))),
      h("tbody", {}, options.map((o) => h("tr", {},
        h("td", {}, o.gpu), h("td", { class: "num" }, fmt(o.gpus)), h("td", {}, fmt(o.precision)),
        h("td", { class: "num" }, fmt(o.hours, 3)), h("td", { class: "num" }, fmt(o.rent_usd)), h("td", { class: "num" }, fmt(o.own_usd)),
        h("td", {}, fmt(o.bound)), h("td", {}, fmt(o.strategy)), h("td", {}, o.meets_deadline === false ? "misses" : "meets"))))),
    h("ul", { class: "notes" }, options.slice(0, 3).flatMap((o) => (o.notes || []).map((n) => h("li", {}, `${o.gpu}: ${n}`)))));
}

// A horizontal bar chart as SVG elements (text as text nodes, like the rest of the app).
function bars(title, rows, unit, id) {
  const width = 460, rowH = 22, left = 150, top = 26;
  const max = Math.max(...rows.map(([, v]) => v || 0), 1e-9);
  const svg = s("svg", { id, class: "plot", viewBox: `0 0 ${width} ${top + rows.length * rowH + 8}`, role: "img", "aria-label": title },
    s("text", { x: 0, y: 16, class: "plot-title" }, title));
  rows.forEach(([name, value], i) => {
    const y = top + i * rowH;
    const w = ((value || 0) / max) * (width - left - 70);
    svg.append(s("text", { x: left - 6, y: y + 15, "text-anchor": "end", class: "plot-label" }, name),
      s("rect", { x: left, y: y + 3, width: Math.max(1, w), height: rowH - 7, class: "plot-bar" }),
      s("text", { x: left + w + 4, y: y + 15, class: "plot-value" }, unit === "$" ? `$${(value || 0).toFixed(2)}` : `${fmt(value, 3)} ${unit}`));
  });
  return svg;
}
