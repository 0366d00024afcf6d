"""Truncated importance sampling (TIS): REINFORCE weighted by min(ratio, cap).

The weight corrects for the mismatch between the inference engine and the trainer (different
kernels, one step of off-policy lag) and is capped so one unlikely token cannot dominate. It is a
constant (no gradient through it); the gradient is w * A * grad(logp), written with the
`exp(x - x.detach())` trick so the loss value is -w * A (like PPO's at ratio 1).
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, cap: float = 2.0) -> TokenLossOutput:
    ratio = torch.exp(log_ratio)
    weight = torch.clamp(ratio, max=cap).detach()
    score = torch.exp(log_ratio - log_ratio.detach())  # 1 in value, grad(logp) in gradient
    return TokenLossOutput(loss=-weight * advantages * score, clipped=ratio > cap)
