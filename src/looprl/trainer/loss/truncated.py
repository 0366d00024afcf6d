"""Truncated importance sampling (TIS): REINFORCE weighted by min(ratio, cap).

The weight corrects for the mismatch between the inference engine and the trainer (different
kernels, one step of off-policy lag) and is capped so one unlikely token cannot dominate. It is a
constant (no gradient through it); the gradient is w * A * grad(logp), written with the
`exp(x - x.detach())` trick so the loss value is -w * A (like PPO's at ratio 1).

The default objective: with one optimizer step per batch it is decoupled PPO (clip around the
trainer's weights at the start of the step, which never clips then, times the behaviour correction
against the sampling policy). PPO's clip around the sampling policy instead spends its trust region
on the previous step's update at one step of lag, and gives the tokens that update moved no gradient.
"""

from __future__ import annotations

import torch

from looprl.trainer.loss.policy import TokenLossOutput


def token_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, cap: float = 2.0) -> TokenLossOutput:
    ratio = torch.exp(log_ratio)
    weight = torch.clamp(ratio, max=cap).detach()
    score = torch.exp(log_ratio - log_ratio.detach())  # 1 in value, grad(logp) in gradient
    return TokenLossOutput(loss=-weight * advantages * score, clipped=ratio > cap)
