"""How a step's per-token losses are averaged: per-token weights from the step's loss masks.

Each function takes the loss mask of every sequence of the step (one 1-D bool tensor per sequence)
and returns one weight tensor per sequence, 0 off the mask:

- `per_token` (default, DAPO): every loss token of the step weighs the same, 1 / (loss tokens in step).
- `per_sequence` (GRPO): each sequence's mean, then the mean over sequences,
  1 / (sequences * loss tokens of the sequence).
- `constant` (Dr. GRPO): 1 / `denominator`, e.g. sequences * max completion length, so the loss
  scale does not depend on how long the sampled completions happened to be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

Normalization = Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]
"""One of this module's functions: the step's loss masks -> one weight tensor per sequence."""


def per_token(masks: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    total = max(sum(int(m.sum()) for m in masks), 1)
    return [m.float() / total for m in masks]


def per_sequence(masks: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [m.float() / (len(masks) * max(int(m.sum()), 1)) for m in masks]


def constant(masks: Sequence[torch.Tensor], denominator: float) -> list[torch.Tensor]:
    return [m.float() / denominator for m in masks]
