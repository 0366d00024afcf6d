"""Weights for the inference engine under `broadcasts/step_N/`, with a `STABLE` marker written last.

The engine (or vLLM's weight-update extension) polls for the marker and only then reads the
safetensors, so it never loads a half-written directory (the marker and what makes a broadcast
complete are defined once, in `looprl.handoff`). Rank 0 writes it from the gathered state dict
(`trainer.weight_files`): full Hugging Face weights, with LoRA adapters merged in, or with
`adapter_only` (the trainer sets it when the engine is vLLM, which hot-loads adapters) only the
adapters. Older broadcasts beyond `keep` are deleted: each is a full copy of the weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

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


def broadcast_weights(run_dir: Path, step: int, model: Any, state: StateDict | None = None, keep: int = 2,
                      adapter_only: bool = False) -> Path:
    """Write `state` (rank 0's gathered weights of `model`; default: one process's own) as broadcast `step`."""
    if state is None:
        state = full_state_dict(model, Ranks())
        assert state is not None  # one process is its own main rank
    target = broadcast_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    if adapter_only and is_lora(model):
        save_adapters(target, model, state)
    else:
        save_model(target, merged(model, state), model.config)
    mark_stable(target)
    for old in list(step_dirs(broadcasts_dir(run_dir)).values())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target
