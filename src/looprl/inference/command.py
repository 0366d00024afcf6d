"""`looprl inference`: the embedded OpenAI-compatible engine on its own (or vLLM, `--backend vllm`).

A thin entry point: arguments here, torch and transformers imported only inside `run`, so
`looprl inference --help` is instant. Serves until interrupted; `/health` answers once the model is
loaded. With `--backend vllm` it runs vLLM's server as `looprl rl` does (same flags, looprl's
`/update_weights`), in the foreground.

Open on loopback by default. With `$LOOPRL_RUN_SECRET` set, every route but `/health` requires it as
`Authorization: Bearer`; a non-loopback `--host` is refused without it. `/update_weights` loads only
from the `--weights-dir` directories (none by default).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.model_loading import DEFAULT_MODEL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["embedded", "vllm"], default="embedded",
                        help="engine (default: embedded)")
    parser.add_argument("--vllm-python", help="interpreter that runs vLLM (default: see inference.vllm_python)")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"alias, local HF directory or Hub id (default: {DEFAULT_MODEL})")
    parser.add_argument("--served-model-name", default=None, help="the name clients pass as `model` (default: --model)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default: 127.0.0.1; another address needs $LOOPRL_RUN_SECRET, a "
                             "secret every request but /health must then carry as `Authorization: Bearer`)")
    parser.add_argument("--weights-dir", action="append", type=Path, default=[], metavar="DIR",
                        help="a directory POST /update_weights may load weights from (the path must resolve inside "
                             "it); repeatable (default: none, the engine's weights never change)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (default: 8000)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                        help="auto: CUDA when present (default: auto)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                        help="weights dtype (default: auto, bfloat16 on a GPU and float32 on the CPU, as "
                             "inference.dtype)")
    parser.add_argument("--gpu-memory-fraction", type=float, default=os.environ.get(MEMORY_FRACTION_ENV),
                        help=f"most of the GPU's memory the engine may take (default: ${MEMORY_FRACTION_ENV}, which "
                             "`looprl rl` sets when engine and trainer share a GPU; else no cap)")
    parser.add_argument("--max-batch-size", type=int, default=64, help="most sequences decoded together (default: 64)")
    parser.add_argument("--max-kv-tokens", type=int, default=None,
                        help="the KV cache's budget in tokens (rows x longest row); requests beyond it wait "
                             "(default: 0.7 of the device's memory free once the model is loaded)")
    parser.add_argument(
        "--logprobs-mode",
        default="raw_logprobs",
        choices=["raw_logprobs", "processed_logprobs"],
        help="raw: log_softmax of the raw logits (temperature 1, vLLM's default); "
        "processed: of the sampled distribution",
    )
    parser.add_argument("--log-level", default="INFO", help="process log level (default: INFO)")
    parser.add_argument("--json-logging", action="store_true", help="one JSON object per log line")


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from looprl.config import engine_dtype
    from looprl.handoff.engine_access import SECRET_ENV, check_engine_bind
    from looprl.model_loading import load_model_and_tokenizer, resolve_model
    from looprl.utils.logger import setup_logger

    secret = os.environ.get(SECRET_ENV) or None
    check_engine_bind(args.host, secret)
    if args.backend == "vllm":
        return _run_vllm(args, secret)
    logger = setup_logger(args.log_level, args.json_logging, process="inference")

    path = resolve_model(args.model)  # a bad name fails here, before the heavy imports below
    from looprl.device import compute_dtype, kernel_contract_from_env, limit_memory, resolve
    from looprl.inference.engine import Engine, single_threaded_caller
    from looprl.inference.kv_budget import kv_bytes_per_token
    from looprl.inference.server import create_app

    threads = single_threaded_caller()  # the torch compute is the engine thread's

    device = resolve(args.device)
    limit_memory(device, args.gpu_memory_fraction)
    dtype = engine_dtype(args.dtype, device.type == "cuda")
    kernel_contract_from_env(compute_dtype(args.dtype, device), "inference")
    logger.info("loading {} from {} onto {} ({})", args.model, path, device, dtype)
    model, tokenizer = load_model_and_tokenizer(str(path), dtype=dtype, device=device)
    engine = Engine(model, tokenizer, max_batch_size=args.max_batch_size, logprobs_mode=args.logprobs_mode,
                    threads=threads, max_kv_tokens=args.max_kv_tokens)
    logger.info("KV-cache budget: {} tokens ({:.2f} GiB)", engine.max_kv_tokens,
                engine.max_kv_tokens * kv_bytes_per_token(model) / 2**30)
    if engine.max_kv_tokens < engine.max_context:
        logger.warning("the KV-cache budget ({} tokens) is below the model's context ({}): longer requests fail",
                       engine.max_kv_tokens, engine.max_context)
    app = create_app(engine, args.served_model_name or args.model, secret=secret, weights_dirs=args.weights_dir)
    # log_config=None: uvicorn's records go through stdlib logging into the process logger
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False)
    return 0


def _run_vllm(args: argparse.Namespace, secret: str | None) -> int:
    from looprl.config import InferenceConfig
    from looprl.errors import UserError
    from looprl.inference.backends import engine_process

    if args.max_kv_tokens is not None:
        raise UserError("--max-kv-tokens sizes the embedded engine's KV cache; vLLM sizes its own "
                        "(--gpu-memory-utilization)")
    cfg = InferenceConfig(backend="vllm", vllm_python=args.vllm_python, max_batch_size=args.max_batch_size,
                          dtype=args.dtype)
    engine = engine_process(cfg, args.model, host=args.host, port=args.port, secret=secret,
                            weights_dirs=args.weights_dir)
    engine.model_name = args.served_model_name or args.model
    return engine.serve_foreground()
