"""looprl's routes on vLLM's OpenAI server, installed as its HTTP middleware (`--middleware
looprl.inference.vllm.routes.looprl_routes`).

- `POST /update_weights {"path": DIR, "version": N?, "in_flight": bool?}` answers `{"version", "path",
  "model"}` like the embedded engine, so `orchestrator.weight_sync.WeightSync` drives both engines alike:
  - a full-weights directory (a trainer broadcast or checkpoint): generation is paused once the
    requests in flight finish (new ones wait), every worker copies the tensors into its model
    (`worker.WeightLoader` through `collective_rpc`), the prefix cache is dropped, generation
    resumes. No completion mixes two weight versions. Loaded adapters are unloaded. With `in_flight`,
    generation is paused between two scheduler steps instead (`pause_generation(mode="keep")`): the
    running requests are frozen, the weights change under them and they continue on the new ones with
    their KV cache (and the prefix cache) as the old weights computed it. Either way the engine's weight
    version label becomes N (`update_weight_version`), which vLLM stamps on every token it samples. A
    directory may hold some of the model's tensors only, but each fused layer it touches whole (400
    otherwise, before anything is loaded: `worker.fused_parts_missing`).
  - a LoRA adapter directory (`adapter_config.json`, what the trainer broadcasts for vLLM with
    `[trainer.lora]`): loaded as a new adapter `{served name}-step-{N}` without touching the base
    weights; `model` in the answer is that name, which requests for these weights must use. The
    previous adapter stays loaded (requests already sent may still name it); older ones are unloaded.
- `POST /v1/chat/completions`: vLLM's, with each choice's `weight_versions` added (the spans of its
  tokens each weights version sampled, as the embedded engine returns them; vLLM keeps them on its
  outputs but its chat route leaves them out): `_record_versions` wraps the engine client's `generate`
  to keep them by request id until the response is sent. A choice on a LoRA adapter (`{name}-step-N`) is
  version N whole: the adapter, not the engine's label, names its weights.
- `GET /health`: vLLM's health check, answered with the embedded engine's body
  `{"status": "ok", "model", "weights": {"version", "path", "model"}}`.

With an API key (`VLLM_API_KEY`: the run secret, which vLLM itself checks on `/v1` only), every route
but `/health` answers 401 without `Authorization: Bearer <key>`: `/update_weights`, and vLLM's own routes
outside `/v1` too. `/update_weights` loads only a directory that resolves (symlinks followed) inside
`LOOPRL_WEIGHTS_DIRS`, else 403 (the same rules as the embedded engine, `looprl.handoff.engine_access`,
which this module cannot import).

Runs in vLLM's interpreter: imports only the standard library, starlette and vLLM.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

API_KEY_ENV = "VLLM_API_KEY"
"""vLLM's `--api-key` from the environment: the run secret (`launch.VllmProcess` sets it)."""
WEIGHTS_DIRS_ENV = "LOOPRL_WEIGHTS_DIRS"
"""The directories `/update_weights` may load from, `os.pathsep`-separated (none: it loads nothing)."""
OPEN_PATHS = frozenset({"/health"})
"""What answers without the key: the launcher's readiness check."""
ADAPTERS_KEPT = 2
"""The newest adapter and the one before it (requests sent before an update may still name it)."""
VERSIONS_KEPT = 4096
"""Requests whose token versions are kept for their response (the oldest go first: a request that did not
come through the chat route, e.g. `/v1/completions`, leaves its entry behind)."""
INITIAL_LABEL = "default"
"""vLLM's weight version label before any update: the weights it started with, looprl's version 0."""

_lock = asyncio.Lock()


class UpdateError(ValueError):
    """The directory does not hold weights or an adapter this server can load."""


async def looprl_routes(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    if request.url.path not in OPEN_PATHS and not _authorised(request.headers.get("authorization")):
        return _error(401, "this engine requires the run secret as `Authorization: Bearer`", "invalid_api_key",
                      "authentication_error")
    if request.url.path == "/update_weights" and request.method == "POST":
        return await _update_weights(request)
    if request.url.path == "/v1/chat/completions" and request.method == "POST":
        return await _with_versions(request.app.state, await call_next(_recording(request)))
    response = await call_next(request)
    if request.url.path == "/health" and request.method == "GET" and response.status_code == 200:
        weights = _weights(request.app.state)
        return JSONResponse({"status": "ok", "model": _base_name(request.app.state), "weights": weights})
    return response


async def _update_weights(request: Request) -> Response:
    try:
        body = await request.json()
        path, version, in_flight = str(body["path"]), body.get("version"), body.get("in_flight", False)
        if version is not None and not isinstance(version, int):
            raise UpdateError("version must be an integer")
        if not isinstance(in_flight, bool):
            raise UpdateError("in_flight must be a boolean")
    except (ValueError, KeyError, TypeError) as e:
        return _error(400, f"expected a JSON body {{\"path\": DIR, \"version\": N}}: {e}")
    allowed = _inside(path)
    if allowed is None:
        return _error(403, f"{path} is not inside this engine's weights directories ({WEIGHTS_DIRS_ENV}: "
                      f"{os.environ.get(WEIGHTS_DIRS_ENV) or 'none'})", "path_outside_run", "permission_error")
    try:
        async with _lock:
            return JSONResponse(await update(request.app.state, allowed, version, in_flight))
    except UpdateError as e:
        return _error(400, str(e))


def _authorised(authorization: str | None) -> bool:
    """The request carries the server's API key (the run secret) as a bearer token, or no key is set."""
    secret = os.environ.get(API_KEY_ENV)
    if not secret:
        return True
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), secret.encode())


def _inside(path: str) -> Path | None:
    """`path` resolved (symlinks followed) if inside one of the weights directories, else None."""
    resolved = Path(path).expanduser().resolve()
    roots = [Path(root).resolve() for root in os.environ.get(WEIGHTS_DIRS_ENV, "").split(os.pathsep) if root]
    return resolved if any(resolved.is_relative_to(root) for root in roots) else None


async def update(state: Any, path: Path, version: int | None, in_flight: bool = False) -> dict[str, Any]:
    """Load `path` (full weights or a LoRA adapter) and record it as weights `version`; `in_flight`: under
    the running requests (see the module docstring)."""
    if not path.is_dir():
        raise UpdateError(f"weights directory {path} does not exist")
    weights = _weights(state)
    version = weights["version"] + 1 if version is None else version
    if (path / "adapter_config.json").is_file():
        model = await _load_adapter(state, path, version)
    else:
        if not any(path.glob("*.safetensors")):
            raise UpdateError(f"no *.safetensors files in {path}")
        engine = state.engine_client
        # "keep" freezes the running requests, whose KV blocks cannot be dropped: the cache stays
        await engine.pause_generation(mode="keep" if in_flight else "wait", clear_cache=not in_flight)
        try:
            await engine.collective_rpc("looprl_load_weights", args=(str(path),))
            await engine.update_weight_version(str(version))
        except Exception as e:  # a worker's error, e.g. names or shapes that do not fit the model
            raise UpdateError(f"vLLM could not load the weights in {path}: {e}") from e
        finally:
            await engine.resume_generation()
        await _unload_adapters(state, keep=0)
        model = _base_name(state)
    weights.update(version=version, path=str(path), model=model)
    return dict(weights)


async def _load_adapter(state: Any, path: Path, version: int) -> str:
    from vllm.entrypoints.serve.engine.protocol import ErrorResponse
    from vllm.entrypoints.serve.lora.protocol import LoadLoRAAdapterRequest

    if state.vllm_config.lora_config is None:
        raise UpdateError(f"{path} is a LoRA adapter, but this server was started without --enable-lora")
    name = f"{_base_name(state)}-step-{version}"
    result = await state.openai_serving_models.load_lora_adapter(
        LoadLoRAAdapterRequest(lora_name=name, lora_path=str(path), load_inplace=True))
    if isinstance(result, ErrorResponse):
        raise UpdateError(f"vLLM could not load the adapter {path}: {result.error.message}")
    await _unload_adapters(state, keep=ADAPTERS_KEPT)
    return name


async def _unload_adapters(state: Any, keep: int) -> None:
    """Unload all but the `keep` newest adapters, from the served names and from the engine."""
    from vllm.entrypoints.serve.lora.protocol import UnloadLoRAAdapterRequest

    models = state.openai_serving_models
    names = list(models.lora_requests)
    for name in names[: max(0, len(names) - keep)]:
        lora_id = models.lora_requests[name].lora_int_id
        await models.unload_lora_adapter(UnloadLoRAAdapterRequest(lora_name=name))
        await state.engine_client.remove_lora(lora_id)


def _recording(request: Request) -> Request:
    """`request`, once the engine client keeps the token versions of what it generates (`_record_versions`)."""
    _record_versions(request.app.state)
    return request


def _record_versions(state: Any) -> OrderedDict[str, dict[int, list[dict[str, Any]]]]:
    """Request id -> choice index -> its `weight_versions` spans, filled as the engine client's `generate`
    yields final outputs (the wrapper is installed once, on the client the chat route shares)."""
    if hasattr(state, "looprl_versions"):
        return state.looprl_versions  # type: ignore[no-any-return]
    versions: OrderedDict[str, dict[int, list[dict[str, Any]]]] = OrderedDict()
    client = state.engine_client
    generate = client.generate

    async def generate_recording(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for output in generate(*args, **kwargs):
            for completion in output.outputs:
                if getattr(completion, "weight_versions", None):
                    versions.setdefault(output.request_id, {})[completion.index] = [
                        {"version": "0" if s.version == INITIAL_LABEL else s.version, "start": s.start, "end": s.end}
                        for s in completion.weight_versions]
                    while len(versions) > VERSIONS_KEPT:
                        versions.popitem(last=False)
            yield output

    client.generate = generate_recording
    state.looprl_versions = versions
    return versions


async def _with_versions(state: Any, response: Response) -> Response:
    """A JSON chat completion with each choice's `weight_versions` added (other responses as they are)."""
    if response.status_code != 200 or not response.headers.get("content-type", "").startswith("application/json"):
        return response
    raw = b"".join([chunk async for chunk in response.body_iterator])  # type: ignore[attr-defined]
    body = json.loads(raw)
    spans = state.looprl_versions.pop(body.get("id"), {})
    adapter = re.fullmatch(rf"{re.escape(_base_name(state))}-step-(\d+)", str(body.get("model")))
    for choice in body.get("choices") or []:
        tokens = len(choice.get("token_ids") or [])
        if adapter is not None:  # the adapter named in the request sampled every token
            choice["weight_versions"] = [{"version": adapter.group(1), "start": 0, "end": tokens}] if tokens else None
        else:
            choice["weight_versions"] = spans.get(choice.get("index"))
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
    return JSONResponse(body, status_code=response.status_code, headers=headers)


def _base_name(state: Any) -> str:
    return str(state.openai_serving_models.base_model_paths[0].name)


def _weights(state: Any) -> dict[str, Any]:
    if not hasattr(state, "looprl_weights"):
        state.looprl_weights = {"version": 0, "path": str(state.args.model), "model": _base_name(state)}
    return state.looprl_weights


def _error(status: int, message: str, code: str = "invalid_weights",
           type: str = "invalid_request_error") -> JSONResponse:
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)
