"""CISPO (MiniMax-M1, ScaleRL): clip the importance weight, never the gradient.

w         = clip(ratio, low, high)                  (a constant: stop-gradient)
per_token = -w * A * logp                           (gradient -w * A * grad(logp) on every token)

PPO's clip gives the tokens outside [1 - eps, 1 + eps] no gradient at all, and those are often the
rare "fork" tokens a reasoning policy most needs to learn; CISPO keeps every token's gradient and
only bounds how much one token's weight can grow. The loss is written with the
`exp(x - x.detach())` trick, so its value is -w * A (like PPO's at ratio 1) and its gradient is the
one above. `low` = 0 (no lower clip, as in MiniMax-M1 and TRL's `loss_type="cispo"`) makes it
truncated importance sampling (`truncated`, looprl's default objective, with `high` = its `cap`).
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, low: float = 0.0,
               high: float = 5.0) -> TokenLossOutput:
    ratio = torch.exp(log_ratio)
    weight = torch.clamp(ratio, min=low, max=high).detach()
    score = torch.exp(log_ratio - log_ratio.detach())  # 1 in value, grad(logp) in gradient
    return TokenLossOutput(loss=-weight * advantages * score, clipped=(ratio < low) | (ratio > high))
