"""Resumable trainer state under `checkpoints/step_N/`, and which checkpoints stay on disk.

A checkpoint holds the HF-format weights (with LoRA: the adapters) and tokenizer, so the directory
also loads as a model; `optimizer/`, AdamW's state sharded by `torch.distributed.checkpoint` (each
rank writes its own shard; left out of a weights-only checkpoint); and `trainer_state.pt`: scheduler,
the RNG states (python, torch, and on GPUs each rank's CUDA generator, which LoRA dropout draws from)
and whatever progress the caller passes (e.g. the orchestrator's
position in the dataset), which is also written as `progress.json` so processes without torch can
read it (`paths.progress_path`). It is written to a temporary sibling, every file fsynced before
`progress.json` is written last, and renamed into place: `handoff.latest_checkpoint` (the one
definition of a complete checkpoint) never sees a half-written one, even after a power loss.
`trainer_state.pt` holds only tensors and plain values and is loaded with `weights_only=True`, and the
optimizer's pickled DCP metadata is checked first (`checkpoint_metadata`), so a file planted in the run
directory cannot run code when the trainer resumes.

The weights are the ones the step's broadcast already gathered (`trainer.weight_files`), so they are
hard-linked from the broadcast when it holds exactly them (full fine-tuning): no second copy on disk.

Loading is in two parts, around sharding: `load_weights` into the whole model before FSDP wraps it (on rank 0
only: the other ranks' models are on the meta device and receive rank 0's weights as they are sharded,
`trainer.parallel`), `load_trainer_state` once the optimizer exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from looprl.handoff import step_dirs
from looprl.paths import broadcast_dir, checkpoint_dir, checkpoints_dir, progress_path
from looprl.trainer.checkpoint_metadata import check_metadata
from looprl.trainer.lora import is_lora, load_adapters
from looprl.trainer.parallel import Ranks, gather_objects
from looprl.trainer.weight_files import (
    MODEL_FILE,
    StateDict,
    full_state_dict,
    save_adapters,
    save_model,
    stores,
)
from looprl.utils.durable import fsync_path, fsync_tree, write_durable

STATE_FILE = "trainer_state.pt"
OPTIMIZER_DIR = "optimizer"


def save_checkpoint(run_dir: Path, step: int, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, progress: dict[str, Any] | None = None, *,
                    state: StateDict | None = None, ranks: Ranks | None = None, with_optimizer: bool = True) -> Path:
    """Every rank calls it. `state`: rank 0's gathered weights (`full_state_dict`, None on other ranks);
    one process may leave it out."""
    ranks = ranks or Ranks()
    if not ranks.distributed and state is None:
        state = full_state_dict(model, ranks)
    target = checkpoint_dir(run_dir, step)
    tmp = target.parent / f".step_{step}.tmp"
    if ranks.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    ranks.barrier()
    if with_optimizer:  # collectives first, on every rank, then rank 0's own files
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        dcp.save(get_optimizer_state_dict(model, optimizer), checkpoint_id=tmp / OPTIMIZER_DIR,
                 no_dist=not ranks.distributed)
    cuda_rng = gather_objects(torch.cuda.get_rng_state(ranks.device) if ranks.device.type == "cuda" else None, ranks)
    if ranks.is_main:
        assert state is not None
        _save_weights(tmp, run_dir, step, model, state)
        tokenizer.save_pretrained(tmp)
        rng = {"python": random.getstate(), "torch": torch.get_rng_state(), "cuda": cuda_rng}
        torch.save({"step": step, "scheduler": scheduler.state_dict(), "progress": progress or {}, "rng": rng},
                   tmp / STATE_FILE)
        _complete(run_dir, step, tmp, json.dumps(progress or {}))
    ranks.barrier()
    return target


def _complete(run_dir: Path, step: int, tmp: Path, progress: str) -> None:
    """Make checkpoint `step`, written in `tmp`, durable, mark it complete (`progress.json`) and rename it.

    Every file is fsynced before the marker, and the marker before the rename, so after a power loss a
    checkpoint that looks complete is complete. The step's broadcast is synced too: `--resume` has the
    engine load it when it is marked stable (one already removed is broadcast again on resume). Other
    broadcasts are not synced: they go on resume."""
    fsync_tree(tmp)
    with contextlib.suppress(FileNotFoundError):  # the orchestrator removes it once the engine has newer weights
        fsync_tree(broadcast_dir(run_dir, step))
    write_durable(tmp / progress_path(run_dir, step).name, progress)
    fsync_path(tmp)
    target = checkpoint_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    fsync_path(target.parent)


def _save_weights(tmp: Path, run_dir: Path, step: int, model: Any, state: StateDict) -> None:
    if is_lora(model):
        save_adapters(tmp, model, state)
        return
    try:  # the broadcast of this step holds exactly these weights, unless it was written in the engine's dtype
        if not stores(broadcast_dir(run_dir, step) / MODEL_FILE, state):
            raise FileNotFoundError(MODEL_FILE)
        for name in (MODEL_FILE, "config.json"):
            os.link(broadcast_dir(run_dir, step) / name, tmp / name)
    except OSError:  # none (or deleted meanwhile), or another filesystem
        for name in (MODEL_FILE, "config.json"):
            (tmp / name).unlink(missing_ok=True)
        save_model(tmp, state, model.config)


def load_weights(run_dir: Path, step: int, model: Any) -> None:
    """Restore checkpoint `step`'s weights (or adapters) into the whole, unsharded model."""
    from safetensors.torch import load_file

    path = checkpoint_dir(run_dir, step)
    if is_lora(model):
        load_adapters(model, path)
        return
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        weights.update(load_file(file))
    model.load_state_dict(weights, strict=False)  # a tied lm_head is not saved; it follows the embeddings


CONFIGURED = ("betas", "eps", "weight_decay")
"""AdamW's settings that a resume takes from the run's config (`trainer.optim`), not from the checkpoint: the saved
optimizer state carries its parameter groups' settings, which would otherwise quietly override a changed config
(the learning rate is the schedule's, restored with it)."""


def load_trainer_state(run_dir: Path, step: int, model: Any, optimizer: torch.optim.Optimizer,
                       scheduler: torch.optim.lr_scheduler.LRScheduler,
                       ranks: Ranks | None = None) -> tuple[dict[str, Any], bool]:
    """Restore optimizer (when saved), scheduler and RNGs; `(the saved progress, optimizer restored)`."""
    ranks = ranks or Ranks()
    path = checkpoint_dir(run_dir, step)
    restored = (path / OPTIMIZER_DIR).is_dir()
    if restored:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import (
            get_optimizer_state_dict,
            set_optimizer_state_dict,
        )

        check_metadata(path / OPTIMIZER_DIR)  # DCP unpickles it
        configured = [{key: group[key] for key in CONFIGURED} for group in optimizer.param_groups]
        optim_state = get_optimizer_state_dict(model, optimizer)
        dcp.load(optim_state, checkpoint_id=path / OPTIMIZER_DIR, no_dist=not torch.distributed.is_initialized())
        set_optimizer_state_dict(model, optimizer, optim_state_dict=optim_state)
        for group, settings in zip(optimizer.param_groups, configured):
            group.update(settings)
    saved = torch.load(path / STATE_FILE, weights_only=True)  # never unpickle code from the run directory
    scheduler.load_state_dict(saved["scheduler"])
    if not restored:  # the groups' learning rates are part of the optimizer's state: without it, the schedule's
        for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr()):  # (a rollback's factor included)
            group["lr"] = lr
    random.setstate(saved["rng"]["python"])
    torch.set_rng_state(saved["rng"]["torch"])
    cuda_rng = [state for state in saved["rng"].get("cuda") or [] if state is not None]
    if cuda_rng and ranks.device.type == "cuda":  # resumed with other ranks: each takes one of the saved
        torch.cuda.set_rng_state(cuda_rng[ranks.rank % len(cuda_rng)], ranks.device)
    return saved["progress"], restored


def prune_checkpoints(run_dir: Path, keep: int, is_kept: Callable[[int], bool]) -> None:
    """Delete every checkpoint but the newest `keep` kept ones and the newest of all (the resumable
    state, which the next one replaces)."""
    steps = step_dirs(checkpoints_dir(run_dir))
    kept = [n for n in steps if is_kept(n)][-keep:]
    newest = max(steps, default=None)
    for n, path in steps.items():
        if n not in kept and n != newest:
            shutil.rmtree(path, ignore_errors=True)
