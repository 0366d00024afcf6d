// The runs list (`/`): every run of the RUN_DIRs being inspected, refreshed while any is running.
// Ticking two or more runs overlays their reward curves (train solid, eval dashed) below the table;
// the selection lives in the URL (`?compare=a,b`).

import { clear, crumbs, errorBox, getJSON, h, num, runUrl, setLive, when } from "./dom.js";
import { lineChart } from "./plot.js";

const app = document.getElementById("app");
const selected = new Set((new URLSearchParams(location.search).get("compare") || "").split(",").filter(Boolean));
const comparison = h("section", { class: "card compare-runs", "aria-live": "polite" });
let compareKey = "";

async function renderComparison() {
  const ids = [...selected].sort();
  const qs = ids.length ? `?compare=${ids.map(encodeURIComponent).join(",")}` : "";
  history.replaceState(null, "", `/${qs}`);
  if (ids.join() === compareKey) return;
  compareKey = ids.join();
  if (ids.length < 2) { clear(comparison, h("div", { class: "muted small", text: "Tick two or more runs to overlay their reward curves." })); return; }
  const all = await Promise.all(ids.map((id) => getJSON(`/api/runs/${encodeURIComponent(id)}/metrics`).catch(() => null)));
  const series = [];
  ids.forEach((id, i) => {
    const m = all[i];
    if (!m) return;
    const curve = (key) => m.steps.filter((s) => key in s.metrics).map((s) => [s.step, s.metrics[key]]);
    if (m.keys.includes("reward")) series.push({ name: `${id} train`, points: curve("reward") });
    if (m.keys.includes("eval/reward")) series.push({ name: `${id} eval`, points: curve("eval/reward"), dashed: true });
    else if ((m.splits.eval || {}).by_step) series.push({ name: `${id} eval`, points: m.splits.eval.by_step.map((r) => [r.step, r.reward]), dashed: true });
  });
  clear(comparison, h("h2", { text: `Reward: ${ids.join(" vs ")}` }),
    series.length ? h("div", { class: "plot-grid wide" }, lineChart("Reward per step", series, { y: "mean reward" }))
      : h("div", { class: "muted small", text: "These runs have no reward curves yet." }));
}

function statusBadge(status) {
  return h("span", { class: `badge status-${["running", "completed", "failed", "interrupted"].includes(status) ? status : "other"}`, text: status });
}

function render(runs) {
  if (!runs.length) return clear(app, h("div", { class: "empty", text: "No runs yet in the directories given." }));
  const rows = runs.map((run) => h("tr", { class: "clickable", dataset: { href: runUrl(run.id), id: run.id } },
    h("td", { class: "pick" }, h("input", { type: "checkbox", name: "compare", value: run.id, checked: selected.has(run.id),
      "aria-label": `compare ${run.id}`, onchange: (e) => { e.target.checked ? selected.add(run.id) : selected.delete(run.id); renderComparison(); } })),
    h("td", {}, h("a", { href: runUrl(run.id), class: "run-link", text: run.id })),
    h("td", {}, h("span", { class: "badge kind", text: run.kind })),
    h("td", {}, h("div", { text: run.env_name }), h("div", { class: "muted small mono", text: run.env })),
    h("td", { class: "mono small", text: run.model }),
    h("td", {}, statusBadge(run.status)),
    h("td", { class: "num", text: run.steps ? num(run.last_step) : "—" }),
    h("td", { class: "num", text: num(run.rollouts.train || 0) }),
    h("td", { class: "num", text: num(run.rollouts.eval || 0) }),
    h("td", { class: "num strong", text: num(run.last_reward) }),
    h("td", { class: "muted small", text: when(run.created_at) })));
  const table = h("table", { class: "table" },
    h("thead", {}, h("tr", {}, ["", "Run", "Kind", "Environment", "Model", "Status", "Last step", "Train rollouts",
      "Eval rollouts", "Last reward", "Started"].map((t) => h("th", { text: t })))),
    h("tbody", { onclick: (e) => { const tr = e.target.closest("tr[data-href]"); if (tr && !e.target.closest("a, input, .pick")) location.href = tr.dataset.href; } }, rows));
  clear(app, h("div", { class: "page-head" }, h("h1", { text: "Runs" }),
    h("span", { class: "muted", text: `${runs.length} run${runs.length === 1 ? "" : "s"}` })),
  h("div", { class: "card flush" }, table), runs.length > 1 ? comparison : null);
  renderComparison();
}

async function refresh() {
  try {
    const runs = await getJSON("/api/runs");
    render(runs);
    const running = runs.some((r) => r.status === "running");
    setLive(running);
    setTimeout(refresh, running ? 3000 : 15000);
  } catch (error) {
    clear(app, errorBox(error));
    setTimeout(refresh, 5000);
  }
}

crumbs({ text: "Runs" });
refresh();
