// The rollout table's filter bar: search, step / step range, termination reason, reward range,
// errors and log level. Values are read from and written to the page's URL parameters.

import { h } from "./dom.js";

export const FILTER_KEYS = ["q", "step", "step_min", "step_max", "termination_reason", "reward_min", "reward_max",
  "has_error", "min_log_level", "sort", "order"];

export const CLEARABLE = FILTER_KEYS.filter((k) => k !== "sort" && k !== "order");

function field(label, control) {
  return h("label", { class: "field" }, h("span", { class: "field-label", text: label }), control);
}

function select(name, value, options, onchange) {
  return h("select", { name, onchange: (e) => onchange({ [name]: e.target.value || null }) },
    options.map(([v, text]) => h("option", { value: v, selected: String(value ?? "") === v, text })));
}

function numberInput(name, value, placeholder, onchange, step = "1") {
  return h("input", { type: "number", name, value: value ?? "", placeholder, step, class: "narrow",
    onchange: (e) => onchange({ [name]: e.target.value || null }) });
}

export function filterBar(state, reasons, setFilter) {
  let timer = null;
  const search = h("input", {
    type: "search", name: "q", value: state.get("q") || "", placeholder: "Search messages and logs…",
    class: "search", "aria-label": "search messages and logs", autocomplete: "off",
    oninput: (e) => { clearTimeout(timer); timer = setTimeout(() => setFilter({ q: e.target.value.trim() || null }), 350); },
    onkeydown: (e) => { if (e.key === "Enter") { clearTimeout(timer); setFilter({ q: e.target.value.trim() || null }); } },
  });
  const active = CLEARABLE.some((k) => state.get(k));
  return h("div", { class: "filters card" },
    h("div", { class: "filters-row" }, search,
      h("button", { class: "btn ghost", disabled: !active, dataset: { clear: "" },
        onclick: () => setFilter(Object.fromEntries(CLEARABLE.map((k) => [k, null]))) }, "Clear filters")),
    h("div", { class: "filters-row" },
      field("Step", numberInput("step", state.get("step"), "any", setFilter)),
      field("Steps from", numberInput("step_min", state.get("step_min"), "min", setFilter)),
      field("to", numberInput("step_max", state.get("step_max"), "max", setFilter)),
      field("Termination", select("termination_reason", state.get("termination_reason"),
        [["", "any"], ...reasons.map((r) => [r, r])], setFilter)),
      field("Reward from", numberInput("reward_min", state.get("reward_min"), "min", setFilter, "any")),
      field("to", numberInput("reward_max", state.get("reward_max"), "max", setFilter, "any")),
      field("Errors", select("has_error", state.get("has_error"), [["", "any"], ["true", "with error"], ["false", "without"]], setFilter)),
      field("Logs", select("min_log_level", state.get("min_log_level"),
        [["", "any level"], ["20", "INFO or above"], ["30", "WARNING or above"], ["40", "ERROR or above"], ["50", "CRITICAL"]], setFilter))));
}
