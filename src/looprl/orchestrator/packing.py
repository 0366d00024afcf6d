"""Packing training samples into micro-batches by token budget.

First-fit decreasing: samples sorted longest first, each into the first micro-batch with room, so
micro-batches come out nearly full and few. One packed row per micro-batch (no padding); the trainer
passes restarting `position_ids`, which makes attention block-diagonal, so packed samples never see
each other. A sample longer than the budget gets a micro-batch of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from looprl.orchestrator.types import MicroBatch, TrainingSample


def pack(samples: Sequence[TrainingSample], token_budget: int) -> list[MicroBatch]:
    bins: list[list[TrainingSample]] = []
    sizes: list[int] = []
    for sample in sorted(samples, key=lambda s: len(s.token_ids), reverse=True):
        n = len(sample.token_ids)
        for i, size in enumerate(sizes):
            if size + n <= token_budget:
                bins[i].append(sample)
                sizes[i] += n
                break
        else:
            bins.append([sample])
            sizes.append(n)
    return [micro_batch(b) for b in bins]


def micro_batch(samples: Sequence[TrainingSample]) -> MicroBatch:
    """Concatenate `samples` into one packed row."""
    batch = MicroBatch(token_ids=[], position_ids=[], loss_mask=[], inference_logprobs=[], advantages=[],
                       sequence_lengths=[])
    for s in samples:
        n = len(s.token_ids)
        batch.token_ids += s.token_ids
        batch.position_ids += list(range(n))
        batch.loss_mask += [False] + s.loss_mask[1:]  # nothing predicts a sequence's first token
        batch.inference_logprobs += s.inference_logprobs
        batch.advantages += [s.advantage] * n
        batch.sequence_lengths.append(n)
    return batch
