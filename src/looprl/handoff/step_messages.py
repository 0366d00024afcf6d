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
    explored: bool = True
    """Whether most of the step's groups had signal (`session.collapse_recovery.explored`), sampled at the configured
    temperature (not raised by the recovery: `CollapseRecovery.sampled_as_configured`): with collapse recovery
    by rollback the trainer keeps a copy of the weights that sampled such a step (`trainer.rollback`)."""
    rollback: bool = False
    """Collapse recovery by rollback (`[orchestrator.collapse] method = "rollback"`, or the temperature's escalation):
    instead of training on this batch (sampled by a policy that stopped exploring), the trainer puts back the
    weights it kept, zeroes AdamW's momentum and lowers the learning rate by `lr_factor`."""
    entropy_coef: float = 0.0
    """Collapse recovery's entropy bonus for this step (`[orchestrator.collapse] entropy_coef`, from its first
    intervention on; 0 before it): the trainer's loss uses the larger of this and `trainer.loss.entropy_coef`."""
    progress: dict[str, Any] = Field(default_factory=dict)
    """The orchestrator's position in the dataset after this batch; the trainer saves it with its
    checkpoint (`checkpoints/step_N/progress.json`), which the orchestrator reads on `--resume`."""


class TrainerReport(BaseModel):
    """Produced by the trainer after step N's update and broadcast; the orchestrator stores the metrics,
    and the logprobs on the rollouts' model calls (`model_calls.trainer_logprobs`)."""

    step: int
    metrics: dict[str, float]
    rollout_logprobs: dict[str, list[float]] = Field(default_factory=dict)
    """Per rollout id, the trainer's logprob of each of its loss tokens, in call order (the concatenated
    completions of its trainable calls), under the weights before this step's update: the values the
    loss used, comparable to the engine's."""
