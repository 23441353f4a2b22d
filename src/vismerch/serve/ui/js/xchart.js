// The experiment page's chart (inline SVG, no library): the primary metric of each variant
// at the end of each day, cumulative, as a line with its 95% interval drawn twice, as a
// shaded band between days and as a whisker at each day (one day has no band to shade).
// Variants differ by colour and by dash pattern, so the lines are told apart without colour.

import { s } from "./dom.js";

const WIDTH = 640, HEIGHT = 240, LEFT = 58, RIGHT = 12, TOP = 48, BOTTOM = 30;
const finite = (v) => typeof v === "number" && Number.isFinite(v);

// timeline: [{until, variants: [{variant, n, value, ci_low, ci_high}]}]; names: the variants
// in order (control first); format(v): how a value is written
export function timeline(id, title, points, names, format) {
  const svg = s("svg", { id, class: "plot wide", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "aria-label": title },
    s("title", {}, title), s("text", { x: 0, y: 16, class: "plot-title" }, title));
  const rows = names.map((name) => points.map((p) => (p.variants || []).find((v) => v.variant === name) || {}));
  const all = rows.flat().flatMap((r) => [r.ci_low, r.ci_high, r.value]).filter(finite);
  if (!all.length) {
    svg.append(s("text", { x: LEFT, y: TOP + 40, class: "plot-label" }, "No visitors yet."));
    return svg;
  }
  const lo = Math.min(0, ...all), hi = Math.max(...all, lo + 1e-9);
  const plotW = WIDTH - LEFT - RIGHT, plotH = HEIGHT - TOP - BOTTOM;
  const step = plotW / Math.max(1, points.length);
  const yOf = (v) => TOP + plotH - ((v - lo) / (hi - lo)) * plotH;
  // variants sit side by side within a day, so whiskers of equal days do not hide each other
  const xOf = (day, k) => LEFT + day * step + step / 2 + (k - (names.length - 1) / 2) * Math.min(8, step / (2 * names.length));
  axes(svg, points, lo, hi, yOf, step, format);
  legend(svg, names);
  rows.forEach((row, k) => series(svg, row, k, names[k], points, xOf, yOf, format));
  return svg;
}

function axes(svg, points, lo, hi, yOf, step, format) {
  svg.append(s("line", { x1: LEFT, y1: yOf(lo), x2: WIDTH - RIGHT, y2: yOf(lo), class: "plot-axis" }),
    s("text", { x: LEFT - 4, y: yOf(hi) + 8, "text-anchor": "end", class: "plot-label" }, format(hi)),
    s("text", { x: LEFT - 4, y: yOf(lo), "text-anchor": "end", class: "plot-label" }, format(lo)));
  if (lo < 0) {
    svg.append(s("line", { x1: LEFT, y1: yOf(0), x2: WIDTH - RIGHT, y2: yOf(0), class: "plot-zero" }));
  }
  const every = Math.ceil(points.length / 8); // at most 8 date labels
  points.forEach((p, i) => {
    if (i % every) return;
    const day = String(p.until).slice(5, 10);
    // the last point ends now, often on the same date as the one before: then its time
    const same = i && String(points[i - 1].until).slice(5, 10) === day;
    svg.append(s("text", { x: LEFT + i * step + step / 2, y: HEIGHT - BOTTOM + 16, "text-anchor": "middle", class: "plot-label" },
      same ? String(p.until).slice(11, 16) : day));
  });
}

function legend(svg, names) {
  names.forEach((name, k) => {
    const x = LEFT + k * 120;
    svg.append(s("g", { class: `series-${k % 6}` },
      s("line", { x1: x, x2: x + 22, y1: 32, y2: 32, class: "xline" }),
      s("text", { x: x + 26, y: 36, class: "plot-label" }, k === 0 ? `${name} (control)` : name)));
  });
}

function series(svg, row, k, name, points, xOf, yOf, format) {
  const g = s("g", { class: `series-${k % 6}`, dataset: { variant: name } });
  const ok = row.map((r, i) => [r, i]).filter(([r]) => finite(r.value));
  const band = ok.filter(([r]) => finite(r.ci_low) && finite(r.ci_high));
  if (band.length > 1) {
    const upper = band.map(([r, i]) => `${xOf(i, k).toFixed(1)},${yOf(r.ci_high).toFixed(1)}`);
    const lower = band.map(([r, i]) => `${xOf(i, k).toFixed(1)},${yOf(r.ci_low).toFixed(1)}`).reverse();
    g.append(s("polygon", { points: [...upper, ...lower].join(" "), class: "xband" }));
  }
  if (ok.length > 1) {
    g.append(s("polyline", { points: ok.map(([r, i]) => `${xOf(i, k).toFixed(1)},${yOf(r.value).toFixed(1)}`).join(" "), class: "xline" }));
  }
  for (const [r, i] of ok) {
    const tip = `${name}, ${String(points[i].until).slice(0, 10)}: ${format(r.value)}`
      + (finite(r.ci_low) ? `, 95% interval ${format(r.ci_low)} to ${format(r.ci_high)}` : "") + ` (${r.n} visitors)`;
    if (finite(r.ci_low) && finite(r.ci_high)) {
      g.append(s("line", { x1: xOf(i, k), x2: xOf(i, k), y1: yOf(r.ci_low), y2: yOf(r.ci_high), class: "xwhisker" }));
    }
    g.append(s("circle", { cx: xOf(i, k), cy: yOf(r.value), r: 3.5, class: "xdot" }, s("title", {}, tip)));
  }
  svg.append(g);
}
