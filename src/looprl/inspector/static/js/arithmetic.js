// The rollout page's Reward card: the reward arithmetic. Each component's value x weight = its
// contribution, zero-filled components marked (they add 0), the total, and for a train rollout of an
// rl run the group baseline: the siblings' rewards, their mean (and std when normalising) and how the
// advantage follows from them, exactly as session/advantages.py computes it.

import { h, num } from "./dom.js";

function termRows(d, ex) {
  const terms = ex.terms.map((t) => ({ ...t, zf: false }));
  for (const name of d.zero_filled) terms.push({ name, value: 0, weight: ex.weights[name] ?? 1, contribution: 0, zf: true });
  const max = Math.max(1e-9, ...terms.map((t) => Math.abs(t.contribution)));
  return terms.map((t) => {
    const fill = h("span", { class: `bar-fill${t.contribution < 0 ? " neg" : ""}` });
    fill.style.width = `${Math.min(100, (100 * Math.abs(t.contribution)) / max)}%`;
    return h("tr", { class: t.zf ? "zero-filled-row" : "", dataset: { component: t.name } },
      h("td", { class: "mono" }, t.name, t.zf ? h("span", { class: "badge zf", title: "not emitted by this rollout; other rollouts of its batch emitted it, so it counted as 0", text: "zero-filled" }) : null),
      h("td", { class: "num", text: num(t.value) }),
      h("td", { class: "num muted", text: `× ${num(t.weight)}` }),
      h("td", { class: "num strong", text: `= ${num(t.contribution)}` }),
      h("td", { class: "bar-cell" }, h("span", { class: "bar" }, fill)));
  });
}

function baselineBlock(d, b) {
  const members = b.members.map((m) => h("tr", { class: m.rollout_id === d.rollout_id ? "current" : "" },
    h("td", { class: "mono small", text: m.rollout_id }),
    h("td", { class: "num", text: m.counted ? num(m.reward) : "—", title: m.counted ? "" : "failed: left out of the baseline" }),
    h("td", { class: "num muted", text: num(m.advantage) })));
  const r = d.reward;
  let how;
  if (b.skipped) how = "Every counted reward equals the mean: all advantages are 0, so the group carried no signal and was left out of the batch (advantage —).";
  else if (r === null) how = "This rollout failed and failures are not counted: no advantage, not trained.";
  else if (b.normalize_std) how = `advantage = (reward − mean) / (std + ε) = (${num(r, 4)} − ${num(b.mean, 4)}) / (${num(b.std, 4)} + ${b.eps}) = ${num(b.advantage, 4)}`;
  else how = `advantage = reward − mean = ${num(r, 4)} − ${num(b.mean, 4)} = ${num(b.advantage, 4)}`;
  const mismatch = !b.skipped && r !== null && d.advantage !== null && Math.abs(d.advantage - b.advantage) > 1e-6;
  return h("div", { class: "baseline", dataset: { part: "baseline" } },
    h("h3", { text: "Group baseline" }),
    h("table", { class: "table compact" }, h("thead", {}, h("tr", {}, ["Sibling", "Reward", "Adv."].map((t) => h("th", { text: t })))),
      h("tbody", {}, members)),
    h("div", { class: "formula" },
      h("div", {}, `mean of ${b.members.filter((m) => m.counted).length} counted rewards = `, h("b", { text: num(b.mean, 4) }),
        b.normalize_std ? [", std = ", h("b", { text: num(b.std, 4) })] : null),
      h("div", { class: "mono small", text: how }),
      h("div", { class: "muted small", text: `${b.include_failed ? "failures count as reward 0" : "failures stay out of the baseline"}; ${b.normalize_std ? "divided by the group's std (normalize_std)" : "not divided by the std (normalize_std off)"}` }),
      mismatch ? h("div", { class: "note warn", text: `stored advantage ${num(d.advantage, 4)} differs from the recomputed one` }) : null));
}

export function rewardCard(d, ex) {
  const rows = termRows(d, ex);
  return h("section", { class: "card side-card reward-card" }, h("h2", { text: "Reward" }),
    d.reward === null ? h("div", { class: "note warn", text: "Not scored: the rollout ended with an operational failure." }) : null,
    rows.length ? h("table", { class: "kv reward-table" }, h("thead", {}, h("tr", {}, ["Component", "Value", "Weight", "Contribution", ""].map((t) => h("th", { text: t })))),
      h("tbody", {}, rows)) : h("div", { class: "muted small", text: "No reward components." }),
    h("div", { class: "muted small", text: ex.weights_configured ? "weights from the run's orchestrator.reward_weights (unnamed components weigh 1)" : "no reward weights configured: every component weighs 1" }),
    h("div", { class: "totals" },
      h("div", {}, h("span", { class: "muted", text: "Total " }), h("b", { dataset: { part: "total" }, text: num(d.reward) })),
      h("div", {}, h("span", { class: "muted", text: "Advantage " }), h("b", { class: d.advantage > 0 ? "pos" : d.advantage < 0 ? "neg" : "", text: num(d.advantage) }))),
    ex.baseline ? baselineBlock(d, ex.baseline) : null);
}
