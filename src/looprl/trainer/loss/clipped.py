"""PPO-style clipped objective (GRPO, DAPO's asymmetric "clip higher").

per_token = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)

Where the clipped term is the smaller one the token contributes no gradient: the update cannot push
the ratio further outside the trust region in the direction the advantage favours.
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float = 0.2,
               eps_high: float = 0.2) -> TokenLossOutput:
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    return TokenLossOutput(loss=-torch.minimum(unclipped, clipped), clipped=clipped < unclipped)
