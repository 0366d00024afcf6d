// The Tokens tab: each model call's completion tokens, coloured by the sampler's logprob (the darker,
// the less likely), with the loss mask (tokens the loss trained on are underlined; the rest are
// hatched) and, when the store recorded them, the trainer's logprob and the per-token mismatch (and
// the rollout-correction weight when the run used `trainer.loss.correction`). When an in-flight weight
// update landed during a reply (`orchestrator.in_flight_updates`), its tokens sit in one band per policy
// version, each labelled with the version that sampled it.

import { h, num } from "./dom.js";

// 0 (certain) .. 1 (logprob -5 or below)
function surprise(logprob) { return Math.min(1, Math.max(0, -logprob / 5)); }

function token(view, call, i) {
  const id = call.token_ids[i];
  const text = call.texts ? call.texts[i] : `#${id}`;
  const lp = call.logprobs ? call.logprobs[i] : null;
  const tlp = call.trainer_logprobs ? call.trainer_logprobs[i] : null;
  const title = [`token ${id}`, call.texts ? JSON.stringify(text) : null, lp !== null ? `sampler logprob ${num(lp, 4)} (p=${num(Math.exp(lp), 3)})` : "no logprob",
    tlp !== null && tlp !== undefined ? `trainer logprob ${num(tlp, 4)} · mismatch ${num(tlp - lp, 4)}` : null,
    call.correction_weights ? `correction weight ${num(call.correction_weights[i], 4)}` : null,
    call.policy_versions ? `sampled by policy ${call.policy_versions[i]}` : null,
    call.trained ? "trained" : "not trained"].filter(Boolean).join("\n");
  const el = h("span", { class: `tok${call.trained ? " trained" : " untrained"}${call.texts ? "" : " ids"}`, title, tabindex: "-1", dataset: { i } },
    text.replace(/\n/g, "↵\n").replace(/\t/g, "→") || "∅");
  if (lp !== null) el.style.setProperty("--s", surprise(lp).toFixed(3));
  return el;
}

function table(call) {
  const rows = call.token_ids.map((id, i) => {
    const lp = call.logprobs ? call.logprobs[i] : null;
    const tlp = call.trainer_logprobs ? call.trainer_logprobs[i] : null;
    return h("tr", {},
      h("td", { class: "num", text: i }),
      h("td", { class: "mono", text: call.texts ? JSON.stringify(call.texts[i]) : "" }),
      h("td", { class: "num mono", text: id }),
      h("td", { class: "num", text: num(lp, 4) }),
      h("td", { class: "num", text: tlp === null ? "—" : num(tlp, 4) }),
      h("td", { class: "num", text: tlp === null || lp === null ? "—" : num(tlp - lp, 4) }),
      call.correction_weights ? h("td", { class: "num", text: num(call.correction_weights[i], 4) }) : null,
      call.policy_versions ? h("td", { class: "num", text: call.policy_versions[i] }) : null,
      h("td", { text: call.trained ? "yes" : "no" }));
  });
  const heads = ["#", "Text", "Id", "Sampler logprob", "Trainer logprob", "Mismatch",
    ...(call.correction_weights ? ["Correction weight"] : []), ...(call.policy_versions ? ["Policy"] : []), "Trained"];
  return h("table", { class: "table compact token-table" },
    h("thead", {}, h("tr", {}, heads.map((t) => h("th", { text: t })))),
    h("tbody", {}, rows));
}

// Runs of consecutive tokens sampled by one policy version: [{ version, start, end }].
function versionRuns(versions) {
  const runs = [];
  versions.forEach((v, i) => {
    if (runs.length && runs[runs.length - 1].version === v) runs[runs.length - 1].end = i + 1;
    else runs.push({ version: v, start: i, end: i + 1 });
  });
  return runs;
}

// The call's tokens; with several policy versions, one labelled band per version.
function tokenRow(view, call) {
  const runs = call.policy_versions ? versionRuns(call.policy_versions) : [];
  const row = h("div", { class: "tokens", role: "group", "aria-label": `completion tokens of call ${call.idx}` });
  if (runs.length < 2) {
    row.append(...call.token_ids.map((_, i) => token(view, call, i)));
    return row;
  }
  runs.forEach((r, k) => {
    const tokens = [];
    for (let i = r.start; i < r.end; i++) tokens.push(token(view, call, i));
    row.append(h("span", { class: `version-band band-${k % 2}`, dataset: { version: r.version }, title: `sampled by policy ${r.version}` },
      h("span", { class: "version-label", text: `policy ${r.version}` }), ...tokens));
  });
  return row;
}

function callBlock(view, call) {
  const lps = call.logprobs || [];
  const mean = lps.length ? lps.reduce((a, b) => a + b, 0) / lps.length : null;
  const mism = call.trainer_logprobs && lps.length ? call.trainer_logprobs.map((t, i) => Math.abs(t - lps[i])) : null;
  const details = h("details", { class: "token-details" }, h("summary", { text: "Per-token table" }));
  details.addEventListener("toggle", () => { if (details.open && details.children.length === 1) details.append(table(call)); }, { once: false });
  return h("section", { class: "token-call", dataset: { call: call.idx } },
    h("div", { class: "token-call-head" },
      h("b", { text: `Call ${call.idx}` }),
      h("span", { class: "mono small", text: call.status !== 200 ? `HTTP ${call.status}` : call.finish_reason || "—" }),
      h("span", { class: "muted small", text: `${call.token_ids.length} tokens` }),
      mean !== null ? h("span", { class: "muted small", text: `mean logprob ${num(mean, 3)}` }) : null,
      h("span", { class: `badge ${call.trained ? "reason-ok" : "kind"}`, text: call.trained ? "trained" : "not trained" }),
      mism ? h("span", { class: "muted small", text: `max |mismatch| ${num(Math.max(...mism), 4)}` }) : null,
      call.policy_versions && call.policy_versions.length ? h("span", { class: "muted small", dataset: { part: "policies" }, text: policiesText(call.policy_versions) }) : null),
    call.token_ids.length ? tokenRow(view, call) : h("div", { class: "muted small", text: "No completion token ids recorded for this call." }),
    call.token_ids.length ? details : null);
}

// "sampled by policy 3" or "sampled by policies 12-14": the range of versions that sampled `versions`.
export function policiesText(versions) {
  const lo = Math.min(...versions), hi = Math.max(...versions);
  return lo === hi ? `sampled by policy ${lo}` : `sampled by policies ${lo}-${hi}`;
}

export function renderTokens(view) {
  const legend = h("div", { class: "token-legend small" },
    h("span", { class: "tok legend-tok", style: null }, "likely"), " → ",
    h("span", { class: "tok legend-tok unlikely" }, "unlikely"), " (sampler logprob) · ",
    h("span", { class: "tok trained" }, "trained"), " ",
    h("span", { class: "tok untrained" }, "not trained"), " (loss mask)");
  return h("div", { class: "token-view" },
    h("div", { class: "note", dataset: { part: "trained" }, text: `Loss: ${view.why}.` }),
    h("div", { class: "muted small" }, view.tokenizer ? `Decoded with the tokenizer in ${view.tokenizer}.` : "No local tokenizer for this run's model: showing token ids."),
    view.trainer_logprobs_recorded ? null : h("div", { class: "note", dataset: { part: "trainer" }, text: "Trainer logprobs not recorded for this run." }),
    legend,
    view.calls.length ? view.calls.map((c) => callBlock(view, c)) : h("div", { class: "empty", text: "No model calls recorded." }));
}
