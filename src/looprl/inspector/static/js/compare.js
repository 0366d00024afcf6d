// The Compare tab: two rollouts of a group side by side, message by message, with the words that
// differ highlighted (a word-level longest-common-subsequence diff). Reached by the `c` key, by a
// sibling tile's Compare button, or by the tab itself; the other sibling is chosen in a select.

import { getJSON, h, num, reasonBadge } from "./dom.js";
import { contentText } from "./messages.js";

const MAX_CELLS = 4e6;  // longer texts are compared line by line instead of word by word

function split(text, byLine) { return byLine ? text.split(/(\n)/) : text.split(/(\s+)/); }

// [[text, same?], ...] for each side
export function diff(a, b) {
  const byLine = a.length * b.length > MAX_CELLS;
  const x = split(a, byLine), y = split(b, byLine);
  if (x.length * y.length > MAX_CELLS) return [[[a, a === b]], [[b, a === b]]];
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const left = [], right = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { left.push([x[i], true]); right.push([y[j], true]); i++; j++; }
    else if (j < m && (i === n || L[i][j + 1] >= L[i + 1][j])) right.push([y[j++], false]);
    else left.push([x[i++], false]);
  }
  return [left, right];
}

function messageText(msg) {
  const calls = (msg.tool_calls || []).map((c) => `${(c.function || {}).name}(${(c.function || {}).arguments ?? ""})`);
  return [contentText(msg.content), ...calls].filter(Boolean).join("\n");
}

function side(parts) {
  return h("div", { class: "content diff-text" }, parts.map(([text, same]) => (same || !text.trim() ? text : h("mark", { class: "diff", text }))));
}

function column(d) {
  return h("div", { class: "compare-head" },
    h("span", { class: "mono strong", text: d.rollout_id }), reasonBadge(d.termination_reason),
    h("span", { class: "muted small", text: `reward ${num(d.reward)} · adv. ${num(d.advantage)}` }));
}

export function renderCompare(d, run, load) {
  const others = d.siblings.filter((s) => s.rollout_id !== d.rollout_id);
  if (!others.length) return h("div", { class: "empty", text: "This rollout has no siblings to compare with." });
  const body = h("div", { class: "compare-body" });
  const select = h("select", { "aria-label": "sibling to compare with", class: "compare-select" },
    others.map((s) => h("option", { value: s.rollout_id, text: `${s.rollout_id} (reward ${num(s.reward)})` })));
  async function show(otherId) {
    select.value = otherId;
    body.replaceChildren(h("p", { class: "muted", text: "Loading…" }));
    const other = await load(otherId);
    const rows = [];
    const n = Math.max(d.messages.length, other.messages.length);
    for (let k = 0; k < n; k++) {
      const a = d.messages[k], b = other.messages[k];
      const [l, r] = diff(a ? messageText(a) : "", b ? messageText(b) : "");
      const same = l.every(([, s]) => s) && r.every(([, s]) => s);
      rows.push(h("div", { class: `compare-row${same ? " same" : ""}` },
        h("div", { class: "compare-role muted small", text: `#${k + 1} ${(a || b).role}${same ? " · identical" : ""}` }),
        h("div", { class: "compare-cells" }, a ? side(l) : h("div", { class: "content muted", text: "(no message)" }),
          b ? side(r) : h("div", { class: "content muted", text: "(no message)" }))));
    }
    body.replaceChildren(h("div", { class: "compare-cells compare-heads" }, column(d), column(other)), ...rows);
  }
  select.addEventListener("change", () => show(select.value));
  const view = h("div", { class: "compare" },
    h("label", { class: "field compare-pick" }, h("span", { class: "field-label", text: "Compare with" }), select),
    body);
  view.show = show;
  show(others[0].rollout_id);
  return view;
}

export async function fetchRollout(run, id) {
  return getJSON(`/api/runs/${encodeURIComponent(run)}/rollouts/${encodeURIComponent(id)}`);
}
