"""The run-directory files through which the orchestrator and the trainer hand work to each other.

    steps/step_N/batch.json     TrainBatch     orchestrator -> trainer: step N's packed micro-batches
    steps/step_N/trainer.json   TrainerReport  trainer -> orchestrator: step N's training metrics
    broadcasts/step_N/ + STABLE                trainer -> engine: the weights after step N, which the
                                               orchestrator loads with POST /update_weights
    checkpoints/step_N/progress.json           the orchestrator's progress saved with checkpoint N

Steps count from 1; weights "version N" are the weights after N optimizer steps (version 0: the
initial model). Every file is written to a temporary sibling and renamed into place, so a reader
that sees the file sees all of it; readers poll for it. Plain pydantic and JSON, no torch.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from looprl.orchestrator.types import MicroBatch

M = TypeVar("M", bound=BaseModel)
POLL_S = 0.2


class TrainBatch(BaseModel):
    """Produced by the orchestrator once step N's rollouts are scored; consumed by the trainer."""

    step: int
    micro_batches: list[MicroBatch]
    progress: dict[str, Any] = Field(default_factory=dict)
    """The orchestrator's position in the dataset after this batch; saved with the trainer's checkpoint."""


class TrainerReport(BaseModel):
    """Produced by the trainer after step N's update and broadcast; the orchestrator stores the metrics."""

    step: int
    metrics: dict[str, float]


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
