"""Chat completions served as server-sent events: a finished answer re-emitted in OpenAI's stream shape.

Both looprl servers a client can call, the gateway and the embedded engine, answer `stream: true` this way:
they produce the whole answer first, as for a plain call, then send it as OpenAI's chunks. The gateway needs
the whole answer before it can decide anything (its token ids and logprobs, the context budget, which may
discard an answer and ask again; see `looprl.gateway.app`), and the embedded engine generates a batch's
tokens together; so the stream carries exactly the answer a plain call would have returned, with no second
tokenization or reassembly anywhere.

The chunks, per choice: the role (and an empty content when the answer has text); the message's text fields
(`content`, a reasoning field) in one delta, carrying the choice's `logprobs` and vLLM's `token_ids`; each
tool call in its own delta, in OpenAI's shape (`index`, `id`, `type`, `function.name`, `function.arguments`);
then the `finish_reason` (with any other field of the choice, e.g. vLLM's `stop_reason`). The first chunk
also carries the answer's top-level extensions (vLLM's `prompt_token_ids`). With
`stream_options.include_usage`, a last chunk with no choices carries `usage`. `data: [DONE]` ends the stream.
The openai SDK's accumulators (`ChatCompletionStreamState`, `client.chat.completions.stream`) rebuild from
them the same message, finish reason, logprobs and usage as the plain answer.

Errors: while the answer is being produced, nothing is sent for `KEEPALIVE_GRACE_S`, so an answer (or an
error) ready by then keeps its HTTP status: an error is a plain JSON error response, which the openai SDK
raises as its `APIStatusError` with the status and code, as for a plain call. A longer answer commits the
stream (200, `text/event-stream`) and sends an SSE comment every `KEEPALIVE_INTERVAL_S`, so no client's or
proxy's idle timeout cuts a long generation; an error after that is one SSE event `data: {"error": {...}}`
(the SDK raises it as `APIError`), and the stream ends without `[DONE]`, so no client takes it for an
answer. A client that goes away does not cancel the answer: it completes (the gateway records it) as a
plain call's would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

KEEPALIVE_GRACE_S = 20.0
"""How long an answer may take before the stream is committed (and its errors become SSE error events)."""
KEEPALIVE_INTERVAL_S = 5.0
"""Between the comments that keep a committed stream's connection alive while the answer is produced."""
KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""No cache or proxy may hold the events back."""
HEAD_FIELDS = ("id", "created", "model", "system_fingerprint")
"""Top-level fields every chunk repeats; the others (but `choices`, `usage` and `object`) go on the first."""

_answers: set[asyncio.Task[Response]] = set()
"""Answers in progress: held here so that one whose client went away still runs to its end."""


class StreamRequestError(ValueError):
    """A request's `stream` or `stream_options` that is not what the API allows."""


def stream_request(body: dict[str, Any]) -> tuple[bool, bool]:
    """(whether `body` asks for a stream, whether it asks for the usage chunk) from `stream` and
    `stream_options.include_usage`; raises `StreamRequestError` for values of the wrong type."""
    stream, options = body.get("stream"), body.get("stream_options")
    if stream is not None and not isinstance(stream, bool):
        raise StreamRequestError(f"'stream' must be a boolean, got {stream!r}")
    if options is not None and not isinstance(options, dict):
        raise StreamRequestError(f"'stream_options' must be an object, got {options!r}")
    include_usage = (options or {}).get("include_usage")
    if include_usage is not None and not isinstance(include_usage, bool):
        raise StreamRequestError(f"'stream_options.include_usage' must be a boolean, got {include_usage!r}")
    return bool(stream), bool(include_usage)


def completion_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects that stream `completion` (a chat completion's JSON)."""
    choices = completion.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise ValueError("the answer has no choices to stream")
    head = {k: completion[k] for k in HEAD_FIELDS if k in completion}
    head["object"] = "chat.completion.chunk"
    chunks = [chunk for choice in choices for chunk in _choice_chunks(head, choice)]
    skipped = {*HEAD_FIELDS, "object", "choices", "usage"}
    chunks[0].update({k: v for k, v in completion.items() if k not in skipped})
    if include_usage and completion.get("usage") is not None:
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


def _choice_chunks(head: dict[str, Any], choice: dict[str, Any]) -> list[dict[str, Any]]:
    index = choice.get("index", 0)
    message = choice.get("message") or {}

    def chunk(delta: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {**head, "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": None,
                                     **fields}]}

    content = message.get("content")
    first = chunk({"role": message.get("role") or "assistant", "content": "" if isinstance(content, str) else None})
    text = {k: v for k, v in message.items() if k not in ("role", "tool_calls") and v not in (None, "", [])}
    tokens = {k: choice[k] for k in ("logprobs", "token_ids") if choice.get(k) is not None}
    middle = [chunk(text, **tokens)] if text or tokens else []
    calls = [chunk({"tool_calls": [{"index": i, **call}]}) for i, call in enumerate(message.get("tool_calls") or [])]
    rest = {k: v for k, v in choice.items() if k not in ("index", "message", "logprobs", "token_ids", "finish_reason")}
    last = chunk({}, finish_reason=choice.get("finish_reason"), **rest)
    return [first, *middle, *calls, last]


def event(data: dict[str, Any]) -> bytes:
    """One SSE event carrying `data` as JSON."""
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def stream_body(completion: dict[str, Any], include_usage: bool) -> bytes:
    """The whole event stream of `completion`, `[DONE]` included."""
    return b"".join(event(c) for c in completion_chunks(completion, include_usage)) + DONE


def error_body(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "api_error", "code": code}}


async def stream_answer(answer: Awaitable[Response], include_usage: bool) -> Response:
    """Serve `answer` (a plain chat-completion response, JSON, still being produced) to a client that asked
    for a stream, as the module docstring says."""
    task = asyncio.ensure_future(answer)
    _answers.add(task)
    task.add_done_callback(_answers.discard)
    await asyncio.wait({task}, timeout=KEEPALIVE_GRACE_S)
    if task.done():
        response = task.result()
        if response.status_code != 200:
            return response
        status, data, stream = _render(response, include_usage)
        if stream is None:
            return JSONResponse(data, status_code=status)
        return Response(stream, media_type=MEDIA_TYPE, headers=HEADERS)
    return StreamingResponse(_committed(task, include_usage), media_type=MEDIA_TYPE, headers=HEADERS)


def _render(response: Response, include_usage: bool) -> tuple[int, Any, bytes | None]:
    """A finished answer as (status, its JSON, its event stream when it is a streamable 200); a 200 whose
    body cannot be streamed becomes a 502."""
    try:
        data = json.loads(bytes(response.body))
    except ValueError:
        return 502, error_body("the answer is not JSON", "bad_upstream_response"), None
    if response.status_code != 200:
        return response.status_code, data, None
    try:
        return 200, data, stream_body(data, include_usage)
    except ValueError as e:
        return 502, error_body(f"the answer cannot be streamed: {e}", "bad_upstream_response"), None


async def _committed(task: asyncio.Task[Response], include_usage: bool) -> AsyncIterator[bytes]:
    while not task.done():
        yield KEEPALIVE
        await asyncio.wait({task}, timeout=KEEPALIVE_INTERVAL_S)
    try:
        status, data, stream = _render(task.result(), include_usage)
    except Exception as e:  # the stream has started: the failure can only be told as an event
        yield event(error_body(f"the answer failed: {type(e).__name__}: {e}", "internal_error"))
        return
    if stream is not None:
        yield stream
    elif isinstance(data, dict) and isinstance(data.get("error"), dict):
        yield event(data)
    else:
        yield event(error_body(f"HTTP {status}: {str(data)[:2000]}", "upstream_error"))
