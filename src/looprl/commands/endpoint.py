"""The model endpoint of `looprl eval` and `looprl validate`: a given server and its API key, or an engine
started for it (the embedded engine, or vLLM with `--backend vllm`)."""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

from pydantic import SecretStr

API_KEY_ENV = "OPENAI_API_KEY"


def add_api_key_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--api-key-file", type=Path, metavar="FILE",
                   help=f"file holding the API key for --base-url (default: ${API_KEY_ENV} when set)")
    p.add_argument("--api-key", metavar="KEY",
                   help=f"the API key itself: visible to every user in `ps`, prefer ${API_KEY_ENV} or --api-key-file")


def api_key(args: argparse.Namespace) -> SecretStr | None:
    """The key for `--base-url`: `--api-key-file`, `--api-key` (with a warning), or `$OPENAI_API_KEY`."""
    from looprl.utils.private import read_secret

    return read_secret(value=args.api_key, flag="--api-key", file=args.api_key_file, file_flag="--api-key-file",
                       env=API_KEY_ENV)


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
