"""The per-step files through which the orchestrator and the trainer hand work to each other.

    steps/step_N/batch.json     TrainBatch     orchestrator -> trainer
    steps/step_N/trainer.json   TrainerReport  trainer -> orchestrator

Steps count from 1. Both are written atomically and polled for (`handoff.files`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from looprl.handoff.batch import MicroBatch


class TrainBatch(BaseModel):
    """Produced by the orchestrator once step N's rollouts are scored; consumed by the trainer."""

    step: int
    micro_batches: list[MicroBatch]
    progress: dict[str, Any] = Field(default_factory=dict)
    """The orchestrator's position in the dataset after this batch; the trainer saves it with its
    checkpoint (`checkpoints/step_N/progress.json`), which the orchestrator reads on `--resume`."""


class TrainerReport(BaseModel):
    """Produced by the trainer after step N's update and broadcast; the orchestrator stores the metrics."""

    step: int
    metrics: dict[str, float]
