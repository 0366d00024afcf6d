"""The orchestrator -> trainer boundary: training samples and the packed micro-batches made of them.

`TrainingSample` is produced by `orchestrator.samples` from a rollout's recorded model calls and
consumed by `orchestrator.packing`. `MicroBatch` is produced by `orchestrator.packing` and consumed
by the trainer's train step, which may run in another process: both are plain pydantic models (JSON
on the wire), with no torch in them.

Every per-token list is aligned with `token_ids`: entry t describes token t (the trainer's logprob of
token t comes from the logits at t-1, so the first token of a sequence never carries loss).
"""

from __future__ import annotations

from pydantic import BaseModel


class TrainingSample(BaseModel):
    """One token sequence of a rollout, with the tokens the model generated marked for the loss."""

    rollout_id: str
    token_ids: list[int]
    loss_mask: list[bool]
    """True for tokens the model generated (completions); False for prompts, tool output, templates."""
    inference_logprobs: list[float]
    """The engine's logprob of each generated token; 0.0 where `loss_mask` is False."""
    advantage: float

    @property
    def loss_tokens(self) -> int:
        return sum(self.loss_mask)


class MicroBatch(BaseModel):
    """Several samples packed into one row; `position_ids` restart at 0 at each sequence start."""

    token_ids: list[int]
    position_ids: list[int]
    loss_mask: list[bool]
    inference_logprobs: list[float]
    advantages: list[float]
    """The sample's advantage repeated over its tokens."""
    sequence_lengths: list[int]
    """Length of each packed sample, in order (they sum to `len(token_ids)`)."""
