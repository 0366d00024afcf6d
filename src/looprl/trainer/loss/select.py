"""From the loss configuration to what `train_step` takes: the token loss, the normalisation, the correction."""

from __future__ import annotations

from functools import partial

from looprl.config import CispoLoss, ClippedLoss, GspoLoss, LossConfig, MaskedLoss, MisCorrection
from looprl.trainer.loss import cispo, clipped, correction, masked, normalization, truncated
from looprl.trainer.loss.policy import TokenLoss


def token_loss(config: LossConfig) -> TokenLoss:
    ratio = config.ratio
    if isinstance(ratio, ClippedLoss | GspoLoss):  # GSPO: the PPO clip on a sequence-level ratio
        return partial(clipped.token_loss, eps_low=ratio.eps_low, eps_high=ratio.eps_high)
    if isinstance(ratio, MaskedLoss):
        return partial(masked.token_loss, low=ratio.low, high=ratio.high)
    if isinstance(ratio, CispoLoss):
        return partial(cispo.token_loss, low=ratio.low, high=ratio.high)
    return partial(truncated.token_loss, cap=ratio.cap)


def sequence_level(config: LossConfig) -> bool:
    """Whether the ratio is one per sequence (GSPO) rather than one per token."""
    return isinstance(config.ratio, GspoLoss)


def rollout_correction(config: LossConfig) -> correction.Correction | None:
    c = config.correction
    if c is None:
        return None
    if isinstance(c, MisCorrection):
        return partial(correction.mis, low=c.low, high=c.high, level=c.level)
    return partial(correction.tis, cap=c.cap, level=c.level)


def normalize(config: LossConfig) -> normalization.Normalization:
    if config.normalization == "constant":
        assert config.normalization_constant is not None  # LossConfig's validator requires it
        return partial(normalization.constant, denominator=config.normalization_constant)
    return getattr(normalization, config.normalization)
