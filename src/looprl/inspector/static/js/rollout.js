// The rollout page (`/runs/{run}/rollouts/{id}`): the transcript and the rollout's log records in two
// tabs, beside the reward breakdown, termination, model calls and the group's siblings. The URL's
// query is the run page's list (filters and sort): prev/next (← → or k j) walk that list.

import { body, clear, crumbs, errorBox, getJSON, h, num, reasonBadge, rolloutUrl, runUrl, seconds, when } from "./dom.js";
import { renderMessages } from "./messages.js";
import { renderLogs } from "./logs.js";

const run = body.run, rolloutId = body.rollout;
const app = document.getElementById("app");
const nav = new URLSearchParams(location.search);
let detail = null;

function backUrl() {
  const p = new URLSearchParams(nav);
  p.set("tab", detail ? detail.split : nav.get("split") || "train");
  p.delete("split");
  return runUrl(run, p);
}

function go(id) { if (id) location.href = rolloutUrl(run, id, nav) + location.hash; }

// --- header -------------------------------------------------------------------------------------------

function head(d) {
  const navBtn = (id, label, key) => h("a", { class: `btn${id ? "" : " disabled"}`, href: id ? rolloutUrl(run, id, nav) : null,
    "aria-disabled": id ? null : "true", title: id ? `${label} (${key})` : "none in this list", dataset: { nav: label.toLowerCase() } }, label === "Previous" ? "‹ Previous" : "Next ›", h("kbd", { text: key }));
  return h("div", { class: "rollout-head" },
    h("div", { class: "rollout-title" },
      h("h1", { class: "mono", text: d.rollout_id }),
      h("span", { class: "badge kind", text: d.split }), reasonBadge(d.termination_reason),
      h("div", { class: "spacer" }),
      h("div", { class: "reward-big", title: "aggregated reward" }, h("span", { class: "muted small", text: "reward " }), num(d.reward)),
      navBtn(d.prev_id, "Previous", "←"), navBtn(d.next_id, "Next", "→")),
    h("dl", { class: "meta" }, [["Step", num(d.step)], ["Example", d.example_id], ["Group", d.group_id], ["Env", d.env_name],
      ["Started", when(d.started_at)], ["Duration", seconds(d.duration_s)], ["Turns", num(d.turns)], ["Tool calls", num(d.tool_calls)],
      ["Tokens", `${num(d.prompt_tokens)} → ${num(d.completion_tokens)}`]]
      .map(([k, v]) => h("div", { class: "meta-item" }, h("dt", { text: k }), h("dd", { text: v, title: v })))));
}

// --- side cards ---------------------------------------------------------------------------------------

function card(title, ...children) {
  return h("section", { class: "card side-card" }, h("h2", { text: title }), ...children);
}

function rewardCard(d) {
  const names = [...Object.keys(d.rewards), ...d.zero_filled];
  const max = Math.max(1, ...Object.values(d.rewards).map(Math.abs));
  const rows = names.map((name) => {
    const zf = d.zero_filled.includes(name);
    const value = zf ? 0 : d.rewards[name];
    const fill = h("span", { class: `bar-fill${value < 0 ? " neg" : ""}` });
    fill.style.width = `${Math.min(100, (100 * Math.abs(value)) / max)}%`;
    return h("tr", { class: zf ? "zero-filled-row" : "" },
      h("td", { class: "mono", text: name }),
      h("td", { class: "bar-cell" }, h("span", { class: "bar" }, fill)),
      h("td", { class: "num strong" }, num(value)),
      h("td", {}, zf ? h("span", { class: "badge zf", title: "not emitted by this rollout; other rollouts of its batch emitted it, so it counted as 0", text: "zero-filled" }) : null));
  });
  return card("Reward",
    d.reward === null ? h("div", { class: "note warn", text: "Not scored: the rollout ended with an operational failure." }) : null,
    rows.length ? h("table", { class: "kv reward-table" }, h("tbody", {}, rows)) : h("div", { class: "muted small", text: "No reward components." }),
    h("div", { class: "totals" },
      h("div", {}, h("span", { class: "muted", text: "Total " }), h("b", { text: num(d.reward) })),
      h("div", {}, h("span", { class: "muted", text: "Advantage " }), h("b", { class: d.advantage > 0 ? "pos" : d.advantage < 0 ? "neg" : "", text: num(d.advantage) }))));
}

function terminationCard(d) {
  return card("Termination", h("div", {}, reasonBadge(d.termination_reason)),
    d.error ? h("pre", { class: "error-text", text: d.error }) : h("div", { class: "muted small", text: "No error." }));
}

function callsCard(d) {
  if (!d.model_calls.length) return card("Model calls", h("div", { class: "muted small", text: "No model calls recorded." }));
  return card(`Model calls (${d.model_calls.length})`, h("table", { class: "table compact" },
    h("thead", {}, h("tr", {}, ["#", "Finish", "Prompt", "Compl.", "Latency"].map((t) => h("th", { text: t })))),
    h("tbody", {}, d.model_calls.map((c) => h("tr", { title: c.error || "" },
      h("td", { class: "num", text: c.idx }),
      h("td", {}, c.status !== 200 ? h("span", { class: "badge reason-fail", text: `HTTP ${c.status}` }) : h("span", { class: "mono small", text: c.finish_reason || "—" })),
      h("td", { class: "num", text: num(c.prompt_tokens) }),
      h("td", { class: "num", text: num(c.completion_tokens) }),
      h("td", { class: "num", text: seconds(c.latency_s) }))))));
}

function siblingsStrip(d) {
  const names = [...new Set(d.siblings.flatMap((s) => [...Object.keys(s.rewards), ...s.zero_filled]))].sort();
  const tile = (s) => {
    const current = s.rollout_id === d.rollout_id;
    return h(current ? "div" : "a", { class: `sib${current ? " current" : ""}`, href: current ? null : rolloutUrl(run, s.rollout_id, nav),
      dataset: { id: s.rollout_id }, title: current ? "this rollout" : `open ${s.rollout_id}` },
    h("div", { class: "mono small sib-id", text: s.rollout_id }),
    h("div", { class: "sib-head" }, h("span", { class: "sib-reward", text: num(s.reward) }), reasonBadge(s.termination_reason)),
    h("dl", { class: "sib-components" }, names.map((n) => [h("dt", { class: "mono", text: n }),
      n in s.rewards ? h("dd", { text: num(s.rewards[n]) })
        : s.zero_filled.includes(n) ? h("dd", { class: "zero-filled", title: "zero-filled (counted as 0)" }, "0", h("sup", { text: "zf" }))
          : h("dd", { class: "muted", text: "—" })])),
    h("div", { class: "muted small", text: `adv. ${num(s.advantage)}` }));
  };
  return h("section", { class: "siblings-wrap" },
    h("h2", {}, "Group ", h("span", { class: "mono as-is", text: d.group_id }), ` · ${d.siblings.length} rollouts`),
    h("div", { class: "siblings-strip" }, d.siblings.map(tile)));
}

function exampleCard(d) {
  const keys = Object.keys(d.example_args);
  if (!keys.length) return null;
  return card("Example", h("pre", { class: "json", text: JSON.stringify(d.example_args, null, 2) }));
}

// --- tabs and keys ------------------------------------------------------------------------------------

function tabs(d) {
  const panels = { messages: renderMessages(d.messages), logs: renderLogs(d.logs, d.started_at, { dropped: d.logs_dropped, truncated: d.logs_truncated }) };
  const buttons = {
    messages: h("button", { class: "tab", role: "tab", dataset: { tab: "messages" } }, "Messages", h("span", { class: "tab-count", text: d.messages.length })),
    logs: h("button", { class: "tab", role: "tab", dataset: { tab: "logs" } }, "Rollout logs", h("span", { class: "tab-count", text: d.logs.length })),
  };
  const panel = h("div", { class: "tab-panel", role: "tabpanel" });
  const show = (name) => {
    for (const [k, b] of Object.entries(buttons)) { b.classList.toggle("active", k === name); b.setAttribute("aria-selected", String(k === name)); }
    clear(panel, panels[name]);
    history.replaceState(null, "", location.pathname + location.search + (name === "logs" ? "#logs" : ""));
  };
  for (const [k, b] of Object.entries(buttons)) b.addEventListener("click", () => show(k));
  show(location.hash === "#logs" ? "logs" : "messages");
  return { el: h("div", { class: "main-col" }, h("nav", { class: "tabs", role: "tablist" }, Object.values(buttons)), panel), show };
}

function keys(show) {
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.target.closest("input, textarea, select")) return;
    if (e.key === "ArrowRight" || e.key === "j") go(detail.next_id);
    else if (e.key === "ArrowLeft" || e.key === "k") go(detail.prev_id);
    else if (e.key === "m" || e.key === "1") show("messages");
    else if (e.key === "l" || e.key === "2") show("logs");
    else if (e.key === "Escape" || e.key === "u") location.href = backUrl();
    else return;
    e.preventDefault();
  });
}

async function start() {
  try {
    detail = await getJSON(`/api/runs/${encodeURIComponent(run)}/rollouts/${encodeURIComponent(rolloutId)}?${nav}`);
  } catch (error) {
    crumbs({ text: "Runs", href: "/" }, { text: run, href: runUrl(run) }, { text: rolloutId });
    clear(app, errorBox(error));
    return;
  }
  crumbs({ text: "Runs", href: "/" }, { text: run, href: backUrl() }, { text: detail.rollout_id });
  const { el, show } = tabs(detail);
  clear(app, head(detail), siblingsStrip(detail), h("div", { class: "rollout-grid" }, el,
    h("aside", { class: "side-col" }, rewardCard(detail), terminationCard(detail), callsCard(detail), exampleCard(detail))),
  h("div", { class: "key-hints muted small" }, "Keys: ", ["← / k previous", "→ / j next", "m messages", "l logs", "Esc back to the run"].map((t) => h("kbd", { text: t }))));
  keys(show);
}

start();
