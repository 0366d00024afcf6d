"""The token-level policy-gradient loss of one micro-batch, read top to bottom.

log_ratio = logp_trainer - logp_inference          (the importance ratio, in log space)
per_token = token_loss(log_ratio, advantages)      (a variant: PPO-style clipped, or truncated IS)
          + kl_coef * kl(logp_trainer, logp_ref)   (optional, off by default)
loss      = sum(per_token * weights)               (weights: the normalisation, 0 off the loss mask)

The weights come from the whole step (see `normalization`), so the sum over a step's micro-batches,
with gradients accumulated, is the step's loss whatever the packing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from looprl.trainer.loss.kl import token_kl


@dataclass
class TokenLossOutput:
    """A variant's per-token loss and where its ratio was clipped or truncated (bool, same shape)."""

    loss: torch.Tensor
    clipped: torch.Tensor


TokenLoss = Callable[[torch.Tensor, torch.Tensor], TokenLossOutput]
"""`(log_ratio, advantages) -> TokenLossOutput`; a variant's `token_loss` with its settings bound."""


@dataclass
class LossOutput:
    """The micro-batch's weighted loss (differentiable) and its weighted sums for metrics (floats).

    `clipped_frac` and `kl` are weighted like the loss, so summing them over a step's micro-batches
    gives the step's fraction of clipped tokens and mean reference KL.
    """

    loss: torch.Tensor
    clipped_frac: float
    kl: float


def policy_loss(
    token_loss: TokenLoss,
    logprobs: torch.Tensor,
    inference_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> LossOutput:
    """The loss of one micro-batch; every tensor has the same shape (one entry per token)."""
    on_mask = weights != 0
    log_ratio = torch.where(on_mask, logprobs - inference_logprobs, torch.zeros_like(logprobs))
    out = token_loss(log_ratio, advantages)
    per_token = out.loss
    kl_sum = 0.0
    if ref_logprobs is not None and kl_coef:
        kl = torch.where(on_mask, token_kl(logprobs, ref_logprobs), torch.zeros_like(logprobs))
        per_token = per_token + kl_coef * kl
        kl_sum = float((kl.detach() * weights).sum())
    return LossOutput(
        loss=(per_token * weights).sum(),
        clipped_frac=float((out.clipped.float() * weights).sum()),
        kl=kl_sum,
    )
