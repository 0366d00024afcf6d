"""The trainer's logprob of every loss token, per rollout, for the step's report
(`TrainerReport.rollout_logprobs`, which the inspector's token view sets beside the engine's).

Taken from the step's own teacher-forced passes (no extra forward): the values the loss used, under
the weights before the update. Each of a row's sample segments (a lone sample, a branch of a shared
prompt) belongs to one rollout and is its k-th sample (`Tree.rollout_ids`, `Tree.samples`). A rollout
whose samples land in different rows, or on different ranks (`gather` merges them on rank 0), gets
its values back in sample order, which is call order.
"""

from __future__ import annotations

import torch

from looprl.handoff import MicroBatch, sample_owner, sample_segments
from looprl.trainer.parallel import Ranks, gather_objects

Pieces = dict[str, dict[int, list[float]]]
"""rollout id -> sample index -> its loss tokens' logprobs."""


class RolloutLogprobs:
    """Collects the loss tokens' logprobs of the micro-batches one rank computes."""

    def __init__(self) -> None:
        self.pieces: Pieces = {}

    def add(self, mb: MicroBatch, values: torch.Tensor) -> None:
        """`values`: the logprobs of `mb`'s loss tokens, in row order (the pass's logprobs at its loss mask)."""
        flat = values.float().cpu().tolist()
        start = 0
        for seg in sample_segments(mb.trees):
            n = sum(mb.loss_mask[seg.start:seg.end])
            owner = sample_owner(mb.trees[seg.tree], seg)
            if owner is not None:
                self.pieces.setdefault(owner[0], {})[owner[1]] = flat[start:start + n]
            start += n

    def gather(self, ranks: Ranks) -> dict[str, list[float]] | None:
        """Every rank's values per rollout, in sample order, on rank 0 (None on the others); a collective."""
        shares = gather_objects(self.pieces, ranks)
        if shares is None:
            return None
        merged: Pieces = {}
        for share in shares:
            for rollout, pieces in share.items():
                merged.setdefault(rollout, {}).update(pieces)
        return {rollout: [v for k in sorted(pieces) for v in pieces[k]] for rollout, pieces in merged.items()}
