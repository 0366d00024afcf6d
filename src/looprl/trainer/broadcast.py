"""Weights for the inference engine under `broadcasts/step_N/`, with a `STABLE` marker written last.

The engine (or vLLM's weight-update extension) polls for the marker and only then reads the
safetensors, so it never loads a half-written directory. `save_pretrained` drops tied duplicates
(a tied `lm_head`), which the engine's in-place update leaves tied to the embeddings. Older
broadcasts beyond `keep` are deleted: each is a full copy of the weights.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from looprl.store.paths import broadcast_dir

STABLE = "STABLE"


def broadcast_weights(run_dir: Path, step: int, model: Any, keep: int = 2) -> Path:
    target = broadcast_dir(run_dir, step)
    shutil.rmtree(target, ignore_errors=True)
    model.save_pretrained(target, safe_serialization=True)
    (target / STABLE).touch()
    for old in sorted(target.parent.glob("step_*"), key=lambda p: int(p.name.removeprefix("step_")))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return target


def is_stable(path: Path) -> bool:
    return (Path(path) / STABLE).is_file()
