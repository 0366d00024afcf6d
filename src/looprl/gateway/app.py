"""The gateway: per-rollout OpenAI-compatible base URLs in front of any upstream engine.

Env code talks to `http://HOST:PORT/sessions/{rollout_id}/v1` with a plain OpenAI client. The
gateway applies the run's sampling parameters, asks the upstream (vLLM or the embedded engine) for
token ids and logprobs, enforces the rollout's context budget, forwards the answer, and records the
call under its rollout. The orchestrator opens a session before a rollout starts and collects its
calls when it ends; requests for unknown sessions get 404, so stray traffic is never misattributed.

Context budget: no call of a rollout may hold more than `context_budget` tokens (its prompt + its
completion), the first call included. The gateway does not tokenize, so it caps each call's
`max_tokens` to the room its lower bound on the prompt leaves (the previous call's context, which a
multi-turn prompt extends; nothing on the first call). An answer that still does not fit, now that the
upstream has counted the prompt, is asked for again with `max_tokens` set to exactly the room left (the
first answer is discarded, unrecorded). A call whose prompt alone reaches the budget, or whose context
already did, is refused with HTTP 400, code `context_budget_exceeded` (the env loop ends the rollout as
`context_exceeded`), and so is an answer over the budget from an upstream that ignores `max_tokens`.

Streaming (`stream: true`, `stream_options.include_usage`): the gateway asks the upstream for the whole
answer, as for a plain call, and re-emits it as OpenAI's server-sent events
(`looprl.utils.chat_stream`). Relaying vLLM's own token stream would not do: the gateway needs the whole
answer before the env sees any of it, since the context budget may discard an answer and ask again and
a dropped connection is retried, and the embedded engine has no token stream to relay (it answers a
stream request the same way). So a streamed call is a
plain call in every other respect: the same upstream request, sampling, retries, budget and error codes
(returned as JSON errors with their HTTP status, unless the answer took long enough that the stream was
committed to keep the connection alive: then as one SSE error event), and the same `ModelCall` record,
token ids and logprobs as received, never re-tokenized. A 200 answer that cannot be streamed (no choices)
is recorded as the 502 `bad_upstream_response` the client gets. The client's headers (a verifiers harness's
`X-Session-ID`) are ignored: the session is the URL's rollout id.

A session that closes (its rollout ended) cancels its calls still in flight: the engine stops working
for a rollout that is over, and nothing is recorded into calls already handed to the orchestrator. When
`serve()` exits, the answers still in progress are cancelled before the upstream client closes.

Several upstreams (one per inference node or GPU, each serving the whole model): each rollout is
given one when its session opens, in turn, so the requests spread evenly over them while a
multi-turn rollout stays on one engine (whose prefix cache holds its earlier turns).

Connection failures: the gateway keeps idle client connections open for `SERVER_KEEPALIVE_S`,
longer than env clients pool them. Toward the upstream (`looprl.gateway.upstream`), pooled
connections are dropped after `KEEPALIVE_S`, below the 5 s after which uvicorn (the embedded engine,
vLLM) closes idle ones, so a request is not sent down a socket the server is closing. A request that
still fails to connect or loses its connection before an answer is sent again, up to `ATTEMPTS`
times, then recorded as a 502 (the rollout's `model_error`).
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI, Request

from looprl.config import SamplingParams
from looprl.gateway.recording import record_call
from looprl.gateway.sampling_params import apply_sampling
from looprl.gateway.upstream import UpstreamClient, UpstreamResponse
from looprl.store.records import ModelCall
from looprl.utils.chat_stream import (
    MAX_ANSWER_S,
    Answers,
    JSONAnswer,
    StreamRequestError,
    check_streamable,
    settled,
    stream_answer,
    stream_request,
)
from looprl.utils.logger import get_logger

KEEPALIVE_S = 2.0
SERVER_KEEPALIVE_S = 30
ATTEMPTS = 3
RETRY_DELAY_S = 0.5
RETRIED = (httpx.ConnectError, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)
"""Transport failures that happen before the upstream answered; timeouts are not retried."""


def error_response(status: int, message: str, code: str, type_: str = "invalid_request_error") -> JSONAnswer:
    return JSONAnswer({"error": {"message": message, "type": type_, "code": code}}, status_code=status)


@dataclass
class Answer:
    """An upstream's answer to one call: as received, its JSON (or an error body), and its record."""

    response: UpstreamResponse
    data: Any
    parsed: bool
    """`data` is the upstream's own JSON (forwarded as received)."""
    call: ModelCall

    def over(self, budget: int) -> bool:
        """An answer that does not fit `budget`: its prompt reaches it, or its prompt and completion pass it."""
        prompt, completion = self.call.prompt_tokens, self.call.completion_tokens
        return self.call.status == 200 and (prompt >= budget or prompt + completion > budget)

    def room_left(self, budget: int) -> int | None:
        """For an answer over `budget` whose prompt is under it: the completion tokens that fit."""
        return budget - self.call.prompt_tokens if self.over(budget) and self.call.prompt_tokens < budget else None


@dataclass
class Session:
    """One rollout's model traffic."""

    rollout_id: str
    upstream: str
    """The engine's base URL this rollout's calls go to."""
    context_budget: int | None = None
    sampling: SamplingParams | None = None
    """This rollout's sampling, when the orchestrator set one for it (collapse recovery); else the gateway's."""
    seed_key: str | None = None
    """What the seeds of its calls derive from, with the run's `sampling.seed` (None: its rollout id)."""
    calls: list[ModelCall] = field(default_factory=list)
    context_tokens: int = 0
    """Prompt + completion tokens of the latest successful call."""
    answers: Answers = field(default_factory=Answers)
    """Its calls in flight, cancelled when it closes."""
    closed: bool = False

    def record(self, call: ModelCall) -> None:
        """Record `call`, unless the session has closed (its calls are the orchestrator's now)."""
        if self.closed:
            get_logger().debug("rollout {}: call {} answered after its session closed; not recorded",
                               self.rollout_id, call.idx)
            return
        self.calls.append(call)


class Gateway:
    """Sessions, recording and forwarding; `serve()` runs it on a local port."""

    def __init__(self, upstream_base_url: str | Sequence[str], model: str, sampling: SamplingParams | None = None,
                 context_budget: int | None = None, api_key: str | None = None) -> None:
        urls = [upstream_base_url] if isinstance(upstream_base_url, str) else list(upstream_base_url)
        if not urls:
            raise ValueError("the gateway needs at least one upstream base URL")
        self.upstreams = [url.rstrip("/") for url in urls]
        self._next_upstream = itertools.cycle(self.upstreams)
        self.model = model
        self.sampling = sampling or SamplingParams()
        self.context_budget = context_budget
        self._sessions: dict[str, Session] = {}
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = UpstreamClient(headers, timeout_s=MAX_ANSWER_S, connect_timeout_s=30, keepalive_s=KEEPALIVE_S,
                                      max_connections=1024)
        self.app = self._build_app()

    def serve_model(self, model: str) -> None:
        """Name `model` in the calls forwarded from now on (the engine's name for its newest weights)."""
        self.model = model

    # sessions --------------------------------------------------------------------------------

    def open_session(self, rollout_id: str, context_budget: int | None = None,
                     sampling: SamplingParams | None = None, seed_key: str | None = None) -> None:
        """`sampling`: this rollout's, instead of the gateway's (set when its group starts, so a change
        reaches only groups started after it); `seed_key`: what its calls' seeds derive from, the same in
        every run of a config for the same rollout (None: its id, which is new each run)."""
        self._sessions[rollout_id] = Session(rollout_id, next(self._next_upstream),
                                             context_budget or self.context_budget, sampling, seed_key)

    def close_session(self, rollout_id: str) -> list[ModelCall]:
        """End a rollout's session and return (a copy of) its recorded calls (empty if it never called);
        its calls still in flight are cancelled, unrecorded."""
        session = self._sessions.pop(rollout_id, None)
        if session is None:
            return []
        session.closed = True
        session.answers.cancel_nowait()
        return list(session.calls)

    # HTTP ------------------------------------------------------------------------------------

    def _build_app(self) -> FastAPI:
        app = FastAPI(title="looprl gateway")

        @app.post("/sessions/{rollout_id}/v1/chat/completions")
        async def chat(rollout_id: str, request: Request):
            session = self._sessions.get(rollout_id)
            if session is None:
                return error_response(404, f"no open session for rollout {rollout_id!r}", "unknown_session")
            try:
                body = await request.json()
            except ValueError:
                return error_response(400, "request body is not valid JSON", "invalid_json")
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return error_response(400, "request must be a JSON object with a 'messages' list", "invalid_request")
            try:
                stream, include_usage = stream_request(body)
            except StreamRequestError as e:
                return error_response(400, str(e), "invalid_request")
            if (body.get("n") or 1) != 1:
                return error_response(400, "n > 1 is not supported: run sibling rollouts instead", "n_unsupported")
            task = session.answers.start(self._forward(session, body, stream))
            if stream:
                return await stream_answer(task, include_usage)
            await asyncio.wait({task})  # as a stream's: a client that goes away does not cancel its call
            return settled(task)

        @app.get("/sessions/{rollout_id}/v1/models")
        async def models(rollout_id: str):
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "looprl"}]}

        @app.get("/health")
        async def health():
            return {"status": "ok", "sessions": len(self._sessions)}

        return app

    async def _forward(self, session: Session, body: dict[str, Any], stream: bool) -> JSONAnswer:
        idx = len(session.calls)
        budget = session.context_budget
        if budget is not None and session.context_tokens >= budget:
            session.record(record_call(session.rollout_id, idx, time.time(), 0.0, 400, None,
                                       error="context_budget_exceeded"))
            return error_response(400, f"rollout context reached its budget of {budget} tokens "
                                       f"({session.context_tokens} used)", "context_budget_exceeded")
        payload = apply_sampling(body, session.sampling or self.sampling, session.seed_key or session.rollout_id, idx)
        payload["model"] = self.model
        if budget is not None:  # the prompt holds at least the previous context
            room = budget - session.context_tokens
            payload["max_tokens"] = min(payload.get("max_tokens") or room, room)
        answer = await self._ask(session, payload, idx)
        if budget is not None and isinstance(answer, Answer) and (fits := answer.room_left(budget)):
            get_logger().debug("rollout {}: call {} answered {} + {} tokens, over its context budget of {}; asking "
                               "again with max_tokens {}", session.rollout_id, idx, answer.call.prompt_tokens,
                               answer.call.completion_tokens, budget, fits)
            answer = await self._ask(session, {**payload, "max_tokens": fits}, idx)
        if not isinstance(answer, Answer):
            return answer
        call = answer.call
        if budget is not None and answer.over(budget):
            session.record(call.model_copy(update={"status": 400, "error": "context_budget_exceeded"}))
            what = (f"prompt of {call.prompt_tokens} tokens" if call.prompt_tokens >= budget else
                    f"prompt and completion of {call.prompt_tokens} + {call.completion_tokens} tokens")
            return error_response(400, f"{what} exceeds the rollout's context budget of {budget}",
                                  "context_budget_exceeded")
        if stream and call.status == 200:
            try:
                check_streamable(answer.data)
            except ValueError as e:  # recorded as what the client gets
                message = f"the answer cannot be streamed: {e}"
                session.record(call.model_copy(update={"status": 502, "error": message}))
                return error_response(502, message, "bad_upstream_response", "api_error")
        session.record(call)
        if call.status == 200:
            session.context_tokens = call.prompt_tokens + call.completion_tokens
        # the upstream's JSON is forwarded as received
        return JSONAnswer(answer.data, call.status, answer.response.content if answer.parsed else None)

    async def _ask(self, session: Session, payload: dict[str, Any], idx: int) -> Answer | JSONAnswer:
        """One upstream call: its answer, or (recorded) the 502 the env gets when the upstream is unreachable."""
        started = time.time()
        try:
            response = await self._post(session, payload)
        except httpx.HTTPError as e:
            latency = time.time() - started
            message = f"upstream {session.upstream} unreachable: {type(e).__name__}: {e}"
            session.record(record_call(session.rollout_id, idx, started, latency, 502, None, error=message))
            return error_response(502, message, "upstream_unreachable", "api_error")
        latency = time.time() - started
        try:
            data = parsed = response.json()
        except ValueError:
            parsed = None
            data = {"error": {"message": response.text[:2000], "type": "api_error", "code": "bad_upstream_response"}}
        error = None if response.status_code == 200 else str((data.get("error") or {}).get("message") or data)[:2000]
        call = record_call(session.rollout_id, idx, started, latency, response.status_code, data, error=error)
        return Answer(response, data, data is parsed, call)

    async def _post(self, session: Session, payload: dict[str, Any]) -> UpstreamResponse:
        url, rollout_id = f"{session.upstream}/chat/completions", session.rollout_id
        for attempt in range(1, ATTEMPTS):
            try:
                return await self._client.post(url, json=payload)
            except RETRIED as e:
                get_logger().warning("rollout {}: upstream call failed ({}: {}), attempt {} of {}; retrying",
                                     rollout_id, type(e).__name__, e, attempt, ATTEMPTS)
                await asyncio.sleep(RETRY_DELAY_S * attempt)
        return await self._client.post(url, json=payload)  # the last attempt's failure is the call's error

    # serving ---------------------------------------------------------------------------------

    @asynccontextmanager
    async def serve(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve on `host:port` (0: a free port) in this event loop; yields the per-rollout URL template."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # env clients pool connections for httpx's default 5 s: keep ours open longer than that
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off",
                                timeout_keep_alive=SERVER_KEEPALIVE_S)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        bound = sock.getsockname()[1]
        try:
            yield f"http://{host}:{bound}/sessions/{{rollout_id}}/v1"
        finally:
            await asyncio.gather(*(s.answers.cancel() for s in self._sessions.values()))
            server.should_exit = True
            await task
            await self._client.aclose()
            sock.close()
