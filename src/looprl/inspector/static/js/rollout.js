// The rollout page (`/runs/{run}/rollouts/{id}`): the transcript, the completion tokens, the rollout's
// log records and a side-by-side comparison with a sibling in four tabs, beside the reward arithmetic,
// termination, model calls, the example's history and the group's siblings (each with the start of
// its final reply). The URL's query is the run page's list (filters and sort): prev/next (← → or k j)
// walk that list.

import { body, clear, crumbs, errorBox, getJSON, h, num, reasonBadge, rolloutUrl, runUrl, seconds, when } from "./dom.js";
import { renderMessages } from "./messages.js";
import { renderLogs } from "./logs.js";
import { rewardCard } from "./arithmetic.js";
import { policiesText, renderTokens } from "./tokens.js";
import { fetchRollout, renderCompare } from "./compare.js";
import { historyCard } from "./history.js";

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
  const versions = d.model_calls.flatMap((c) => c.completion_policy_versions || []);
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
      ["Tokens", `${num(d.prompt_tokens)} → ${num(d.completion_tokens)}`],
      ...(versions.length ? [["Weights", policiesText(versions)]] : [])]
      .map(([k, v]) => h("div", { class: "meta-item" }, h("dt", { text: k }), h("dd", { text: v, title: v })))));
}

// --- side cards ---------------------------------------------------------------------------------------

function card(title, ...children) {
  return h("section", { class: "card side-card" }, h("h2", { text: title }), ...children);
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

function siblingsStrip(d, replies, compareWith) {
  const names = [...new Set(d.siblings.flatMap((s) => [...Object.keys(s.rewards), ...s.zero_filled]))].sort();
  const tile = (s) => {
    const current = s.rollout_id === d.rollout_id;
    return h("div", { class: `sib${current ? " current" : ""}`, dataset: { id: s.rollout_id } },
    h("div", { class: "sib-top" },
      current ? h("span", { class: "mono small sib-id", text: s.rollout_id, title: "this rollout" })
        : h("a", { class: "mono small sib-id", href: rolloutUrl(run, s.rollout_id, nav), text: s.rollout_id, title: `open ${s.rollout_id}` }),
      current ? null : h("button", { class: "btn ghost small sib-compare", title: `compare with ${s.rollout_id} side by side`,
        onclick: () => compareWith(s.rollout_id) }, "Compare")),
    h("div", { class: "sib-reply", title: replies[s.rollout_id] || "", text: replies[s.rollout_id] ? `“${replies[s.rollout_id]}”` : "(no reply)" }),
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

const TABS = [["messages", "Messages"], ["tokens", "Tokens"], ["logs", "Rollout logs"], ["compare", "Compare"]];

function tabs(d) {
  const makers = {
    messages: () => renderMessages(d.messages),
    tokens: () => h("div", { class: "muted", text: "Loading tokens…" }),
    logs: () => renderLogs(d.logs, d.started_at, { dropped: d.logs_dropped, truncated: d.logs_truncated }),
    compare: () => renderCompare(d, run, (id) => fetchRollout(run, id)),
  };
  const counts = { messages: d.messages.length, tokens: d.completion_tokens, logs: d.logs.length, compare: d.siblings.length - 1 };
  const panels = {};
  const buttons = Object.fromEntries(TABS.map(([k, label]) => [k, h("button", { class: "tab", role: "tab", dataset: { tab: k } },
    label, h("span", { class: "tab-count", text: counts[k] }))]));
  const panel = h("div", { class: "tab-panel", role: "tabpanel" });
  const show = (name, arg) => {
    for (const [k, b] of Object.entries(buttons)) { b.classList.toggle("active", k === name); b.setAttribute("aria-selected", String(k === name)); }
    panels[name] = panels[name] || makers[name]();
    if (name === "tokens" && !panels.tokensLoaded) {
      panels.tokensLoaded = true;
      getJSON(`/api/runs/${encodeURIComponent(run)}/rollouts/${encodeURIComponent(rolloutId)}/tokens`)
        .then((view) => { const el = renderTokens(view); panels.tokens.replaceWith(el); panels.tokens = el; })
        .catch((error) => { const el = errorBox(error); panels.tokens.replaceWith(el); panels.tokens = el; });
    }
    if (name === "compare" && arg && panels.compare.show) panels.compare.show(arg);
    clear(panel, panels[name]);
    history.replaceState(null, "", location.pathname + location.search + (name === "messages" ? "" : `#${name}`));
  };
  for (const [k, b] of Object.entries(buttons)) b.addEventListener("click", () => show(k));
  const initial = location.hash.slice(1);
  show(initial in buttons ? initial : "messages");
  return { el: h("div", { class: "main-col" }, h("nav", { class: "tabs", role: "tablist" }, Object.values(buttons)), panel), show };
}

function keys(show) {
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.target.closest("input, textarea, select")) return;
    if (e.key === "ArrowRight" || e.key === "j") go(detail.next_id);
    else if (e.key === "ArrowLeft" || e.key === "k") go(detail.prev_id);
    else if (e.key === "m" || e.key === "1") show("messages");
    else if (e.key === "t" || e.key === "2") show("tokens");
    else if (e.key === "l" || e.key === "3") show("logs");
    else if (e.key === "c" || e.key === "4") show("compare");
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
  const base = `/api/runs/${encodeURIComponent(run)}`;
  const [explained, replies] = await Promise.all([
    getJSON(`${base}/rollouts/${encodeURIComponent(rolloutId)}/explain`),
    getJSON(`${base}/rollouts/${encodeURIComponent(rolloutId)}/replies`).catch(() => ({}))]);
  const { el, show } = tabs(detail);
  const history = historyCard(detail, base, (id) => rolloutUrl(run, id));
  clear(app, head(detail), siblingsStrip(detail, replies, (id) => { show("compare", id); el.scrollIntoView({ block: "start" }); }),
    h("div", { class: "rollout-grid" }, el,
      h("aside", { class: "side-col" }, rewardCard(detail, explained), history, terminationCard(detail), callsCard(detail), exampleCard(detail))),
  h("div", { class: "key-hints muted small" }, "Keys: ", ["← / k previous", "→ / j next", "m messages", "t tokens", "l logs", "c compare", "Esc back to the run"].map((t) => h("kbd", { text: t }))));
  keys(show);
}

start();
