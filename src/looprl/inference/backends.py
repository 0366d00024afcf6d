"""One way to start the policy's engine, whichever the backend (`inference.backend`).

`looprl rl`, `looprl eval` and `bench/` call `engine_process(...)` and get an `EngineProcess`
(the embedded engine) or a `VllmProcess` (vLLM's OpenAI server); both are started and stopped the
same way, serve `/v1/chat/completions` with token ids and logprobs, `/health` and
`/update_weights`. The model is resolved here, in looprl's interpreter (the bundled alias becomes
its converted HF directory), so vLLM is given a directory and serves it under the name asked for.

When the engine shares its GPU with the trainer, the launcher puts `deployment.inference_memory_fraction`
in `LOOPRL_GPU_MEMORY_FRACTION`: the embedded engine reads it itself (the default of its
`--gpu-memory-fraction`), vLLM is given it as `--gpu-memory-utilization` unless `inference.vllm_args`
sets that flag. The embedded engine picks its device itself (`--device auto`: CUDA when present).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.inference.process import EngineProcess

if TYPE_CHECKING:
    from looprl.config import InferenceConfig


def engine_process(cfg: InferenceConfig, model: str, log_path: Path | None = None, *, lora_rank: int | None = None,
                   log_args: list[str] | None = None, host: str = "127.0.0.1",
                   port: int | None = None) -> EngineProcess:
    """The engine for `model` as `cfg` says, not started. `lora_rank`: the trainer trains LoRA adapters
    of this rank (vLLM then loads each broadcast adapter at run time); `log_args`: the embedded
    engine's `--log-level`/`--json-logging` flags."""
    if cfg.backend == "embedded":
        return EngineProcess(model, log_path=log_path, host=host, port=port,
                             extra_args=["--max-batch-size", str(cfg.max_batch_size), *(log_args or [])])
    from looprl.inference.vllm.launch import VllmProcess, vllm_python
    from looprl.model_loading import resolve_model

    return VllmProcess(str(resolve_model(model)), python=vllm_python(cfg.vllm_python), served_model_name=model,
                       log_path=log_path, host=host, port=port, tool_call_parser=cfg.tool_call_parser,
                       lora_rank=lora_rank,
                       vllm_args=["--max-num-seqs", str(cfg.max_batch_size), *_memory_args(cfg.vllm_args),
                                  *cfg.vllm_args])


def _memory_args(vllm_args: list[str]) -> list[str]:
    """`--gpu-memory-utilization` from the launcher's memory fraction, unless the user's flags set it."""
    fraction = os.environ.get(MEMORY_FRACTION_ENV)
    if fraction is None or any(a.split("=")[0] == "--gpu-memory-utilization" for a in vllm_args):
        return []
    return ["--gpu-memory-utilization", fraction]
