"""Truncated importance sampling (TIS): REINFORCE weighted by min(ratio, cap).

per_token = -min(ratio, cap) * A * logp             (the weight is a constant: stop-gradient)

The weight corrects for the mismatch between the inference engine and the trainer (different
kernels, one step of off-policy lag) and is capped so one unlikely token cannot dominate. It is
CISPO's objective with no lower clip (`cispo.token_loss(low=0, high=cap)`): the loss value is
-w * A (like PPO's at ratio 1), the gradient w * A * grad(logp) on every token.

The default objective: with one optimizer step per batch it is decoupled PPO (clip around the
trainer's weights at the start of the step, which never clips then, times the behaviour correction
against the sampling policy). PPO's clip around the sampling policy instead spends its trust region
on the previous step's update at one step of lag, and gives the tokens that update moved no gradient.
"""

from __future__ import annotations

import torch

from looprl.trainer.loss import cispo
from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, cap: float = 2.0) -> TokenLossOutput:
    return cispo.token_loss(log_ratio, advantages, low=0.0, high=cap)
