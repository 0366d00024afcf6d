"""Per-sequence sums and means of per-token values in a packed row, broadcast back to the tokens.

`sequences` holds each token's sequence index (0, 1, ...) and -1 on tokens that belong to none or
carry no loss; those get 0. Sequence-level objectives (GSPO) and corrections (sequence TIS / MIS)
use them.
"""

from __future__ import annotations

import torch


def _sums(values: torch.Tensor, sequences: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    on = sequences >= 0
    index = torch.where(on, sequences, torch.zeros_like(sequences))
    count = int(sequences.max()) + 1 if bool(on.any()) else 1
    zeros = torch.zeros(count, dtype=values.dtype, device=values.device)
    sums = zeros.index_add(0, index, torch.where(on, values, torch.zeros_like(values)))
    tokens = zeros.index_add(0, index, on.to(values.dtype))
    return sums, tokens, index


def sequence_sum(values: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
    """Each token's sum of `values` over its sequence (0 off the sequences)."""
    sums, _, index = _sums(values, sequences)
    return torch.where(sequences >= 0, sums[index], torch.zeros_like(values))


def sequence_mean(values: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
    """Each token's mean of `values` over its sequence (0 off the sequences)."""
    sums, tokens, index = _sums(values, sequences)
    return torch.where(sequences >= 0, (sums / tokens.clamp(min=1))[index], torch.zeros_like(values))
