// Small SVG charts for step metrics: line charts (one or more series over steps, a std band around a
// mean, gaps where a series has no value, dashed overlays, labelled axes, a legend and a hover
// read-out) and a step x value heatmap. Written here so the inspector needs no plotting library and
// makes no outside request.

import { h, num } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 360, H = 180, PAD = { left: 52, right: 12, top: 12, bottom: 34 };
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

// split points into runs of finite values: a null y (a step without a value) leaves a gap
function segments(points) {
  const out = [[]];
  for (const p of points) {
    if (Number.isFinite(p[1])) out[out.length - 1].push(p);
    else if (out[out.length - 1].length) out.push([]);
  }
  return out.filter((seg) => seg.length);
}

function axisLabels(svg, xLabel, yLabel) {
  svg.append(s("text", { x: (PAD.left + W - PAD.right) / 2, y: H - 3, class: "axis-label", "text-anchor": "middle" }, xLabel));
  svg.append(s("text", { x: 11, y: (PAD.top + H - PAD.bottom) / 2, class: "axis-label", "text-anchor": "middle",
    transform: `rotate(-90 11 ${(PAD.top + H - PAD.bottom) / 2})` }, yLabel));
}

// series: [{ name, points: [[x, y|null], ...], band?: [[x, lo, hi], ...], dashed?: bool }];
// options: { x: x-axis label, y: y-axis label }. Returns a card element holding the chart.
export function lineChart(title, series, options = {}) {
  const bands = series.flatMap((ser) => (ser.band || []).flatMap(([x, lo, hi]) => [[x, lo], [x, hi]]));
  const all = [...series.flatMap((ser) => ser.points), ...bands].filter(([, y]) => Number.isFinite(y));
  const card = h("figure", { class: "plot", dataset: { title } }, h("figcaption", { class: "plot-title", text: title }));
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
    svg.append(s("text", { x: X(t), y: H - PAD.bottom + 12, class: "tick", "text-anchor": "middle" }, num(t)));
  }
  svg.append(s("line", { x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom, class: "axis" }));
  axisLabels(svg, options.x || "step", options.y || title);
  series.forEach((ser, i) => {
    const color = PALETTE[i % PALETTE.length];
    for (const seg of segments((ser.band || []).map(([x, lo, hi]) => [x, lo, hi]).filter(([, lo, hi]) => Number.isFinite(lo) && Number.isFinite(hi)))) {
      const path = [...seg.map(([x, lo]) => [x, lo]), ...seg.slice().reverse().map(([x, , hi]) => [x, hi])];
      svg.append(s("polygon", { points: path.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "), class: "band", fill: color }));
    }
    for (const pts of segments(ser.points)) {
      if (pts.length === 1) svg.append(s("circle", { cx: X(pts[0][0]), cy: Y(pts[0][1]), r: 3, fill: color }));
      else svg.append(s("polyline", { points: pts.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(" "),
        class: `line${ser.dashed ? " dashed" : ""}`, stroke: color }));
    }
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
      ...values.filter(([, y]) => y !== undefined && y !== null).map(([name, y], i) =>
        h("span", { class: "readout-item" }, series.length > 1 ? `${name} ` : "", h("b", { text: num(y, 4) }), i < values.length - 1 ? "  " : "")));
  });
  svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); readout.textContent = "\u00a0"; });
  card.append(svg, readout);
  if (series.length > 1) {
    card.append(h("div", { class: "legend" }, series.map((ser, i) =>
      h("span", { class: "legend-item" }, h("i", { class: `swatch swatch-${i % PALETTE.length}${ser.dashed ? " dashed" : ""}` }), ser.name))));
  }
  return card;
}

// hist: { lo, hi, bins, steps, counts }: one column per step, one cell per value bin, darker = more rollouts.
export function heatmap(title, hist, options = {}) {
  const card = h("figure", { class: "plot", dataset: { title } }, h("figcaption", { class: "plot-title", text: title }));
  if (!hist.steps.length) return card;
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot-svg", role: "img", "aria-label": title });
  const cw = (W - PAD.left - PAD.right) / hist.steps.length, ch = (H - PAD.top - PAD.bottom) / hist.bins;
  const width = (hist.hi - hist.lo) / hist.bins || 1;
  const readout = h("div", { class: "plot-readout" }, "\u00a0");
  hist.steps.forEach((step, i) => {
    const total = hist.counts[i].reduce((a, b) => a + b, 0) || 1;
    hist.counts[i].forEach((n, b) => {
      if (!n) return;
      const cell = s("rect", { x: PAD.left + i * cw, y: H - PAD.bottom - (b + 1) * ch, width: Math.max(cw - 0.5, 0.5), height: ch - 0.5,
        class: "heat", "fill-opacity": (0.15 + 0.85 * n / total).toFixed(2) });
      const range = `${num(hist.lo + b * width)}–${num(hist.lo + (b + 1) * width)}`;
      cell.append(s("title", {}, `step ${step}: ${n} rollouts with reward ${range}`));
      cell.addEventListener("mouseenter", () => { readout.textContent = `step ${step}: ${n} of ${total} rollouts with reward ${range}`; });
      svg.append(cell);
    });
  });
  for (const t of ticks(hist.lo, hist.hi, 4)) {
    const y = H - PAD.bottom - ((t - hist.lo) / ((hist.hi - hist.lo) || 1)) * (H - PAD.top - PAD.bottom);
    svg.append(s("text", { x: PAD.left - 6, y: y + 3, class: "tick", "text-anchor": "end" }, num(t, 3)));
  }
  const every = Math.ceil(hist.steps.length / 6);
  hist.steps.forEach((step, i) => { if (i % every === 0) svg.append(s("text", { x: PAD.left + (i + 0.5) * cw, y: H - PAD.bottom + 12, class: "tick", "text-anchor": "middle" }, num(step))); });
  axisLabels(svg, options.x || "step", options.y || "reward");
  card.append(svg, readout);
  return card;
}
