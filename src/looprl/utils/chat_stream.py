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
plain call's would. The keep-alive comments defeat a client's read timeout, so the server caps a stream
itself: an answer not ready `MAX_ANSWER_S` after the request ends its stream with an SSE error event, code
`timeout`, and is cancelled (freeing the engine for other requests).

Each server holds its answers in progress in an `Answers` (`start` an answer, `stream_answer` it): one
whose client went away runs to its end there, its failure is logged (no exception goes unretrieved), and
the server cancels what is left when it stops (the gateway also when a rollout's session closes).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError
from starlette.responses import JSONResponse, Response, StreamingResponse

from looprl.utils.logger import get_logger

KEEPALIVE_GRACE_S = 20.0
"""How long an answer may take before the stream is committed (and its errors become SSE error events)."""
KEEPALIVE_INTERVAL_S = 5.0
"""Between the comments that keep a committed stream's connection alive while the answer is produced."""
MAX_ANSWER_S = 3600.0
"""The longest a streamed answer may take (the gateway's timeout toward its upstream too): past it, the
stream ends with an SSE error event `timeout` and the answer is cancelled, so no wedged engine holds a
stream, whose keep-alive comments defeat the client's read timeout, open forever."""
KEEPALIVE = b": keep-alive\n\n"
DONE = b"data: [DONE]\n\n"
MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""No cache or proxy may hold the events back."""
HEAD_FIELDS = ("id", "created", "model", "system_fingerprint")
"""Top-level fields every chunk repeats; the others (but `choices`, `usage` and `object`) go on the first."""


class StreamRequestError(ValueError):
    """A request's `stream` or `stream_options` that is not what the API allows."""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: StrictBool | None = None
    """A boolean (null: false); no string or number stands for one."""


class StreamFields(BaseModel):
    """A chat request's streaming fields, as both looprl servers accept them: the gateway validates a
    request with this model, and the engine's request model (`looprl.inference.protocol`) extends it."""

    model_config = ConfigDict(extra="ignore")

    stream: StrictBool | None = None
    """The finished answer as server-sent events (null: false)."""
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


def stream_request(body: dict[str, Any]) -> tuple[bool, bool]:
    """(whether `body` asks for a stream, whether it asks for the usage chunk), by `StreamFields`' rule;
    raises `StreamRequestError` for values of the wrong type."""
    try:
        fields = StreamFields.model_validate(body)
    except ValidationError as e:
        raise StreamRequestError("; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}, got {err['input']!r}"
                                           for err in e.errors())) from e
    return bool(fields.stream), fields.include_usage


class JSONAnswer(JSONResponse):
    """A JSON response that keeps its parsed body (`data`), so a stream re-emits an answer without parsing
    it again; `body`, when given, is sent as it is (the upstream's bytes, forwarded as received)."""

    def __init__(self, data: Any, status_code: int = 200, body: bytes | None = None) -> None:
        self.data = data
        self._raw = body
        super().__init__(data, status_code=status_code)

    def render(self, content: Any) -> bytes:
        return self._raw if self._raw is not None else super().render(content)


class Answers:
    """A server's answers in progress, as tasks: one whose client went away runs to its end here (its
    failure logged, never left unretrieved), and `cancel` ends those left when the server stops."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[JSONAnswer]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, answer: Coroutine[Any, Any, JSONAnswer]) -> asyncio.Task[JSONAnswer]:
        task = asyncio.ensure_future(answer)
        self._tasks.add(task)
        task.add_done_callback(self._settled)
        return task

    def _settled(self, task: asyncio.Task[JSONAnswer]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (e := task.exception()) is not None:
            get_logger().opt(exception=e).warning("an answer failed: {}: {}", type(e).__name__, e)

    def cancel_nowait(self) -> None:
        """Cancel every answer in progress (they end at their next step)."""
        for task in self._tasks:
            task.cancel()

    async def cancel(self) -> None:
        """Cancel every answer in progress and wait until they have ended."""
        tasks = list(self._tasks)
        self.cancel_nowait()
        await asyncio.gather(*tasks, return_exceptions=True)


def check_streamable(completion: Any) -> None:
    """Raises `ValueError` when `completion` (an answer's JSON) is no chat completion with choices to stream."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise ValueError("the answer has no choices to stream")


def completion_chunks(completion: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects that stream `completion` (a chat completion's JSON)."""
    check_streamable(completion)
    choices = completion["choices"]
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


async def stream_answer(task: asyncio.Task[JSONAnswer], include_usage: bool) -> Response:
    """Serve `task`'s answer (a plain chat-completion response, still being produced; the caller's
    `Answers` holds the task) to a client that asked for a stream, as the module docstring says."""
    deadline = asyncio.get_running_loop().time() + MAX_ANSWER_S
    await asyncio.wait({task}, timeout=min(KEEPALIVE_GRACE_S, MAX_ANSWER_S))
    if not task.done():
        return StreamingResponse(_committed(task, include_usage, deadline), media_type=MEDIA_TYPE, headers=HEADERS)
    answer = settled(task)
    if answer.status_code != 200:
        return answer
    status, data, stream = _render(answer, include_usage)
    if stream is None:
        return JSONResponse(data, status_code=status)
    return Response(stream, media_type=MEDIA_TYPE, headers=HEADERS)


def settled(task: asyncio.Task[JSONAnswer]) -> JSONAnswer:
    """A finished answer task's response; one cancelled (its session closed, its server stopping) is a 503."""
    if task.cancelled():
        return JSONAnswer(error_body("the answer was cancelled: its session closed or the server is stopping",
                                     "cancelled"), status_code=503)
    return task.result()


def _render(answer: JSONAnswer, include_usage: bool) -> tuple[int, Any, bytes | None]:
    """A finished answer as (status, its JSON, its event stream when it is a streamable 200); a 200 whose
    body cannot be streamed becomes a 502."""
    if answer.status_code != 200:
        return answer.status_code, answer.data, None
    try:
        return 200, answer.data, stream_body(answer.data, include_usage)
    except ValueError as e:
        return 502, error_body(f"the answer cannot be streamed: {e}", "bad_upstream_response"), None


async def _committed(task: asyncio.Task[JSONAnswer], include_usage: bool, deadline: float) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    while not task.done():
        if loop.time() >= deadline:
            task.cancel()
            yield event(error_body(f"no answer within {MAX_ANSWER_S:g} s; it was cancelled", "timeout"))
            return
        yield KEEPALIVE
        await asyncio.wait({task}, timeout=min(KEEPALIVE_INTERVAL_S, max(deadline - loop.time(), 0.0)))
    try:
        status, data, stream = _render(settled(task), include_usage)
    except Exception as e:  # the stream has started: the failure can only be told as an event
        yield event(error_body(f"the answer failed: {type(e).__name__}: {e}", "internal_error"))
        return
    if stream is not None:
        yield stream
    elif isinstance(data, dict) and isinstance(data.get("error"), dict):
        yield event(data)
    else:
        yield event(error_body(f"HTTP {status}: {str(data)[:2000]}", "upstream_error"))
