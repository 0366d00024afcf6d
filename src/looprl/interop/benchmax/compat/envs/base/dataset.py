"""benchmax's JSONL loading: looprl's `JsonlDataset`, plus `resolve_dataset_path` for constructor paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from looprl.envs.dataset import JsonlDataset

JsonRow = dict[str, Any]


def resolve_dataset_path(base_dir: Path, relative_path: str) -> Path:
    """`relative_path` under `base_dir`; benchmax refuses absolute paths and paths that leave the data root."""
    if Path(relative_path).is_absolute():
        raise ValueError("dataset paths must be relative to base_dir")
    root = base_dir.expanduser().resolve()
    resolved = (root / relative_path).resolve()
    if not resolved.is_relative_to(root):
        raise ValueError("dataset paths must stay within base_dir")
    return resolved


__all__ = ["JsonRow", "JsonlDataset", "resolve_dataset_path"]
