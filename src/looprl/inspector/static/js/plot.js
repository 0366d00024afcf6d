// Small SVG line charts for step metrics: one or more series over steps, with axes, a legend and a
// hover read-out. Written here so the inspector needs no plotting library and makes no outside request.

import { h, num } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 360, H = 170, PAD = { left: 46, right: 12, top: 12, bottom: 24 };
export const PALETTE = ["#4f46e5", "#0d9488", "#d97706", "#db2777", "#2563eb", "#65a30d", "#7c3aed", "#dc2626"];

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

function ticks(lo, hi, count) {
  if (lo === hi) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((t) => t >= raw) || raw;
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

// series: [{ name, points: [[x, y], ...] }]; returns a card element holding the chart.
export function lineChart(title, series) {
  const all = series.flatMap((ser) => ser.points).filter(([, y]) => Number.isFinite(y));
  const card = h("figure", { class: "plot" }, h("figcaption", { class: "plot-title", text: title }));
  if (!all.length) return card;
  let [x0, x1] = [Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0]))];
  let [y0, y1] = [Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1]))];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad;
  const X = (x) => PAD.left + ((x - x0) / (x1 - x0)) * (W - PAD.left - PAD.right);
  const Y = (y) => H - PAD.bottom - ((y - y0) / (y1 - y0)) * (H - PAD.top - PAD.bottom);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot-svg", role: "img", "aria-label": title });
  for (const t of ticks(y0, y1, 4)) {
    svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: Y(t), y2: Y(t), class: "grid" }),
      s("text", { x: PAD.left - 6, y: Y(t) + 3, class: "tick", "text-anchor": "end" }, num(t, 3)));
  }
  for (const t of ticks(x0, x1, 5).filter(Number.isInteger)) {
    svg.append(s("text", { x: X(t), y: H - 6, class: "tick", "text-anchor": "middle" }, num(t)));
  }
  svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "axis" }));
  series.forEach((ser, i) => {
    const pts = ser.points.filter(([, y]) => Number.isFinite(y));
    const color = PALETTE[i % PALETTE.length];
    if (pts.length === 1) svg.append(s("circle", { cx: X(pts[0][0]), cy: Y(pts[0][1]), r: 3, fill: color }));
    else svg.append(s("polyline", { points: pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "),
      class: "line", stroke: color }));
  });
  const cursor = s("line", { y1: PAD.top, y2: H - PAD.bottom, class: "cursor", visibility: "hidden" });
  svg.append(cursor);
  const readout = h("div", { class: "plot-readout" }, "\u00a0");
  svg.addEventListener("mousemove", (event) => {
    const box = svg.getBoundingClientRect();
    const x = x0 + ((event.clientX - box.left) / box.width * W - PAD.left) / (W - PAD.left - PAD.right) * (x1 - x0);
    const near = all.reduce((best, p) => (Math.abs(p[0] - x) < Math.abs(best[0] - x) ? p : best), all[0]);
    cursor.setAttribute("x1", X(near[0])); cursor.setAttribute("x2", X(near[0]));
    cursor.setAttribute("visibility", "visible");
    const values = series.map((ser) => [ser.name, (ser.points.find((p) => p[0] === near[0]) || [])[1]]);
    readout.replaceChildren(`step ${near[0]}: `,
      ...values.filter(([, y]) => y !== undefined).map(([name, y], i) =>
        h("span", { class: "readout-item" }, series.length > 1 ? `${name} ` : "", h("b", { text: num(y, 4) }), i < values.length - 1 ? "  " : "")));
  });
  svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); readout.textContent = "\u00a0"; });
  card.append(svg, readout);
  if (series.length > 1) {
    card.append(h("div", { class: "legend" }, series.map((ser, i) =>
      h("span", { class: "legend-item" }, h("i", { class: `swatch swatch-${i % PALETTE.length}` }), ser.name))));
  }
  return card;
}
