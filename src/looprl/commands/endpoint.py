"""The model endpoint of `looprl eval` and `looprl validate`: a given server, or an engine started for it
(the embedded engine, or vLLM with `--backend vllm`)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


def model_endpoint(stack: contextlib.ExitStack, base_url: str | None, model: str | None,
                   engine_log: Path, backend: str = "embedded", vllm_python: str | None = None) -> tuple[str, str]:
    """`(base_url, model name)`: `base_url` as given, or the `backend` engine on `model` (default: the
    bundled model) started for the life of `stack`, logging to `engine_log`. Says when the engine
    starts and when it is ready: start-up takes seconds to minutes."""
    if base_url:
        return base_url, model or "default"
    from looprl.config import InferenceConfig
    from looprl.inference.backends import engine_process
    from looprl.model_loading import DEFAULT_MODEL

    print(f"starting engine {model or DEFAULT_MODEL} ({backend})… (log: {engine_log})", flush=True)
    started = time.monotonic()
    cfg = InferenceConfig(backend=backend, vllm_python=vllm_python)  # type: ignore[arg-type]
    engine = stack.enter_context(engine_process(cfg, model or DEFAULT_MODEL, engine_log))
    print(f"engine ready in {time.monotonic() - started:.1f}s", flush=True)
    return engine.base_url, engine.model_name
