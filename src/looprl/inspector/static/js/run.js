// The run page (`/runs/{run}`): Train and Eval tabs, each with the termination-reason mix, the
// filterable, searchable, sortable rollout table (search results show where they matched) and, below
// it, the grouped metric plots. Filters live in the URL, so a view can be shared or reloaded; a run
// that is still being written refreshes itself.

import { body, clear, crumbs, errorBox, getJSON, h, num, reasonBadge, reasonKind, rolloutUrl, runUrl, seconds, setLive, when, levelBadge, emptyState } from "./dom.js";
import { renderPlotGroups } from "./plots.js";
import { CLEARABLE, filterBar, FILTER_KEYS } from "./filters.js";

const run = body.run;
const app = document.getElementById("app");
const api = `/api/runs/${encodeURIComponent(run)}`;
const PAGE = 50;
const state = new URLSearchParams(location.search);
let summary = null, metrics = null, hists = {}, lastSeen = "";

const view = {
  head: h("div", { class: "run-head" }),
  tabs: h("nav", { class: "tabs", role: "tablist" }),
  plots: h("section", { class: "plots", "aria-label": "metric plots" }),
  reasons: h("section", { class: "card reasons" }),
  filters: h("section", { class: "filters-wrap" }),
  table: h("section", { class: "card flush table-wrap" }),
};

function tab() { return state.get("tab") || (summary && !summary.rollouts.train && summary.rollouts.eval ? "eval" : "train"); }

function syncUrl() { history.replaceState(null, "", runUrl(run, state)); }

// the list the table shows, as query parameters (also handed to the rollout page for prev/next)
function listParams() {
  const p = new URLSearchParams({ split: tab() });
  for (const key of FILTER_KEYS) if (state.get(key)) p.set(key, state.get(key));
  return p;
}

function setFilter(changes) {
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === "" || value === undefined) state.delete(key); else state.set(key, value);
  }
  if (!("offset" in changes)) state.delete("offset");
  syncUrl();
  loadTable();
  if ("tab" in changes) { renderTabs(); renderPlots(); loadHistogram(); }
  if (!("offset" in changes)) renderReasons();
  const onlySearch = Object.keys(changes).join() === "q";
  if (onlySearch) updateClear(); else if (!("offset" in changes)) renderFilters();  // typing keeps the search box
}

// --- header and tabs ------------------------------------------------------------------------------

function renderHead() {
  const s = summary;
  clear(view.head,
    h("div", { class: "run-title" }, h("h1", { text: s.id }),
      h("span", { class: `badge status-${s.status}`, text: s.status }), h("span", { class: "badge kind", text: s.kind })),
    h("dl", { class: "meta" },
      [["Environment", s.env], ["Model", s.model], ["Started", when(s.created_at)],
        ["Steps", s.steps ? num(s.last_step) : "—"], ["Last reward", num(s.last_reward)], ["Directory", s.run_dir]]
        .map(([k, v]) => h("div", { class: "meta-item" }, h("dt", { text: k }), h("dd", { text: v, title: v })))),
    // the orchestrator's "stopped exploring" warnings (most groups without signal, steps in a row)
    (metrics.exploration || []).map((w) => h("div", { class: "note warn", dataset: { part: "exploration" } },
      `Step ${w.step}: ${w.message}`,
      w.rollout_id ? [" · ", h("a", { href: `/runs/${encodeURIComponent(s.id)}/rollouts/${encodeURIComponent(w.rollout_id)}`,
        text: "a group without signal" })] : null)),
    // the prompt ledger: what became of each epoch's examples
    (metrics.coverage || []).map((c) => h("div", { class: "note", dataset: { part: "coverage" }, text: c.line })),
    // collapse recovery's interventions ([orchestrator.collapse]): when looprl stepped in, why, what it changed
    (metrics.interventions || []).map((m) => h("div", {
      class: `note${["decay", "rose", "bonus_off", "bonus_on"].includes(m.action) ? "" : " warn"}`,
      dataset: { part: "collapse", action: m.action },
    }, `Step ${m.step}: ${m.message}`)));
}

function renderTabs() {
  clear(view.tabs, ["train", "eval"].map((split) => h("button", {
    class: `tab${tab() === split ? " active" : ""}`, role: "tab", "aria-selected": tab() === split ? "true" : "false",
    dataset: { tab: split }, onclick: () => setFilter({ tab: split }),
  }, split === "train" ? "Train" : "Eval", h("span", { class: "tab-count", text: num(summary.rollouts[split] || 0) }))));
}

// --- plots ------------------------------------------------------------------------------------------

function renderPlots() {
  const split = tab();
  const stats = (metrics.splits[split] || {}).by_step || [];
  const hasRewardSeries = metrics.keys.some((k) => (split === "eval") === k.startsWith("eval/") && /^(eval\/)?reward$/.test(k));
  const tiles = stats.length === 1 && !hasRewardSeries ? statTiles(stats[0]) : null;
  const groups = renderPlotGroups(metrics, split, hists[split]);
  clear(view.plots, tiles, groups.length ? h("h2", { class: "section-title", text: "Metrics" }) : null, groups);
  view.plots.hidden = !groups.length && !tiles;
}

async function loadHistogram() {
  const split = tab();
  try {
    hists[split] = await getJSON(`${api}/reward_histogram?split=${split}`);
    if (split === tab()) renderPlots();
  } catch { /* the plots stay without it */ }
}

// one step only (an eval run): the means as numbers rather than one-point plots
function statTiles(stat) {
  const tile = (label, value, title) => h("div", { class: "stat", title }, h("div", { class: "stat-label", text: label }), h("div", { class: "stat-value", text: value }));
  const components = Object.keys(stat).filter((k) => k.startsWith("reward/"));
  return h("div", { class: "stats" },
    tile("Mean reward", num(stat.reward), "mean aggregated reward of the scored rollouts"),
    components.map((k) => tile(k.slice(7), num(stat[k]), "mean over scored rollouts; zero-filled count as 0")),
    tile("Rollouts", num(stat.rollouts)), tile("Failed", num(stat.failed), "operational failures (not scored)"));
}

function renderReasons() {
  const info = metrics.splits[tab()];
  if (!info || !info.rollouts) { clear(view.reasons, emptyState(`No ${tab()} rollouts yet.`)); return; }
  const total = info.rollouts;
  const entries = Object.entries(info.termination_reasons);
  const bar = h("div", { class: "reason-bar" }, entries.map(([reason, n]) => {
    const seg = h("span", { class: `seg reason-${reasonKind(reason)}`, title: `${reason}: ${n}` });
    seg.style.width = `${(100 * n) / total}%`;
    return seg;
  }));
  const active = state.get("termination_reason");
  clear(view.reasons,
    h("div", { class: "reasons-head" }, h("h2", { text: "Termination reasons" }),
      h("span", { class: "muted", text: `${num(total)} ${tab()} rollouts · ${num(info.by_step.length || (metrics.steps.length))} steps` })),
    bar,
    h("div", { class: "reason-legend" }, entries.map(([reason, n]) => h("button", {
      class: `reason-chip${active === reason ? " active" : ""}`, title: "filter the table by this reason",
      onclick: () => setFilter({ termination_reason: active === reason ? null : reason }),
    }, reasonBadge(reason), h("span", { class: "chip-count", text: `${num(n)} · ${((100 * n) / total).toFixed(1)}%` })))));
}

function updateClear() {
  const button = view.filters.querySelector("[data-clear]");
  if (button) button.disabled = !CLEARABLE.some((k) => state.get(k));
}

function renderFilters() {
  const reasons = Object.keys((metrics.splits[tab()] || {}).termination_reasons || {});
  clear(view.filters, filterBar(state, reasons, setFilter));
}

// --- the rollout table ------------------------------------------------------------------------------

const SORTABLE = { Step: "step", Example: "example", Reward: "reward", "Adv.": "advantage", Termination: "reason",
  Turns: "turns", Tokens: "tokens", Duration: "duration" };

function header(label) {
  const key = SORTABLE[label];
  if (!key) return h("th", { text: label });
  const sort = state.get("sort") || "step", order = state.get("order") || "desc";
  const active = sort === key;
  return h("th", { class: `sortable${active ? " sorted" : ""}`, title: `sort by ${label.toLowerCase()}`,
    onclick: () => setFilter({ sort: key, order: active && order === "desc" ? "asc" : "desc" }) },
  label, active ? h("span", { class: "sort-mark", text: order === "desc" ? " ▾" : " ▴" }) : null);
}

function componentCell(row, name) {
  if (name in row.rewards) return h("td", { class: "num", text: num(row.rewards[name]) });
  if (row.zero_filled.includes(name)) {
    return h("td", { class: "num zero-filled", title: `${name} was not emitted by this rollout: zero-filled (counted as 0)` }, "0", h("sup", { text: "zf" }));
  }
  return h("td", { class: "num muted", text: "—" });
}

function renderTable(page) {
  const nav = listParams();
  const cols = ["Rollout", "Step", "Example", "Group", "Reward", ...page.components, "Adv.", "Termination", "Turns", "Tokens", "Duration", "Logs"];
  const rows = page.rows.map((row) => {
    const href = rolloutUrl(run, row.rollout_id, nav);
    return h("tr", { class: "clickable", dataset: { href, id: row.rollout_id } },
      h("td", {}, h("a", { href, class: "mono rollout-link", text: row.rollout_id })),
      h("td", { class: "num", text: num(row.step) }),
      h("td", { class: "mono small trunc", text: row.example_id, title: row.example_id }),
      h("td", { class: "mono small trunc", text: row.group_id, title: row.group_id }),
      h("td", { class: "num strong", text: num(row.reward) }),
      page.components.map((c) => componentCell(row, c)),
      h("td", { class: `num ${row.advantage > 0 ? "pos" : row.advantage < 0 ? "neg" : ""}`, text: num(row.advantage) }),
      h("td", {}, reasonBadge(row.termination_reason), row.error ? h("span", { class: "err-dot", title: row.error, text: "!" }) : null),
      h("td", { class: "num", text: num(row.turns) }),
      h("td", { class: "num", title: `${row.prompt_tokens} prompt + ${row.completion_tokens} completion` , text: num(row.completion_tokens) }),
      h("td", { class: "num", text: seconds(row.duration_s) }),
      h("td", { class: "num" }, num(row.log_count), row.max_log_level >= 30 ? levelBadge(row.max_log_level) : null));
  });
  const offset = page.offset, shown = page.rows.length;
  const pager = h("div", { class: "pager" },
    h("span", { class: "muted", text: page.total ? `${num(offset + 1)}–${num(offset + shown)} of ${num(page.total)}` : "no rollouts match" }),
    h("button", { class: "btn", disabled: offset === 0, onclick: () => setFilter({ offset: Math.max(0, offset - PAGE) || null }) }, "‹ Prev"),
    h("button", { class: "btn", disabled: offset + shown >= page.total, onclick: () => setFilter({ offset: offset + PAGE }) }, "Next ›"));
  clear(view.table,
    h("table", { class: "table rollouts" }, h("thead", {}, h("tr", {}, cols.map(header))),
      h("tbody", { onclick: (e) => { const tr = e.target.closest("tr[data-href]"); if (tr && !e.target.closest("a")) location.href = tr.dataset.href; } },
        rows.length ? rows : h("tr", {}, h("td", { colspan: cols.length }, emptyState("No rollouts match these filters."))))),
    pager);
}

// under each search result: where it matched, the match highlighted
async function addSnippets(rows, q, id) {
  const qs = new URLSearchParams({ q });
  for (const row of rows) qs.append("ids", row.rollout_id);
  let found;
  try { found = await getJSON(`${api}/snippets?${qs}`); } catch { return; }
  if (id !== tableRequest) return;
  const cols = view.table.querySelectorAll("thead th").length;
  for (const tr of view.table.querySelectorAll("tbody tr[data-id]")) {
    const snip = found[tr.dataset.id];
    if (!snip) continue;
    tr.classList.add("has-snippet");
    tr.after(h("tr", { class: "snippet-row", dataset: { for: tr.dataset.id } }, h("td", { colspan: cols },
      h("span", { class: "snippet-where muted small", text: `matched in ${snip.where}: ` }),
      h("span", { class: "snippet" }, snip.before, h("mark", { text: snip.match }), snip.after))));
  }
}

let tableRequest = 0;
async function loadTable() {
  const id = ++tableRequest;
  const p = listParams();
  p.set("limit", PAGE);
  if (state.get("offset")) p.set("offset", state.get("offset"));
  view.table.classList.add("loading");
  try {
    const page = await getJSON(`${api}/rollouts?${p}`);
    if (id === tableRequest) renderTable(page);
    if (id === tableRequest && state.get("q") && page.rows.length) addSnippets(page.rows, state.get("q"), id);
  } catch (error) {
    if (id === tableRequest) clear(view.table, errorBox(error));
  } finally {
    if (id === tableRequest) view.table.classList.remove("loading");
  }
}

// --- loading and live updates -------------------------------------------------------------------------

async function load() {
  [summary, metrics] = await Promise.all([getJSON(api), getJSON(`${api}/metrics`)]);
  lastSeen = JSON.stringify([summary.rollouts, summary.steps, summary.status]);
  crumbs({ text: "Runs", href: "/" }, { text: summary.id });
  renderHead(); renderTabs(); renderPlots(); renderReasons(); renderFilters();
  setLive(summary.status === "running");
  loadHistogram();
}

async function poll() {
  try {
    const fresh = await getJSON(api);
    const seen = JSON.stringify([fresh.rollouts, fresh.steps, fresh.status]);
    if (seen !== lastSeen) {
      summary = fresh; lastSeen = seen;
      metrics = await getJSON(`${api}/metrics`);
      renderHead(); renderTabs(); renderPlots(); renderReasons();
      loadTable(); loadHistogram();
      setLive(summary.status === "running");
    }
  } catch { /* the next poll retries */ }
  setTimeout(poll, summary && summary.status === "running" ? 3000 : 10000);
}

async function start() {
  clear(app, view.head, view.tabs, view.reasons, view.filters, view.table, view.plots);
  try {
    await load();
    await loadTable();
  } catch (error) {
    clear(app, errorBox(error));
    return;
  }
  setTimeout(poll, 3000);
}

start();
