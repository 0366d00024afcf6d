"""Weights for the inference engine under `broadcasts/step_N/`, with a `STABLE` marker written last.

The engine (or vLLM's weight-update extension) polls for the marker and only then reads the
safetensors, so it never loads a half-written directory (the marker and what makes a broadcast
complete are defined once, in `looprl.handoff`). `save_pretrained` drops tied duplicates
(a tied `lm_head`), which the engine's in-place update leaves tied to the embeddings. Older
broadcasts beyond `keep` are deleted: each is a full copy of the weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from looprl.handoff import mark_stable, step_dirs
from looprl.paths import broadcast_dir, broadcasts_dir


def broadcast_weights(run_dir: Path, step: int, model: Any, keep: int = 2) -> Path:
    target = broadcast_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    model.save_pretrained(target, safe_serialization=True)
    mark_stable(target)
    for old in list(step_dirs(broadcasts_dir(run_dir)).values())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target
