"""A chat template that gives vLLM the embedded engine's Hermes tool rendering, for models whose own
template has no tool support (SmolLM2's).

vLLM renders prompts with the model's chat template; one that ignores `tools` and tool calls would
show the model neither the tool schemas nor its earlier calls. The embedded engine rewrites such
conversations in the Hermes convention first (`looprl.inference.chat`): schemas in the system
prompt, earlier calls as `<tool_call>` blocks, results as `<tool_response>` user turns.
`hermes_template(template)` is the model's template preceded by the same rewrite in Jinja, so both
engines render the same prompt tokens; vLLM gets it as `--chat-template`.
"""

from __future__ import annotations

import json
from pathlib import Path

from looprl.inference.chat import HERMES_TOOLS_PROMPT, supports_tools

_REWRITE = """{%- set ns = namespace(out=[], previous=none, parts=[]) -%}
{%- set msgs = messages -%}
{%- if tools -%}
  {%- set ns.parts = [] -%}
  {%- for t in tools -%}{%- set ns.parts = ns.parts + [t | tojson] -%}{%- endfor -%}
  {%- set block = PROMPT_HEAD ~ (ns.parts | join("\\n")) ~ PROMPT_TAIL -%}
  {%- if msgs[0].role in ["system", "developer"] -%}
    {%- set block = msgs[0].content ~ "\\n\\n" ~ block -%}
    {%- set msgs = msgs[1:] -%}
  {%- endif -%}
  {%- set ns.out = [{"role": "system", "content": block}] -%}
{%- endif -%}
{%- for m in msgs -%}
  {%- if m.role == "tool" -%}
    {%- set response = "<tool_response>\\n" ~ m.content ~ "\\n</tool_response>" -%}
    {%- if ns.previous == "tool" -%}
      {%- set ns.out = ns.out[:-1] + [{"role": "user", "content": ns.out[-1].content ~ "\\n" ~ response}] -%}
    {%- else -%}
      {%- set ns.out = ns.out + [{"role": "user", "content": response}] -%}
    {%- endif -%}
  {%- else -%}
    {%- set ns.parts = [m.content] if m.content else [] -%}
    {%- for c in m.tool_calls or [] -%}
      {%- set call = {"name": c.function.name, "arguments": c.function.arguments} -%}
      {%- set ns.parts = ns.parts + ["<tool_call>\\n" ~ (call | tojson) ~ "\\n</tool_call>"] -%}
    {%- endfor -%}
    {%- set ns.out = ns.out + [{"role": "system" if m.role == "developer" else m.role,
                                "content": ns.parts | join("\\n")}] -%}
  {%- endif -%}
  {%- set ns.previous = m.role -%}
{%- endfor -%}
{%- set messages = ns.out -%}
"""


def model_chat_template(model_dir: Path) -> str | None:
    """The chat template an HF model directory carries (`chat_template.jinja` or the tokenizer config)."""
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    config = model_dir / "tokenizer_config.json"
    template = json.loads(config.read_text()).get("chat_template") if config.is_file() else None
    return template if isinstance(template, str) else None


def hermes_template(template: str) -> str:
    head, tail = HERMES_TOOLS_PROMPT.format(tools="\0").split("\0")
    rewrite = _REWRITE.replace("PROMPT_HEAD", json.dumps(head)).replace("PROMPT_TAIL", json.dumps(tail))
    return rewrite + template


def tool_template_for(model_dir: Path) -> str | None:
    """`hermes_template` of the model's template when that template has no tool support, else None."""
    template = model_chat_template(model_dir)
    return hermes_template(template) if template and not supports_tools(template) else None
