"""The model endpoint of `looprl eval` and `looprl validate`: a given server, or the embedded engine."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path


def model_endpoint(stack: contextlib.ExitStack, base_url: str | None, model: str | None,
                   engine_log: Path) -> tuple[str, str]:
    """`(base_url, model name)`: `base_url` as given, or the embedded engine on `model` (default: the
    bundled model) started for the life of `stack`, logging to `engine_log`. Says when the engine
    starts and when it is ready: start-up takes seconds to minutes."""
    if base_url:
        return base_url, model or "default"
    from looprl.inference.process import EngineProcess
    from looprl.models import DEFAULT_MODEL

    print(f"starting engine {model or DEFAULT_MODEL}… (log: {engine_log})", flush=True)
    started = time.monotonic()
    engine = stack.enter_context(EngineProcess(model or DEFAULT_MODEL, log_path=engine_log))
    print(f"engine ready in {time.monotonic() - started:.1f}s", flush=True)
    return engine.base_url, engine.model_name
