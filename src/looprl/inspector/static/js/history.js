// The rollout page's Example history card: the same example's mean reward at every step it was
// sampled (train) and evaluated (eval), as a chart and as a list linking to those steps' rollouts.

import { getJSON, h, num } from "./dom.js";
import { lineChart } from "./plot.js";

export function historyCard(d, api, rolloutHref) {
  const el = h("section", { class: "card side-card history-card" }, h("h2", {}, "Example ", h("span", { class: "mono as-is", text: d.example_id })),
    h("div", { class: "muted small", text: "Loading…" }));
  getJSON(`${api}/examples/${encodeURIComponent(d.example_id)}/history`).then((hist) => {
    const splits = [...new Set(hist.points.map((p) => p.split))].sort().reverse();
    const series = splits.map((split) => ({ name: `${split} mean reward`, dashed: split === "eval",
      points: hist.points.filter((p) => p.split === split).map((p) => [p.step, p.mean_reward]) }));
    const rows = hist.points.map((p) => h("tr", { class: p.rollout_ids.includes(d.rollout_id) ? "current" : "" },
      h("td", { class: "num", text: num(p.step) }),
      h("td", { text: p.split }),
      h("td", { class: "num strong", text: num(p.mean_reward) }),
      h("td", { class: "muted small", text: `${p.scored}/${p.rollouts} scored` }),
      h("td", {}, p.rollout_ids.map((id) => (id === d.rollout_id ? h("span", { class: "mono small hist-here", text: "this" })
        : h("a", { class: "mono small hist-link", href: rolloutHref(id), text: id.slice(0, 8), title: id }))))));
    el.replaceChildren(el.firstChild,
      hist.points.length > 1 ? lineChart("Mean reward of this example", series, { y: "mean reward" }) : null,
      h("table", { class: "table compact history-table" },
        h("thead", {}, h("tr", {}, ["Step", "Split", "Mean", "", "Rollouts"].map((t) => h("th", { text: t })))),
        h("tbody", {}, rows)));
  }).catch(() => el.replaceChildren(el.firstChild, h("div", { class: "muted small", text: "History unavailable." })));
  return el;
}
