// The Rollout logs tab: the stdlib log records the env emitted while this rollout ran (and those of its
// group's reward hook), with a level filter, logger filter, text filter, time relative to the start
// of the rollout and expandable tracebacks.

import { clear, h, levelBadge, levelName } from "./dom.js";

export function renderLogs(logs, startedAt, { dropped = 0, truncated = 0 } = {}) {
  const loggers = [...new Set(logs.map((r) => r.logger))].sort();
  const filter = { level: 0, loggers: new Set(loggers), text: "" };
  const list = h("div", { class: "log-list" });
  const count = h("span", { class: "muted small" });

  function draw() {
    const needle = filter.text.toLowerCase();
    const shown = logs.filter((r) => r.level >= filter.level && filter.loggers.has(r.logger) &&
      (!needle || r.message.toLowerCase().includes(needle) || (r.exception || "").toLowerCase().includes(needle)));
    count.textContent = `${shown.length} of ${logs.length} records`;
    clear(list, shown.length ? shown.map(row) : h("div", { class: "empty", text: logs.length ? "No records match." : "This rollout emitted no log records." }));
  }

  function row(r) {
    const offset = r.time - startedAt;
    const where = [r.func, r.lineno].filter((x) => x !== null && x !== undefined).join(":");
    return h("div", { class: `log-row level-row-${levelName(r.level).toLowerCase()}`, dataset: { level: r.level } },
      h("span", { class: "log-time mono", text: `${offset >= 0 ? "+" : ""}${offset.toFixed(3)}s`, title: new Date(r.time * 1000).toISOString() }),
      levelBadge(r.level, r.level_name),
      h("span", { class: "log-logger mono", text: r.logger, title: r.pathname || r.logger }),
      h("div", { class: "log-body" },
        h("div", { class: "log-message", text: r.message }),
        r.exception ? h("details", { class: "traceback" }, h("summary", { text: "Traceback" }), h("pre", { text: r.exception })) : null),
      h("span", { class: "log-where mono muted small", text: where, title: r.pathname ? `${r.pathname}:${r.lineno ?? ""}` : "" }));
  }

  const levels = h("div", { class: "segmented", role: "group", "aria-label": "minimum level" },
    [[0, "All"], [20, "INFO+"], [30, "WARNING+"], [40, "ERROR+"]].map(([level, label]) => h("button", {
      class: `seg-btn${level === 0 ? " active" : ""}`, dataset: { level },
      onclick: (e) => { filter.level = level; for (const b of levels.children) b.classList.toggle("active", b === e.currentTarget); draw(); },
    }, label)));
  const loggerChips = h("div", { class: "logger-chips" }, loggers.map((name) => h("label", { class: "chip" },
    h("input", { type: "checkbox", checked: true, onchange: (e) => { e.target.checked ? filter.loggers.add(name) : filter.loggers.delete(name); draw(); } }),
    h("span", { class: "mono", text: name }))));
  const text = h("input", { type: "search", class: "search small-search", placeholder: "Filter log messages…", "aria-label": "filter log messages",
    oninput: (e) => { filter.text = e.target.value; draw(); } });
  const notes = [dropped ? `${dropped} records were dropped (per-rollout cap)` : null,
    truncated ? `${truncated} messages were truncated` : null].filter(Boolean);
  draw();
  return h("div", { class: "logs" },
    h("div", { class: "logs-toolbar" }, levels, text, count),
    loggers.length > 1 ? loggerChips : null,
    notes.length ? h("div", { class: "note", text: notes.join(" · ") }) : null,
    list);
}
