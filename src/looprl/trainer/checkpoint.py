"""Resumable trainer state under `checkpoints/step_N/`.

A checkpoint holds the HF-format weights (with LoRA: the adapters) and tokenizer (`save_pretrained`,
so the directory also loads as a model), and `trainer_state.pt`: optimizer, scheduler, the RNG states (python, torch) and
whatever progress the caller passes (e.g. the orchestrator's position in the dataset), which is also
written as `progress.json` so processes without torch can read it (`paths.progress_path`). It is written
to a temporary sibling, `progress.json` last, and renamed into place: `handoff.latest_checkpoint` (the
one definition of a complete checkpoint) never sees a half-written one.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from looprl.paths import checkpoint_dir, progress_path
from looprl.trainer.lora import is_lora, load_adapters

STATE_FILE = "trainer_state.pt"


def save_checkpoint(run_dir: Path, step: int, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, progress: dict[str, Any] | None = None) -> Path:
    target = checkpoint_dir(run_dir, step)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".step_{step}.", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        torch.save({
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": {"python": random.getstate(), "torch": torch.get_rng_state()},
            "progress": progress or {},
        }, tmp / STATE_FILE)
        (tmp / progress_path(run_dir, step).name).write_text(json.dumps(progress or {}))
        shutil.rmtree(target, ignore_errors=True)
        os.rename(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def load_checkpoint(run_dir: Path, step: int, model: Any, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler) -> dict[str, Any]:
    """Restore weights, optimizer, scheduler and RNGs in place; returns the saved progress."""
    from safetensors.torch import load_file

    path = checkpoint_dir(run_dir, step)
    if is_lora(model):
        load_adapters(model, path)
    else:
        state: dict[str, torch.Tensor] = {}
        for file in sorted(path.glob("*.safetensors")):
            state.update(load_file(file))
        model.load_state_dict(state, strict=False)  # a tied lm_head is not saved; it follows the embeddings
    saved = torch.load(path / STATE_FILE, weights_only=False)
    optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    random.setstate(saved["rng"]["python"])
    torch.set_rng_state(saved["rng"]["torch"])
    return saved["progress"]
