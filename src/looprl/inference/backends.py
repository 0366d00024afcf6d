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

`inference.dtype` reaches both as `--dtype`. `auto` (left so by `looprl eval` and `looprl inference`;
`looprl rl` resolves it into config.toml) is bfloat16 on a GPU and float32 on the CPU: the embedded
engine resolves it on its device, vLLM is given it resolved here (vLLM's own `auto` would take the
checkpoint's dtype, bfloat16 on the CPU too).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from looprl.config import engine_dtype
from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.inference.process import EngineProcess

if TYPE_CHECKING:
    from looprl.config import InferenceConfig, RLConfig


def engine_process(cfg: InferenceConfig, model: str, log_path: Path | None = None, *, lora_rank: int | None = None,
                   log_args: list[str] | None = None, host: str = "127.0.0.1",
                   port: int | None = None, gpus: int | None = None, secret: str | None = None,
                   weights_dirs: Sequence[Path] = ()) -> EngineProcess:
    """The engine for `model` as `cfg` says, not started. `lora_rank`: the trainer trains LoRA adapters
    of this rank (vLLM then loads each broadcast adapter at run time); `log_args`: the embedded
    engine's `--log-level`/`--json-logging` flags; `gpus`: how many GPUs vLLM runs on (default: those
    in `CUDA_VISIBLE_DEVICES`; the embedded engine always uses the first it sees); `secret`: the run
    secret the engine requires; `weights_dirs`: where `/update_weights` may load from."""
    if cfg.backend == "embedded":
        return EngineProcess(model, log_path=log_path, host=host, port=port, secret=secret, weights_dirs=weights_dirs,
                             extra_args=["--max-batch-size", str(cfg.max_batch_size), "--dtype", cfg.dtype,
                                         *(["--max-kv-tokens", str(cfg.max_kv_tokens)] if cfg.max_kv_tokens else []),
                                         *(log_args or [])])
    from looprl.inference.vllm.launch import VllmProcess, vllm_python
    from looprl.model_loading import resolve_model

    dtype = cfg.dtype if cfg.dtype != "auto" else engine_dtype("auto", _cuda_available())
    return VllmProcess(str(resolve_model(model)), python=vllm_python(cfg.vllm_python), served_model_name=model,
                       log_path=log_path, host=host, port=port, tool_call_parser=cfg.tool_call_parser,
                       lora_rank=lora_rank, dtype=dtype, gpus=gpus, tensor_parallel_size=cfg.tensor_parallel_size,
                       secret=secret, weights_dirs=weights_dirs,
                       vllm_args=["--max-num-seqs", str(cfg.max_batch_size), *_memory_args(cfg.vllm_args),
                                  *cfg.vllm_args])


def run_engine(cfg: RLConfig, log_path: Path | None = None, *, host: str = "127.0.0.1", port: int | None = None,
               gpus: int | None = None, secret: str | None = None, weights_dirs: Sequence[Path] = ()) -> EngineProcess:
    """The engine of a `looprl rl` run: its policy, with vLLM's LoRA support when the trainer trains
    adapters, logging at the run's level, requiring the run `secret` and loading weights only from
    `weights_dirs` (the run's broadcasts, and its shared-memory region)."""
    return engine_process(cfg.inference, cfg.model.name, log_path, host=host, port=port, gpus=gpus,
                          secret=secret, weights_dirs=weights_dirs,
                          lora_rank=cfg.trainer.lora.rank if cfg.trainer.lora else None,
                          log_args=["--log-level", cfg.log.level,
                                    *(["--json-logging"] if cfg.log.json_logging else [])])


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _memory_args(vllm_args: list[str]) -> list[str]:
    """`--gpu-memory-utilization` from the launcher's memory fraction, unless the user's flags set it."""
    fraction = os.environ.get(MEMORY_FRACTION_ENV)
    if fraction is None or any(a.split("=")[0] == "--gpu-memory-utilization" for a in vllm_args):
        return []
    return ["--gpu-memory-utilization", fraction]
