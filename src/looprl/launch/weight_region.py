"""The shared-memory region directory of a `looprl rl` run (`trainer.weight_handoff = "shared_memory"`).

`weight_region()` makes `/dev/shm/looprl-weights-XXXXXXXX/` before the trainer starts (the trainer puts
`weights.bin` in it, `looprl.handoff.shared_weights`) and removes it when the run ends: success, a failed
child, Ctrl-C or SIGTERM. The launcher holds an exclusive `flock` on `launcher.lock` inside it for the
run's life; the kernel drops that lock when the launcher dies, even by SIGKILL, so the next `looprl rl`
removes every region directory of this user whose lock it can take (`remove_stale_regions`): nothing is
left in `/dev/shm` for longer than until the next run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from looprl.handoff.shared_weights import REGION_PREFIX, REGION_ROOT

OWNER_LOCK = "launcher.lock"


@contextlib.contextmanager
def weight_region(root: Path = REGION_ROOT) -> Iterator[Path]:
    """A new region directory under `root`, locked by this process until the block exits, then removed."""
    remove_stale_regions(root)
    # made and locked under a name the sweep ignores, then renamed: no sweep ever sees it unlocked
    making = Path(tempfile.mkdtemp(prefix=f".{REGION_PREFIX}", dir=root))
    lock = os.open(making / OWNER_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = root / making.name.removeprefix(".")
    try:
        os.rename(making, path)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(making, ignore_errors=True)
        os.close(lock)


def remove_stale_regions(root: Path = REGION_ROOT) -> list[Path]:
    """Remove the region directories whose launcher is gone (their lock is free); the ones removed."""
    removed = []
    for path in sorted(root.glob(f"{REGION_PREFIX}*")):
        try:
            fd = os.open(path / OWNER_LOCK, os.O_RDWR)
        except OSError:  # another user's, or not a region directory
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its launcher is running
            continue
        finally:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed
