"""Weights for the inference engine under `broadcasts/step_N/`, with a `STABLE` marker written last.

The engine (or vLLM's weight-update extension) polls for the marker and only then reads the
safetensors, so it never loads a half-written directory (the marker and what makes a broadcast
complete are defined once, in `looprl.handoff`). Rank 0 writes it from the gathered state dict
(`trainer.weight_files`): full Hugging Face weights, with LoRA adapters merged in, or with
`adapter_only` (the trainer sets it when the engine is vLLM, which hot-loads adapters) only the
adapters. Older broadcasts beyond `keep` are deleted: each is a full copy of the weights.

Broadcasts are written in the engine's dtype (`inference.dtype`: bfloat16 on GPUs), half the bytes
of the float32 master weights to write, read and copy; checkpoints keep float32.

`Broadcaster` is what the trainer loop calls each step: those files, or with a shared-memory region
(`trainer.weight_handoff`, the embedded engine on this host) the same tensors put in the region
(`trainer.shared_weights`) and a `broadcasts/step_N/shared_memory.json` naming them, marked `STABLE`
alike. If the region cannot be made (a `/dev/shm` too small: containers often give 64 MB), it warns
and writes files.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from looprl.config import engine_dtype
from looprl.handoff import mark_stable, step_dirs
from looprl.handoff.shared_weights import write_message
from looprl.paths import broadcast_dir, broadcasts_dir
from looprl.trainer.lora import is_lora
from looprl.trainer.parallel import Ranks
from looprl.trainer.shared_weights import SharedWeightsWriter
from looprl.trainer.weight_files import (
    StateDict,
    full_state_dict,
    merged,
    save_adapters,
    save_model,
    without_tied_head,
)
from looprl.utils.logger import get_logger


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
    if adapter_only and is_lora(model):
        return _publish(run_dir, step, keep, lambda target: save_adapters(target, model, _cast(state, dtype)))
    return _publish(run_dir, step, keep, lambda target: save_model(target, _cast(merged(model, state), dtype),
                                                                    model.config))


class Broadcaster:
    """Each step's weights for the engine, as files (`broadcast_weights`) or, given `region_dir`, through the
    shared-memory region (never for adapters alone: only vLLM loads those, from files)."""

    def __init__(self, run_dir: Path, keep: int = 2, adapter_only: bool = False, dtype: torch.dtype | None = None,
                 region_dir: Path | None = None) -> None:
        self.run_dir, self.keep, self.adapter_only, self.dtype = run_dir, keep, adapter_only, dtype
        self.shared = SharedWeightsWriter(region_dir) if region_dir is not None and not adapter_only else None

    def attach(self, model: Any, ranks: Ranks) -> None:
        """Let the trainer's own parameters live in the region when they can (`SharedWeightsWriter.attach`)."""
        if self.shared is not None and self.dtype is not None:
            try:
                live = self.shared.attach(model, ranks, self.dtype)
            except OSError as e:
                self._fall_back(e)
                return
            get_logger().info("weights reach the engine through the shared-memory region {} ({})", self.shared.path,
                              "the parameters live in it" if live else "copied in at each broadcast")

    def guard(self, optimizer: torch.optim.Optimizer) -> None:
        if self.shared is not None:
            self.shared.guard(optimizer)

    def begin_change(self) -> None:
        """The weights are about to change outside an optimizer step (a rollback): the region, if the parameters
        live in it, stops offering the version it holds."""
        if self.shared is not None:
            self.shared.begin_change()

    @contextlib.contextmanager
    def unchanged(self, step: int) -> Iterator[None]:
        """A block that leaves the weights of `step`'s broadcast as they are (saving a checkpoint) but may run
        an optimizer step of learning rate 0: the region holds `step` again after it."""
        yield
        if self.shared is not None:
            self.shared.republish(step)

    def __call__(self, step: int, model: Any, state: StateDict) -> Path:
        if self.shared is not None:
            try:
                dtype = self.dtype or next(t.dtype for t in state.values() if t.is_floating_point())
                message = self.shared.publish(without_tied_head(merged(model, state), model.config), step, dtype)
                return _publish(self.run_dir, step, self.keep, lambda target: write_message(target, message))
            except OSError as e:
                self._fall_back(e)
        return broadcast_weights(self.run_dir, step, model, state, self.keep, self.adapter_only, self.dtype)

    def _fall_back(self, error: OSError) -> None:
        get_logger().warning("no shared-memory weight handoff ({}): broadcasting files instead", error)
        self.shared = None


def _publish(run_dir: Path, step: int, keep: int, write: Callable[[Path], None]) -> Path:
    """`broadcasts/step_N/` written by `write`, then marked stable; broadcasts beyond the newest `keep` deleted."""
    target = broadcast_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    write(target)
    mark_stable(target)
    for old in list(step_dirs(broadcasts_dir(run_dir)).values())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def _cast(state: StateDict, dtype: torch.dtype | None) -> StateDict:
    if dtype is None:
        return state
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
