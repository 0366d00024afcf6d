"""Importance-ratio masking (IcePop / prime-rl / verl's rollout-IS "mask" mode): drop outlier tokens, keep the rest.

per_token = -ratio * A   where low <= ratio <= high,   0 (masked, no gradient) elsewhere

Inside the band the gradient is ratio * A * grad(logp), the importance-weighted policy gradient; the
band is wide (default [0.5, 2]) because the ratio mostly measures how far the previous step moved the
policy (one step of off-policy lag), not noise. PPO's clip at 1 ± 0.2 zeroes the gradient of exactly
the tokens the last step was learning; masking only drops tokens whose sampling policy is too far
from the trainer's to correct for (kernel mismatch, a stale sample).
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, low: float = 0.5,
               high: float = 2.0) -> TokenLossOutput:
    ratio = torch.exp(log_ratio)
    masked = (ratio < low) | (ratio > high)
    return TokenLossOutput(loss=torch.where(masked, torch.zeros_like(ratio), -ratio * advantages), clipped=masked)
