"""The `step_N` directories of a run, and when a checkpoint or a weight broadcast is complete.

    checkpoints/step_N/  complete once `progress.json` is in it: the trainer writes a checkpoint into a
                         temporary sibling (`.step_N.*`, `progress.json` last) and renames it into place
    broadcasts/step_N/   complete ("stable") once its `STABLE` marker is in it, which the trainer
                         writes after the weights

The trainer writes both. The orchestrator loads the newest stable broadcast into the engine; the
launcher's `--resume` continues from the latest complete checkpoint. This is the one definition of
both, so no reader ever takes a half-written directory for a finished one.
"""

from __future__ import annotations

import re
from pathlib import Path

from looprl.paths import broadcasts_dir, checkpoints_dir, progress_path

STABLE = "STABLE"
_STEP_DIR = re.compile(r"step_(\d+)")


def step_dirs(root: Path) -> dict[int, Path]:
    """The `step_N` directories under `root` by N, in increasing order (temporary siblings excluded)."""
    if not root.is_dir():
        return {}
    found = {int(m[1]): p for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.fullmatch(p.name))}
    return dict(sorted(found.items()))


def latest_checkpoint(run_dir: Path) -> int | None:
    """The highest step with a complete checkpoint, or None."""
    steps = [n for n in step_dirs(checkpoints_dir(run_dir)) if progress_path(run_dir, n).is_file()]
    return max(steps, default=None)


def mark_stable(path: Path) -> None:
    """Declare the broadcast in `path` complete: call it after every weight file is written."""
    (Path(path) / STABLE).touch()


def is_stable(path: Path) -> bool:
    return (Path(path) / STABLE).is_file()


def newest_broadcast(run_dir: Path) -> int | None:
    """The highest step with a stable broadcast, or None."""
    return max((n for n, p in step_dirs(broadcasts_dir(run_dir)).items() if is_stable(p)), default=None)
