"""The standard model/tool loop of one `BaseEnv` rollout.

Feeds the transcript to the model through the rollout's gateway URL, appends each assistant turn,
runs requested tools, and stops with a termination reason: `finished` (the model answered without
tool calls), `output_exceeded` (finish_reason `length`), `context_exceeded` (the gateway's or the
engine's context limit), `max_turns_exceeded`, or `tool_budget_exceeded`. Tool-call mistakes the
model makes (unknown tool, malformed or non-object JSON arguments) become tool messages it can read,
and the rollout goes on. A `run_tool` that raises, or returns something that is neither a str nor
JSON-serialisable, raises `ToolError`; model/HTTP errors raise `ModelError`.

The run's caps (`looprl.envs._caps`) hold here: a tool result past its cap is cut, with a marker, before
the model reads it; a transcript past its cap ends the rollout as `transcript_too_large`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import openai
from openai.types.chat import ChatCompletion

from looprl.envs._caps import TRANSCRIPT_TOO_LARGE, current_caps, cut_tool_result, message_chars, transcript_error
from looprl.envs.failures import RolloutFailure
from looprl.envs.types import Message, Tool

if TYPE_CHECKING:
    from looprl.envs.base_env import BaseEnv
    from looprl.envs.rollout import BaseRollout


class ModelError(Exception):
    """The model call failed (HTTP error, bad response): the rollout ends as `model_error`."""


class ToolError(Exception):
    """`run_tool` raised or returned a value the model cannot be shown: the rollout ends as `tool_error`."""


CONTEXT_CODES = ("context_budget_exceeded", "context_length_exceeded")


def _is_context_error(error: openai.APIStatusError) -> bool:
    body = error.body if isinstance(error.body, dict) else {}
    body = body.get("error", body) if isinstance(body.get("error"), dict) else body
    code = str(body.get("code") or "")
    text = str(body.get("message") or error.message).lower()
    return code in CONTEXT_CODES or "maximum context length" in text or "context length" in text


def assistant_message(message: Any) -> Message:
    """An OpenAI SDK assistant message as a plain transcript dict."""
    out: Message = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": tc.id, "type": "function",
             "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
            for tc in message.tool_calls
        ]
    return out


def tool_result_text(name: str, result: Any) -> str:
    """The tool message content: the str itself, or the value as JSON; anything else is a `ToolError`."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError) as e:
        raise ToolError(f"run_tool({name!r}) returned a {type(result).__name__}, which is neither a str nor "
                        f"JSON-serialisable ({e})") from None


async def run_chat_loop(env: BaseEnv, rollout: BaseRollout, client: openai.AsyncOpenAI, model: str,
                        tools: list[Tool]) -> None:
    """Run the model/tool loop until a termination reason is set on `rollout`."""
    tool_names = {t["function"]["name"] for t in tools}
    max_turns = env.max_turns
    assert max_turns is not None
    transcript = _Transcript(rollout.messages)
    while rollout.termination_reason is None:
        if rollout.turns >= max_turns:
            rollout.termination_reason = "max_turns_exceeded"
            return
        try:
            # `chat.completions.create` without its request transform: that walks every message against the SDK's
            # TypedDicts (most of an env worker's CPU per call) and changes nothing in plain JSON message dicts
            response = await client.post("/chat/completions", cast_to=ChatCompletion, body={
                "model": model, "messages": rollout.messages, **({"tools": tools} if tools else {})})
        except openai.APIStatusError as e:
            if e.status_code == 400 and _is_context_error(e):
                rollout.termination_reason = "context_exceeded"
                return
            raise ModelError(f"model call failed: HTTP {e.status_code}: {e.message}") from e
        except openai.APIError as e:
            raise ModelError(f"model call failed: {e}") from e
        if not response.choices:
            raise ModelError("model call returned no choices")
        choice = response.choices[0]
        rollout.turns += 1
        transcript.append(assistant_message(choice.message))
        if choice.finish_reason == "length":
            rollout.termination_reason = "output_exceeded"
            return
        if not choice.message.tool_calls:
            rollout.termination_reason = "finished"
            return
        for call in choice.message.tool_calls:
            if env.max_tool_calls is not None and rollout.tool_calls >= env.max_tool_calls:
                rollout.termination_reason = "tool_budget_exceeded"
                return
            rollout.tool_calls += 1
            function = call.function  # type: ignore[union-attr]  # only custom tools get custom calls; BaseEnv offers none
            content = await _run_one_tool(env, rollout.rollout_id, function.name, function.arguments, tool_names)
            content = cut_tool_result(function.name, content, current_caps().max_tool_result_chars)
            transcript.append({"role": "tool", "tool_call_id": call.id, "content": content})


class _Transcript:
    """A rollout's messages with their size kept as they grow; past the run's cap the rollout fails."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages, self.limit = messages, current_caps().max_transcript_chars
        self.chars = sum(map(message_chars, messages)) if self.limit is not None else 0
        self._check()

    def append(self, message: Message) -> None:
        self.messages.append(message)
        if self.limit is not None:
            self.chars += message_chars(message)
            self._check()

    def _check(self) -> None:
        if self.limit is not None and self.chars > self.limit:
            raise RolloutFailure(TRANSCRIPT_TOO_LARGE, transcript_error(self.chars, self.limit))


async def _run_one_tool(env: BaseEnv, rollout_id: str, name: str, arguments: str, tool_names: set[str]) -> str:
    """The tool message content for one call: the tool's result, or what the model got wrong."""
    if name not in tool_names:
        available = ", ".join(sorted(tool_names)) or "none"
        return f"Error: unknown tool {name!r}. Available tools: {available}."
    try:
        args = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError as e:
        return f"Error: the arguments of {name} are not valid JSON ({e.msg} at column {e.colno}): {arguments[:200]}"
    if not isinstance(args, dict):
        return f"Error: the arguments of {name} must be a JSON object, got {type(args).__name__}."
    try:
        result = await env.run_tool(rollout_id, name, **args)
    except RolloutFailure:
        raise
    except Exception as e:
        raise ToolError(f"run_tool({name!r}) raised {type(e).__name__}: {e}") from e
    return tool_result_text(name, result)
