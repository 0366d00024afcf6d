"""Forcing a directory's files to disk before a marker declares the directory complete.

A rename or a marker file is atomic for readers of a running system, but after a power loss or a kernel
crash the marker can be on disk while the data it vouches for is not: the page cache writes back in any
order. So a writer fsyncs every file and directory (`fsync_tree`) before it writes the marker, writes the
marker durably (`write_durable`), and fsyncs the parent after a rename (`fsync_path`) so the rename itself
survives. Used by the trainer's checkpoints (`trainer/checkpoint.py`), which `looprl rl --resume` trusts.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(path: Path) -> None:
    """fsync one file or directory (a directory's fsync makes the names in it, and renames into it, durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file under `root`, then each directory after its contents, `root` last."""
    for dirpath, _, filenames in os.walk(root, topdown=False):
        for name in filenames:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))


def write_durable(path: Path, text: str) -> None:
    """Write `text` to `path` and fsync it (the caller fsyncs the directory that names it)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
