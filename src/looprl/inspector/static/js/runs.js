// The runs list (`/`): every run of the RUN_DIRs being inspected, refreshed while any is running.

import { clear, crumbs, errorBox, getJSON, h, num, runUrl, setLive, when } from "./dom.js";

const app = document.getElementById("app");

function statusBadge(status) {
  return h("span", { class: `badge status-${["running", "completed", "failed", "interrupted"].includes(status) ? status : "other"}`, text: status });
}

function render(runs) {
  if (!runs.length) return clear(app, h("div", { class: "empty", text: "No runs yet in the directories given." }));
  const rows = runs.map((run) => h("tr", { class: "clickable", dataset: { href: runUrl(run.id) } },
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
    h("thead", {}, h("tr", {}, ["Run", "Kind", "Environment", "Model", "Status", "Last step", "Train rollouts",
      "Eval rollouts", "Last reward", "Started"].map((t) => h("th", { text: t })))),
    h("tbody", { onclick: (e) => { const tr = e.target.closest("tr[data-href]"); if (tr && !e.target.closest("a")) location.href = tr.dataset.href; } }, rows));
  clear(app, h("div", { class: "page-head" }, h("h1", { text: "Runs" }),
    h("span", { class: "muted", text: `${runs.length} run${runs.length === 1 ? "" : "s"}` })),
  h("div", { class: "card flush" }, table));
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
