"""Weights for the inference engine under `broadcasts/step_N/`, with a `STABLE` marker written last.

The engine (or vLLM's weight-update extension) polls for the marker and only then reads the
safetensors, so it never loads a half-written directory (the marker and what makes a broadcast
complete are defined once, in `looprl.handoff`). Rank 0 writes it from the gathered state dict
(`trainer.weight_files`): full Hugging Face weights, with LoRA adapters merged in, or with
`adapter_only` (the trainer sets it when the engine is vLLM, which hot-loads adapters) only the
adapters. Older broadcasts beyond `keep` are deleted: each is a full copy of the weights.

Broadcasts are written in the engine's dtype (`inference.dtype`: bfloat16 on GPUs), half the bytes
of the float32 master weights to write, read and copy; checkpoints keep float32.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from looprl.config import engine_dtype
from looprl.handoff import mark_stable, step_dirs
from looprl.paths import broadcast_dir, broadcasts_dir
from looprl.trainer.lora import is_lora
from looprl.trainer.parallel import Ranks
from looprl.trainer.weight_files import (
    StateDict,
    full_state_dict,
    merged,
    save_adapters,
    save_model,
)


def broadcast_dtype(engine_dtype_name: str, ranks: Ranks) -> torch.dtype:
    """The dtype broadcasts are written in: the engine's (`inference.dtype`; `auto` as the engine resolves it)."""
    return getattr(torch, engine_dtype(engine_dtype_name, gpu=ranks.device.type == "cuda"))


def broadcast_weights(run_dir: Path, step: int, model: Any, state: StateDict | None = None, keep: int = 2,
                      adapter_only: bool = False, dtype: torch.dtype | None = None) -> Path:
    """Write `state` (rank 0's gathered weights of `model`; default: one process's own) as broadcast `step`,
    its floating-point tensors in `dtype` (default: as they are)."""
    if state is None:
        state = full_state_dict(model, Ranks())
        assert state is not None  # one process is its own main rank
    target = broadcast_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    if adapter_only and is_lora(model):
        save_adapters(target, model, _cast(state, dtype))
    else:
        save_model(target, _cast(merged(model, state), dtype), model.config)
    mark_stable(target)
    for old in list(step_dirs(broadcasts_dir(run_dir)).values())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _cast(state: StateDict, dtype: torch.dtype | None) -> StateDict:
    if dtype is None:
        return state
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
