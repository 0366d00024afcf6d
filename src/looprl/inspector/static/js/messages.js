// The Messages tab: the rollout's chat transcript. System, user and assistant turns, the assistant's
// tool calls and the tools' results each look different; long content starts collapsed.

import { h } from "./dom.js";

const LONG_CHARS = 1500, LONG_LINES = 24;

function collapsible(text, cls) {
  const block = h("div", { class: `content ${cls || ""}`, text });
  const lines = text.split("\n").length;
  if (text.length <= LONG_CHARS && lines <= LONG_LINES) return block;
  block.classList.add("collapsed");
  const toggle = h("button", { class: "btn ghost small expand", text: `Show all (${lines} lines, ${text.length.toLocaleString()} chars)` });
  toggle.addEventListener("click", () => {
    const collapsed = block.classList.toggle("collapsed");
    toggle.textContent = collapsed ? `Show all (${lines} lines, ${text.length.toLocaleString()} chars)` : "Show less";
  });
  return h("div", {}, block, toggle);
}

function contentParts(content) {
  if (content === null || content === undefined || content === "") return [];
  if (typeof content === "string") return [collapsible(content)];
  if (!Array.isArray(content)) return [collapsible(JSON.stringify(content, null, 2), "mono")];
  return content.map((part) => {
    if (part && part.type === "text") return collapsible(String(part.text ?? ""));
    if (part && part.type === "image_url") {
      const url = String((part.image_url && part.image_url.url) || "");
      return h("div", { class: "content muted", text: `[image: ${url.startsWith("data:") ? url.slice(0, 40) + "…" : url}]` });
    }
    return collapsible(JSON.stringify(part, null, 2), "mono");
  });
}

// a message's content as plain text (text parts joined; other parts as JSON)
export function contentText(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return JSON.stringify(content);
  return content.map((part) => (part && part.type === "text" ? String(part.text ?? "") : JSON.stringify(part))).join("\n");
}

function prettyArgs(raw) {
  if (typeof raw !== "string") return JSON.stringify(raw, null, 2);
  try { return JSON.stringify(JSON.parse(raw), null, 2); } catch { return raw; }
}

function toolCall(call) {
  const fn = call.function || {};
  return h("div", { class: "tool-call" },
    h("div", { class: "tool-call-head" }, h("span", { class: "tool-icon", text: "ƒ" }),
      h("span", { class: "mono strong", text: String(fn.name ?? "?") }), h("span", { class: "muted mono small", text: call.id ? `  ${call.id}` : "" })),
    collapsible(prettyArgs(fn.arguments ?? ""), "mono code"));
}

function message(msg, index) {
  const role = String(msg.role ?? "unknown");
  const known = ["system", "user", "assistant", "tool"].includes(role) ? role : "other";
  const head = h("div", { class: "msg-head" },
    h("span", { class: `role role-${known}`, text: role === "tool" ? "tool result" : role }),
    role === "tool" && msg.name ? h("span", { class: "mono strong small", text: String(msg.name) }) : null,
    role === "tool" && msg.tool_call_id ? h("span", { class: "mono muted small", text: `← ${msg.tool_call_id}` }) : null,
    h("span", { class: "msg-index", text: `#${index + 1}` }));
  const reasoning = msg.reasoning_content || msg.reasoning;
  return h("article", { class: `msg msg-${known}`, dataset: { role } }, head,
    reasoning ? h("details", { class: "reasoning" }, h("summary", { text: "Reasoning" }), collapsible(String(reasoning))) : null,
    contentParts(msg.content).map((el) => (role === "tool" ? (el.classList.add("mono"), el) : el)),
    (msg.tool_calls || []).map(toolCall),
    !msg.content && !(msg.tool_calls || []).length && !reasoning ? h("div", { class: "content muted", text: "(empty)" }) : null);
}

export function renderMessages(messages) {
  if (!messages.length) return h("div", { class: "empty", text: "No messages recorded." });
  return h("div", { class: "transcript" }, messages.map(message));
}
