"""Writing and waiting for run-directory files that one process writes and another reads.

Every file is written to a temporary sibling and renamed into place, so a reader that sees the file
sees all of it; readers poll for it (`wait_model` blocks, for the trainer; `await_model` yields to
the event loop, for the orchestrator). Plain pydantic and JSON, no torch.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
POLL_S = 0.2


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_model(path: Path, model: BaseModel) -> None:
    write_atomic(path, model.model_dump_json())


def read_model(path: Path, cls: type[M]) -> M | None:
    """The model in `path`, or None while the file does not exist."""
    try:
        return cls.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None


def wait_model(path: Path, cls: type[M]) -> M:
    """Block until `path` exists and return its model (the trainer's side)."""
    while (model := read_model(path, cls)) is None:
        time.sleep(POLL_S)
    return model


async def await_model(path: Path, cls: type[M]) -> M:
    """Wait for `path` without blocking the event loop (the orchestrator's side)."""
    while (model := read_model(path, cls)) is None:
        await asyncio.sleep(POLL_S)
    return model
