"""The engine's HTTP surface: an OpenAI-compatible FastAPI app with vLLM's token extensions.

Endpoints: `POST /v1/chat/completions` (plain, or with `stream: true` the finished answer as server-sent
events, `looprl.utils.chat_stream`), `GET /v1/models`, `GET /health`, and
`POST /update_weights {"path": DIR, "version": N?, "in_flight": bool?}` (409 `weights_superseded` when DIR names a
shared-memory region that the trainer has changed since). Every error body has OpenAI's shape
`{"error": {"message", "type", "param", "code"}}`; anything wrong with the request is a 4xx.

The event loop only routes: rendering and tokenizing a prompt, and detokenizing an answer's logprobs,
run in worker threads (`asyncio.to_thread`), so a prompt of a million tokens holds up no other request
nor `/health`. They run no torch op there, so no thread but the engine's gets an OpenMP team
(`engine.single_threaded_caller`); the Rust tokenizer lets go of the GIL while it encodes.

Started with the run secret (`looprl rl`, a SLURM node, or `$LOOPRL_RUN_SECRET` for `looprl inference`),
every route but `/health` answers 401 without `Authorization: Bearer <secret>`; `/update_weights`
answers 403 for a directory (or a shared-memory region) outside the engine's weights directories
(`looprl.handoff.engine_access`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from looprl.handoff.engine_access import authorised
from looprl.handoff.shared_weights import Superseded
from looprl.inference import protocol as p
from looprl.inference.chat import ChatFormatError, parse_tool_calls, render_prompt
from looprl.inference.engine import Completion, Engine
from looprl.inference.kv_budget import KVBudgetExceeded
from looprl.inference.token_sampling import SamplingParams
from looprl.inference.weight_update import OutsideRun, WeightsError, load_update
from looprl.utils.chat_stream import Answers, JSONAnswer, stream_answer

OPEN_PATHS = frozenset({"/health"})
"""What answers without the run secret: the launcher's and the SLURM job's readiness checks."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str, type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.type = status, message, code, type


def create_app(engine: Engine, served_model_name: str, *, secret: str | None = None,
               weights_dirs: Sequence[Path] = ()) -> FastAPI:
    """The app serving `engine` under `served_model_name`; it starts and stops the engine thread. With
    `secret`, every route but `/health` requires it (`Authorization: Bearer`, else 401); `/update_weights`
    loads only directories inside `weights_dirs` (else 403; none given: every update is refused)."""

    answers = Answers()
    """Streamed answers in progress: cancelled when the app stops, before the engine does."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine.start()
        yield
        await answers.cancel()
        engine.stop()

    app = FastAPI(title="looprl inference", lifespan=lifespan)
    _install_error_handlers(app)
    _require_secret(app, secret)

    @app.get("/health", response_model=p.HealthResponse)
    async def health() -> p.HealthResponse:
        return p.HealthResponse(model=served_model_name, weights=_weights(engine, served_model_name))

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": served_model_name, "object": "model", "created": 0, "owned_by": "looprl",
                "max_model_len": engine.max_context}
        return {"object": "list", "data": [card]}

    @app.post("/update_weights", response_model=p.WeightsInfo)
    async def update_weights(body: p.UpdateWeightsRequest) -> p.WeightsInfo:
        try:
            update = await asyncio.to_thread(load_update, body.path, engine.model, body.version,
                                           list(weights_dirs), body.in_flight)
        except OutsideRun as e:
            raise ApiError(403, str(e), "path_outside_run", "permission_error") from e
        except WeightsError as e:
            raise ApiError(400, str(e), "invalid_weights") from e
        try:
            await engine.update_weights(update)
        except Superseded as e:  # the model kept its weights; the orchestrator loads the newer ones
            raise ApiError(409, str(e), "weights_superseded") from e
        return _weights(engine, served_model_name)

    @app.post("/v1/chat/completions", response_model=p.ChatCompletionResponse)
    async def chat_completions(body: p.ChatCompletionRequest) -> p.ChatCompletionResponse | Response:
        if body.stream:
            return await stream_answer(answers.start(_plain(complete(body))), body.include_usage)
        return await complete(body)

    async def complete(body: p.ChatCompletionRequest) -> p.ChatCompletionResponse:
        if body.model != served_model_name:
            raise ApiError(404, f"The model `{body.model}` does not exist; this server serves `{served_model_name}`.",
                           "model_not_found")
        try:  # off the event loop, as the answer's detokenization below: a long prompt stalls no other request
            prompt_ids = await asyncio.to_thread(render_prompt, engine.tokenizer, body.messages, body.tools)
        except ChatFormatError as e:
            raise ApiError(400, str(e), "invalid_messages") from e
        params = _sampling_params(body, len(prompt_ids), engine.max_context)
        try:
            completions = await engine.generate(prompt_ids, params, body.n)
        except KVBudgetExceeded as e:
            raise ApiError(400, str(e), "kv_budget_exceeded") from e
        parse_tools = bool(body.tools) and body.tool_choice != "none"
        choices = await asyncio.to_thread(_choices, completions, body, engine.tokenizer, parse_tools)
        completion_tokens = sum(len(c.token_ids) for c in completions)
        return p.ChatCompletionResponse(
            id=f"chatcmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            model=served_model_name,
            choices=choices,
            usage=p.Usage(prompt_tokens=len(prompt_ids), completion_tokens=completion_tokens,
                          total_tokens=len(prompt_ids) + completion_tokens),
            prompt_token_ids=prompt_ids if body.return_token_ids else None,
        )

    return app


async def _plain(answer: Awaitable[p.ChatCompletionResponse]) -> JSONAnswer:
    """The response a plain call gets: the answer as JSON, or its error."""
    try:
        return JSONAnswer((await answer).model_dump(mode="json"))
    except ApiError as e:
        return _error_response(e.status, e.message, e.code, e.type)


def _error_response(status: int, message: str, code: str | None, type: str) -> JSONAnswer:
    error = p.ErrorResponse(error=p.ErrorDetail(message=message, type=type, code=code))
    return JSONAnswer(error.model_dump(), status_code=status)


def _weights(engine: Engine, served_model_name: str) -> p.WeightsInfo:
    return p.WeightsInfo(version=engine.weights_version, path=engine.weights_path, model=served_model_name)


def _sampling_params(body: p.ChatCompletionRequest, prompt_tokens: int, max_context: int) -> SamplingParams:
    room = max_context - prompt_tokens
    max_tokens = body.max_new_tokens or room
    if room < 1 or max_tokens > room:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_context} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion).",
            "context_length_exceeded",
        )
    return SamplingParams(
        temperature=body.temperature,
        top_p=body.top_p,
        max_tokens=max_tokens,
        stop=tuple(body.stop_list),
        seed=body.seed,
        top_logprobs=body.top_logprobs or 0,
    )


def _choices(completions: list[Completion], body: p.ChatCompletionRequest, tokenizer: Any,
             parse_tools: bool) -> list[p.Choice]:
    return [_choice(i, c, body, tokenizer, parse_tools) for i, c in enumerate(completions)]


def _choice(index: int, c: Completion, body: p.ChatCompletionRequest, tokenizer: Any, parse_tools: bool) -> p.Choice:
    content, calls = parse_tool_calls(c.text) if parse_tools else (c.text, [])
    finish = "tool_calls" if calls else c.finish_reason
    logprobs = None
    if body.logprobs:
        entries = [
            p.TokenLogprob(**_token(tokenizer, t, lp),
                           top_logprobs=[p.TopLogprob(**_token(tokenizer, i, v)) for i, v in top])
            for t, lp, top in zip(c.token_ids, c.logprobs, c.top_logprobs)
        ]
        logprobs = p.ChoiceLogprobs(content=entries)
    return p.Choice(
        index=index,
        message=p.AssistantMessage(content=content, tool_calls=calls),
        finish_reason=finish,  # type: ignore[arg-type]
        logprobs=logprobs,
        token_ids=c.token_ids if body.return_token_ids else None,
        weight_versions=_spans(c.versions) if body.return_token_ids else None,
    )


def _spans(versions: list[int]) -> list[p.WeightVersionSpan]:
    """Per-token versions as runs of one version each (vLLM's `weight_versions`)."""
    spans: list[p.WeightVersionSpan] = []
    for i, version in enumerate(versions):
        if spans and spans[-1].version == str(version):
            spans[-1].end = i + 1
        else:
            spans.append(p.WeightVersionSpan(version=str(version), start=i, end=i + 1))
    return spans


def _token(tokenizer: Any, token_id: int, logprob: float) -> dict[str, Any]:
    text = tokenizer.decode([token_id])
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def _require_secret(app: FastAPI, secret: str | None) -> None:
    if not secret:
        return

    @app.middleware("http")
    async def check_secret(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if request.url.path in OPEN_PATHS or authorised(request.headers.get("authorization"), secret):
            return await call_next(request)
        error = p.ErrorResponse(error=p.ErrorDetail(message="this engine requires the run secret as "
                                                    "`Authorization: Bearer`", type="authentication_error",
                                                    code="invalid_api_key"))
        return JSONResponse(error.model_dump(), status_code=401, headers={"WWW-Authenticate": "Bearer"})


def _install_error_handlers(app: FastAPI) -> None:
    body = _error_response

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError) -> JSONResponse:
        return body(e.status, e.message, e.code, e.type)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, e: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'][1:]) or 'body'}: {err['msg']}"
                             for err in e.errors())
        return body(400, problems, "invalid_request", "invalid_request_error")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return body(e.status_code, str(e.detail), None, "invalid_request_error")
