"""Chat rendering and tool-call parsing for the embedded engine.

`render_prompt` turns OpenAI messages (and tools) into the prompt token ids: the tokenizer's chat
template rendered to text, then encoded without extra special tokens (as vLLM does for chat).
Templates with native tool support get `tools=` directly. Templates without it (SmolLM2's) get the
Hermes convention, the one Qwen and Hermes models are trained on: tool schemas in the system prompt
inside `<tools>`, earlier assistant calls as `<tool_call>` blocks, tool results as user turns inside
`<tool_response>`. `parse_tool_calls` reads `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
blocks back out of generated text; anything malformed stays plain content.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from jinja2 import TemplateError

from looprl.inference.protocol import ChatMessage, Tool, ToolCall, ToolCallFunction

HERMES_TOOLS_PROMPT = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ChatFormatError(ValueError):
    """A message the engine cannot render (bad content parts, bad tool call arguments)."""


def supports_tools(chat_template: str | None) -> bool:
    """Whether a chat template renders `tools` itself."""
    return bool(chat_template) and "tools" in str(chat_template)


def render_prompt(tokenizer: Any, messages: list[ChatMessage], tools: list[Tool] | None) -> list[int]:
    """Token ids of the chat template rendered for `messages`, with the assistant turn opened."""
    dicts = [_message_dict(m) for m in messages]
    tool_dicts = [t.model_dump(exclude_none=True) for t in tools or []]
    try:
        if supports_tools(tokenizer.chat_template):
            text = tokenizer.apply_chat_template(dicts, tools=tool_dicts or None, tokenize=False,
                                                 add_generation_prompt=True)
        else:
            text = tokenizer.apply_chat_template(_hermes(dicts, tool_dicts), tokenize=False, add_generation_prompt=True)
    except TemplateError as e:  # templates raise on conversations they reject (e.g. roles out of order)
        raise ChatFormatError(f"the chat template rejected these messages: {e}") from e
    # a fast tokenizer's call encodes through Rust's `encode_batch`, which releases the GIL (its `encode` does not)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def parse_tool_calls(text: str) -> tuple[str | None, list[ToolCall]]:
    """Split generated text into (content, tool calls); malformed calls leave the text untouched."""
    blocks = TOOL_CALL_RE.findall(text)
    if not blocks:
        return text, []
    calls = []
    for block in blocks:
        try:
            call = json.loads(block)
        except json.JSONDecodeError:
            return text, []
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return text, []
        arguments = call.get("arguments", {})
        if not isinstance(arguments, dict):
            return text, []
        function = ToolCallFunction(name=call["name"], arguments=json.dumps(arguments))
        calls.append(ToolCall(id=f"call_{uuid.uuid4().hex[:24]}", function=function))
    rest = TOOL_CALL_RE.sub("", text).strip()
    if "<tool_call>" in rest:  # an unclosed block next to closed ones: not a clean call
        return text, []
    return rest or None, calls


def _message_dict(message: ChatMessage) -> dict[str, Any]:
    out = message.model_dump(exclude_none=True)
    out["content"] = _text(message.content)
    if message.tool_calls:
        out["tool_calls"] = [_parsed_call(c) for c in message.tool_calls]
    return out


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if any(part.get("type") != "text" or not isinstance(part.get("text"), str) for part in content):
        raise ChatFormatError("only text content parts are supported")
    return "".join(part["text"] for part in content)


def _parsed_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call with its `arguments` as a dict, the form chat templates expect."""
    function = call.get("function")
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise ChatFormatError("assistant tool_calls need function.name")
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise ChatFormatError(f"tool call arguments are not valid JSON: {e}") from e
    return {**call, "type": "function", "function": {"name": function["name"], "arguments": arguments}}


def _hermes(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Messages with tools, tool calls and tool results rewritten as Hermes-style plain text."""
    out: list[dict[str, str]] = []
    if tools:
        block = HERMES_TOOLS_PROMPT.format(tools="\n".join(json.dumps(t) for t in tools))
        if messages[0]["role"] in ("system", "developer"):
            block = f"{messages[0]['content']}\n\n{block}"
            messages = messages[1:]
        out.append({"role": "system", "content": block})
    previous = None
    for m in messages:
        role, content = m["role"], m["content"]
        if role == "tool":
            response = f"<tool_response>\n{content}\n</tool_response>"
            if previous == "tool":  # consecutive results share one user turn
                out[-1]["content"] += "\n" + response
            else:
                out.append({"role": "user", "content": response})
            previous = role
            continue
        previous = role
        calls = [
            f"<tool_call>\n{json.dumps({'name': c['function']['name'], 'arguments': c['function']['arguments']})}"
            "\n</tool_call>"
            for c in m.get("tool_calls", [])
        ]
        out.append({"role": "system" if role == "developer" else role,
                    "content": "\n".join(filter(None, [content, *calls]))})
    return out
