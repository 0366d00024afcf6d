// DOM and data helpers shared by the inspector's pages.
// Every string from the run store is untrusted: it reaches the page only as text nodes
// (`h` never parses markup), and links are built from ids with encodeURIComponent.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

export const body = document.body.dataset;

export function runUrl(run, params) {
  const qs = params && params.toString();
  return `/runs/${encodeURIComponent(run)}${qs ? "?" + qs : ""}`;
}

export function rolloutUrl(run, rollout, params) {
  const qs = params && params.toString();
  return `/runs/${encodeURIComponent(run)}/rollouts/${encodeURIComponent(rollout)}${qs ? "?" + qs : ""}`;
}

export async function getJSON(path) {
  const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail || detail; } catch { /* not JSON */ }
    throw new Error(`${response.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
  return response.json();
}

export function crumbs(...items) {
  const nav = document.getElementById("crumbs");
  clear(nav, items.map((item, i) => [
    i ? h("span", { class: "crumb-sep", text: "/" }) : null,
    item.href ? h("a", { href: item.href, text: item.text }) : h("span", { class: "crumb-here", text: item.text }),
  ]));
}

export function setLive(on) {
  document.getElementById("live").hidden = !on;
}

export function errorBox(error) {
  return h("div", { class: "error-box", role: "alert" }, h("strong", { text: "Could not load: " }), String(error.message || error));
}

// --- formatting -------------------------------------------------------------------------------

export function num(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  if (Number.isInteger(value)) return value.toLocaleString("en-US");
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(2);
  return value.toFixed(digits).replace(/\.?0+$/, "") || "0";
}

export function seconds(s) {
  if (s === null || s === undefined) return "—";
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 120 ? `${m}m ${Math.round(s % 60)}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
}

export function when(unix) {
  if (!unix) return "—";
  return new Date(unix * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// --- termination reasons and log levels ---------------------------------------------------------

const SCORED = new Set(["finished", "output_exceeded", "context_exceeded", "max_turns_exceeded", "tool_budget_exceeded"]);

export function reasonKind(reason) {
  if (reason === "finished") return "ok";
  return SCORED.has(reason) ? "warn" : "fail";
}

export function reasonBadge(reason) {
  const kind = reasonKind(reason);
  const title = kind === "ok" ? "scored" : kind === "warn" ? "scored (cut short)" : "operational failure: not scored";
  return h("span", { class: `badge reason-${kind}`, title, text: reason });
}

export const LEVELS = [[10, "DEBUG"], [20, "INFO"], [30, "WARNING"], [40, "ERROR"], [50, "CRITICAL"]];

export function levelName(level) {
  let name = "NOTSET";
  for (const [n, label] of LEVELS) if (level >= n) name = label;
  return name;
}

export function levelBadge(level, label) {
  const name = levelName(level);
  return h("span", { class: `badge level level-${name.toLowerCase()}`, text: label || name });
}

export function emptyState(text) {
  return h("div", { class: "empty", text });
}
