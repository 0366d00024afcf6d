"""The token-level policy-gradient loss of one micro-batch, read top to bottom.

log_ratio = logp_trainer - logp_inference          (the importance ratio, in log space)
          or logp_trainer - logp_old               (with a rollout correction: see `correction`)
log_ratio = its sequence's mean                    (only at sequence level: GSPO, see `gspo`)
per_token = token_loss(log_ratio, advantages)      (a variant: PPO-style clipped, truncated IS, masked IS, CISPO)
          * w                                      (the rollout correction's weight, if any: TIS / MIS)
          + kl_coef * kl(logp_trainer, logp_ref)   (optional, off by default)
          - entropy_coef * entropy                 (the entropy bonus: optional, off by default)
loss      = sum(per_token * weights)               (weights: the normalisation, 0 off the loss mask)

The entropy bonus is the policy's entropy over the whole vocabulary at each loss token, so with the
per-token normalisation the loss falls by entropy_coef times the step's mean entropy: a policy whose
replies have all become alike pays for it and is pushed to keep sampling others (`entropy` has a
gradient only then; with entropy_coef 0 the loss and its cost are exactly those without it).

The weights come from the whole step (see `normalization`), so the sum over a step's micro-batches,
with gradients accumulated, is the step's loss whatever the packing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from looprl.trainer.loss.correction import Correction
from looprl.trainer.loss.gspo import sequence_log_ratio
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
    """The micro-batch's weighted loss (differentiable) and plain sums over its loss tokens (metrics).

    `clipped` counts the loss tokens whose ratio the objective clipped or truncated, `kl` sums their
    reference KL, `truncated` / `masked` count those the rollout correction truncated / masked, and
    `correction_weight` sums its weights: divided by the step's loss tokens they become the step's
    means, whatever the normalisation. `entropy_bonus` is what the entropy bonus took off `loss`
    (already normalised, like `loss`).
    """

    loss: torch.Tensor
    clipped: int
    kl: float
    truncated: int = 0
    masked: int = 0
    correction_weight: float = 0.0
    entropy_bonus: float = 0.0


def policy_loss(
    token_loss: TokenLoss,
    logprobs: torch.Tensor,
    inference_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    sequences: torch.Tensor | None = None,
    sequence_level: bool = False,
    correction: Correction | None = None,
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
) -> LossOutput:
    """The loss of one micro-batch; every tensor has the same shape (one entry per token).

    `sequences` is each token's sequence index (default: the whole micro-batch is one sequence);
    `sequence_level` makes the objective's ratio one per sequence (GSPO); `entropy` (differentiable)
    with `entropy_coef` > 0 adds the entropy bonus.
    """
    on_mask = weights != 0
    zeros = torch.zeros_like(logprobs)
    sequences = torch.where(on_mask, 0 if sequences is None else sequences, -1)
    behaviour = inference_logprobs if correction is None else logprobs.detach()
    log_ratio = torch.where(on_mask, logprobs - behaviour, zeros)
    if sequence_level:
        log_ratio = sequence_log_ratio(log_ratio, sequences)
    out = token_loss(log_ratio, advantages)
    per_token = out.loss
    corrected = None
    if correction is not None:
        corrected = correction(torch.where(on_mask, logprobs.detach() - inference_logprobs, zeros), sequences)
        per_token = per_token * corrected.weight
    kl_sum = 0.0
    if ref_logprobs is not None and kl_coef:
        kl = torch.where(on_mask, token_kl(logprobs, ref_logprobs), zeros)
        per_token = per_token + kl_coef * kl
        kl_sum = float(kl.detach()[on_mask].sum())
    bonus = 0.0
    if entropy is not None and entropy_coef:
        bonus_per_token = torch.where(on_mask, entropy_coef * entropy, zeros)
        per_token = per_token - bonus_per_token
        bonus = float((bonus_per_token.detach() * weights).sum())
    result = LossOutput(loss=(per_token * weights).sum(), clipped=int(out.clipped[on_mask].sum()), kl=kl_sum,
                        entropy_bonus=bonus)
    if corrected is not None:
        result.truncated = int(corrected.truncated[on_mask].sum())
        result.masked = int(corrected.masked[on_mask].sum())
        result.correction_weight = float(corrected.weight[on_mask].sum())
    return result
