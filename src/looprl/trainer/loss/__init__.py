"""The trainer's policy-gradient loss: `policy_loss` and its variants.

Per-token objectives (`truncated.token_loss` — the default —, `clipped.token_loss`,
`masked.token_loss`, `cispo.token_loss`) turn the importance ratio exp(logp_trainer - logp_inference) and the advantage
into a loss per token; `gspo.sequence_log_ratio` makes the ratio one per sequence first (GSPO:
the clipped objective on it); a normalisation
(`normalization.per_token` — the default —, `per_sequence`, `constant`) turns a step's loss masks into
per-token weights; `kl.token_kl` is the optional penalty towards a reference model;
`correction.tis` / `correction.mis` are the optional rollout correction (the engine-trainer gap).
"""

from looprl.trainer.loss import cispo, clipped, correction, gspo, kl, masked, normalization, truncated
from looprl.trainer.loss.policy import LossOutput, TokenLoss, TokenLossOutput, policy_loss

__all__ = [
    "LossOutput",
    "TokenLoss",
    "TokenLossOutput",
    "cispo",
    "clipped",
    "correction",
    "gspo",
    "kl",
    "masked",
    "normalization",
    "policy_loss",
    "truncated",
]
