"""GSPO (Qwen3): one importance ratio per sequence, clipped per sequence.

s_i       = exp(mean over sequence i's loss tokens of (logp_trainer - logp_inference))
          = the geometric mean of the sequence's token ratios
per_token = -min(s_i * A_i, clip(s_i, 1 - eps_low, 1 + eps_high) * A_i)     (every token of sequence i)

The reward is given per sequence, so GSPO weighs per sequence too: one noisy token ratio no longer
decides a token's gradient, and a sequence is either inside the trust region or not. The gradient of
s_i reaches every token of the sequence (each with weight s_i * A_i / |i|). Because s_i is a mean of
log ratios, its spread is much smaller than a token ratio's: the paper clips at 1 - 3e-4 and 1 + 4e-4.

`policy_loss` applies `sequence_log_ratio` before the PPO clip of `clipped.token_loss` (TRL's
`importance_sampling_level="sequence"` with its clipped loss). A sequence is one sample: one model
call's completion (a multi-turn rollout has one per call).
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.sequences import sequence_mean


def sequence_log_ratio(log_ratio: torch.Tensor, sequences: torch.Tensor) -> torch.Tensor:
    """Each loss token's sequence mean of `log_ratio`; `sequences` is each token's sequence index
    (0, 1, ...), -1 off the loss mask (where the result is 0)."""
    return sequence_mean(log_ratio, sequences)
