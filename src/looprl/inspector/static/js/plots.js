// The run page's plots, below its rollout table: step metrics grouped (reward; lengths and termination;
// training; throughput), each group collapsible. A `_std` series is drawn as a band around its mean,
// a series that never changes is shown as one value, steps that did not train (no samples) are gaps
// in the trainer's series, eval reward is overlaid on train reward, and a heatmap shows how each
// step's rewards spread.

import { h, num } from "./dom.js";
import { heatmap, lineChart } from "./plot.js";

const GROUPS = [
  ["reward", "Reward", (k) => /^(reward|pass_rate)/.test(k)],
  ["lengths", "Lengths and termination", (k) => /^(termination\/|completion_|prompt_tokens|rollouts|failed|groups_|rollouts_dropped)/.test(k)],
  ["throughput", "Throughput", (k) => /(_time_s|_span_s|tokens_per_s)$/.test(k)],
  ["training", "Training", () => true],
];

const open = new Map();  // group id -> open?, kept across re-renders

function isConstant(points) {
  const ys = points.map(([, y]) => y).filter(Number.isFinite);
  return ys.length > 1 && ys.every((y) => y === ys[0]);
}

// metrics: the API's RunMetrics; split: "train" | "eval"; hist: the split's reward histogram (or null)
export function renderPlotGroups(metrics, split, hist) {
  const isEval = (k) => k.startsWith("eval/");
  const bare = (k) => (isEval(k) ? k.slice(5) : k);
  const keys = metrics.keys.filter((k) => (split === "eval") === isEval(k));
  // a step with no training samples did not train: the trainer's numbers there are not a measurement
  const untrained = new Set(metrics.steps.filter((s) => s.metrics.samples === 0).map((s) => s.step));
  const value = (s, k) => (k.startsWith("train/") && untrained.has(s.step) ? null : s.metrics[k]);
  const points = (k) => metrics.steps.filter((s) => k in s.metrics).map((s) => [s.step, value(s, k)]);
  const band = (k) => (metrics.keys.includes(`${k}_std`)
    ? metrics.steps.filter((s) => k in s.metrics).map((s) => [s.step, s.metrics[k] - s.metrics[`${k}_std`], s.metrics[k] + s.metrics[`${k}_std`]])
    : undefined);
  const charted = keys.filter((k) => !(k.endsWith("_std") && keys.includes(k.slice(0, -4))));
  const byGroup = Object.fromEntries(GROUPS.map(([id]) => [id, { charts: [], constants: [] }]));
  for (const k of charted) {
    const [id] = GROUPS.find(([, , match]) => match(bare(k)));
    const pts = points(k);
    if (isConstant(pts)) { byGroup[id].constants.push([bare(k), pts.find(([, y]) => Number.isFinite(y))[1]]); continue; }
    const series = [{ name: split === "eval" ? `eval ${bare(k)}` : bare(k), points: pts, band: band(k) }];
    if (k === "reward" && metrics.keys.includes("eval/reward")) {
      series.push({ name: "eval reward", points: points("eval/reward"), dashed: true });
    }
    const title = k === "reward" ? (series.length > 1 ? "Reward: train (± std) and eval" : "Reward (± std)") : bare(k);
    byGroup[id].charts.push(lineChart(title, series, { y: bare(k) }));
  }
  const stats = (metrics.splits[split] || {}).by_step || [];
  if (stats.length > 1) {
    const names = [...new Set(stats.flatMap((r) => Object.keys(r)))].filter((k) => /^reward(\/|$)/.test(k));
    byGroup.reward.charts.push(lineChart(`Reward from ${split} rollouts`,
      names.map((k) => ({ name: k, points: stats.map((r) => [r.step, r[k]]) })), { y: "mean reward" }));
    byGroup.lengths.charts.push(lineChart("Failed rollouts per step", [{ name: "failed", points: stats.map((r) => [r.step, r.failed]) }], { y: "rollouts" }));
  }
  if (hist && hist.steps.length > 1) byGroup.reward.charts.push(heatmap(`Reward distribution per step (${split})`, hist));
  return GROUPS.map(([id, title]) => group(id, title, byGroup[id])).filter(Boolean);
}

function group(id, title, { charts, constants }) {
  if (!charts.length && !constants.length) return null;
  const details = h("details", { class: "plot-group card", dataset: { group: id } },
    h("summary", {}, h("span", { class: "plot-group-title", text: title }),
      h("span", { class: "muted small", text: `${charts.length} plot${charts.length === 1 ? "" : "s"}${constants.length ? ` · ${constants.length} constant` : ""}` })),
    constants.length ? h("div", { class: "constants" }, constants.map(([name, v]) =>
      h("span", { class: "constant", title: "the same at every step" }, h("span", { class: "mono", text: name }), " = ", h("b", { text: num(v, 6) })))) : null,
    charts.length ? h("div", { class: "plot-grid" }, charts) : null);
  details.open = open.has(id) ? open.get(id) : id === "reward";
  details.addEventListener("toggle", () => open.set(id, details.open));
  return details;
}
