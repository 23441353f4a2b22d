// Small inline-SVG charts for the analytics page (no library): horizontal bars (the funnel),
// bars or a line over days (the trend), observed against expected per slot, and a point
// with its interval (a product's corrected attractiveness). Every chart is role="img" with
// an aria-label and a <title>; the page also shows the same numbers as tables.

import { fmt, s } from "./dom.js";

function frame(id, title, width, height, cls = "plot") {
  return s("svg", { id, class: cls, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    s("title", {}, title), s("text", { x: 0, y: 16, class: "plot-title" }, title));
}

// rows: [[label, value, text]]; each bar also says what share of the previous one it keeps
export function funnel(id, title, rows) {
  const width = 480, rowH = 26, left = 110, top = 28;
  const max = Math.max(...rows.map(([, v]) => v || 0), 1);
  const svg = frame(id, title, width, top + rows.length * rowH + 6);
  rows.forEach(([label, value, text], i) => {
    const y = top + i * rowH;
    const w = ((value || 0) / max) * (width - left - 150);
    const prev = i ? rows[i - 1][1] : null;
    const step = prev ? ` (${((100 * (value || 0)) / prev).toFixed(1)}%)` : "";
    svg.append(s("text", { x: left - 6, y: y + 16, "text-anchor": "end", class: "plot-label" }, label),
      s("rect", { x: left, y: y + 4, width: Math.max(1, w), height: rowH - 8, class: "plot-bar" }),
      s("text", { x: left + w + 4, y: y + 16, class: "plot-value" }, `${text}${step}`));
  });
  return svg;
}

// points: [{label, value}] over time; bars for counts, a line for rates
export function series(id, title, points, { line = false, format = (v) => fmt(v, 3) } = {}) {
  const width = 480, height = 190, left = 46, right = 8, top = 28, bottom = 34;
  const svg = frame(id, title, width, height);
  const max = Math.max(...points.map((p) => p.value || 0), 1e-9);
  const plotW = width - left - right, plotH = height - top - bottom;
  const step = plotW / Math.max(1, points.length);
  const yOf = (v) => top + plotH - ((v || 0) / max) * plotH;
  svg.append(s("line", { x1: left, y1: top + plotH, x2: width - right, y2: top + plotH, class: "plot-axis" }),
    s("text", { x: left - 4, y: top + 8, "text-anchor": "end", class: "plot-label" }, format(max)),
    s("text", { x: left - 4, y: top + plotH, "text-anchor": "end", class: "plot-label" }, "0"));
  const every = Math.ceil(points.length / 8); // at most 8 date labels
  points.forEach((p, i) => {
    const x = left + i * step;
    if (!line) {
      svg.append(s("rect", { x: x + step * 0.15, y: yOf(p.value), width: Math.max(1, step * 0.7),
        height: Math.max(0, top + plotH - yOf(p.value)), class: "plot-bar" }, s("title", {}, `${p.label}: ${format(p.value)}`)));
    }
    if (i % every === 0) {
      svg.append(s("text", { x: x + step / 2, y: height - bottom + 16, "text-anchor": "middle", class: "plot-label" }, p.label));
    }
  });
  if (line) {
    const xy = points.map((p, i) => `${(left + i * step + step / 2).toFixed(1)},${yOf(p.value).toFixed(1)}`);
    svg.append(s("polyline", { points: xy.join(" "), class: "plot-line" }));
    points.forEach((p, i) => svg.append(s("circle", { cx: left + i * step + step / 2, cy: yOf(p.value), r: 3, class: "plot-dot" },
      s("title", {}, `${p.label}: ${format(p.value)}`))));
  }
  return svg;
}

// slots: [{position, observed_ctr, expected_ctr}]: a bar for what was observed, a tick for
// what an average product gets at that position
export function slots(id, title, rows, format) {
  const width = 480, height = 200, left = 46, right = 8, top = 40, bottom = 30;
  const svg = frame(id, title, width, height);
  const max = Math.max(...rows.flatMap((r) => [r.observed_ctr || 0, r.expected_ctr || 0]), 1e-9);
  const plotW = width - left - right, plotH = height - top - bottom;
  const step = plotW / Math.max(1, rows.length);
  const yOf = (v) => top + plotH - ((v || 0) / max) * plotH;
  svg.append(
    s("rect", { x: 200, y: 22, width: 10, height: 10, class: "plot-bar" }), s("text", { x: 214, y: 31, class: "plot-label" }, "observed CTR"),
    s("line", { x1: 310, y1: 27, x2: 324, y2: 27, class: "plot-expected" }), s("text", { x: 328, y: 31, class: "plot-label" }, "expected at the slot"),
    s("line", { x1: left, y1: top + plotH, x2: width - right, y2: top + plotH, class: "plot-axis" }),
    s("text", { x: left - 4, y: top + 8, "text-anchor": "end", class: "plot-label" }, format(max)));
  rows.forEach((r, i) => {
    const x = left + i * step;
    const tip = `position ${r.position}: observed ${format(r.observed_ctr)}, expected ${format(r.expected_ctr)} (${fmt(r.impressions)} impressions)`;
    svg.append(
      s("rect", { x: x + step * 0.2, y: yOf(r.observed_ctr), width: Math.max(1, step * 0.6),
        height: Math.max(0, top + plotH - yOf(r.observed_ctr)), class: "plot-bar observed" }, s("title", {}, tip)),
      s("line", { x1: x + step * 0.1, x2: x + step * 0.9, y1: yOf(r.expected_ctr), y2: yOf(r.expected_ctr), class: "plot-expected" }));
    if (rows.length <= 24 || i % Math.ceil(rows.length / 24) === 0) {
      svg.append(s("text", { x: x + step / 2, y: height - bottom + 14, "text-anchor": "middle", class: "plot-label" }, String(r.position)));
    }
  });
  return svg;
}

// a point estimate with its interval on a 0..max scale, for a table cell
export function interval(value, low, high, max, label) {
  const width = 140, pad = 4;
  const x = (v) => pad + (Math.max(0, Math.min(max, v || 0)) / max) * (width - 2 * pad);
  return s("svg", { class: "interval", viewBox: `0 0 ${width} 14`, width, height: 14, role: "img", "aria-label": label },
    s("title", {}, label),
    s("line", { x1: x(low), x2: x(high), y1: 7, y2: 7, class: "ci" }),
    s("circle", { cx: x(value), cy: 7, r: 3.5, class: "est" }));
}
