"""Packed micro-batches: what the trainer trains on, laid out as prompt trees.

Produced by the orchestrator (`orchestrator.packing`, from the step's training samples) and carried
to the trainer in `steps/step_N/batch.json` (`TrainBatch`); consumed by the trainer's train step and
logprob pass. Plain pydantic models (JSON on the wire), no torch.

Every per-token list is aligned with `token_ids`: entry t describes token t (the trainer's logprob of
token t comes from the logits at t-1, so the first token of a sequence never carries loss).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from pydantic import BaseModel


class Tree(BaseModel):
    """Samples laid out in a packed row: a prefix once, then each sample's continuation after it.

    Produced by orchestrator packing, consumed by the trainer (attention mask, loss spans). Samples
    of a GRPO group share their prompt, so the prompt is computed once and each sibling's completion
    attends to it (`branches` are the continuations' lengths). A sample that shares its prompt with
    no other is a tree with no branches: `prefix` is the whole sample.
    """

    prefix: int
    branches: list[int] = []
    rollout_ids: list[str] = []
    """The rollout of each branch, in order; a tree with no branches has one, its sample's. Packing
    always fills it (so the trainer can report per rollout); it is empty only for a row laid out by
    hand, such as one sequence scored on its own."""
    samples: list[int] = []
    """Which of its rollout's samples each of `rollout_ids` is (0, 1, ...: call order), so the trainer
    can put a rollout's loss tokens back in call order when its samples land in different rows; empty
    means all 0."""

    @property
    def length(self) -> int:
        return self.prefix + sum(self.branches)


class Segment(NamedTuple):
    """A contiguous run of a packed row: tree `tree`'s prefix (`branch` 0) or its branch `branch` (1..)."""

    tree: int
    branch: int
    start: int
    end: int


def row_segments(trees: Sequence[Tree]) -> list[Segment]:
    """The segments of a row laid out as `trees`, in order: each tree's prefix, then its branches."""
    segments, offset = [], 0
    for t, tree in enumerate(trees):
        segments.append(Segment(t, 0, offset, offset + tree.prefix))
        offset += tree.prefix
        for b, n in enumerate(tree.branches, 1):
            segments.append(Segment(t, b, offset, offset + n))
            offset += n
    return segments


def sample_segments(trees: Sequence[Tree]) -> list[Segment]:
    """The segments that are one sample's own tokens, in order: a lone sample whole, each branch of a
    shared prompt (the prompt carries no loss and belongs to no one sample)."""
    return [seg for seg in row_segments(trees) if seg.branch or not trees[seg.tree].branches]


def sample_owner(tree: Tree, seg: Segment) -> tuple[str, int] | None:
    """`(rollout id, index among its rollout's samples)` of a sample segment of `tree`, or None for a
    row laid out by hand (no rollout ids)."""
    i = max(seg.branch - 1, 0)
    if i >= len(tree.rollout_ids):
        return None
    return tree.rollout_ids[i], tree.samples[i] if tree.samples else 0


class MicroBatch(BaseModel):
    """Trees of samples packed into one row (the trainer's attention mask keeps them apart).

    Produced by orchestrator packing; consumed by the trainer, one forward/backward pass each.
    Position ids restart at 0 at each tree and continue from the prefix's length in each branch, so
    every sample sees exactly the positions it had at generation.
    """

    token_ids: list[int]
    position_ids: list[int]
    loss_mask: list[bool]
    inference_logprobs: list[float]
    advantages: list[float]
    """The sample's advantage repeated over its tokens (0 over a shared prefix, which has no loss)."""
    trees: list[Tree]
    """The row's trees, in order (their lengths sum to `len(token_ids)`)."""
