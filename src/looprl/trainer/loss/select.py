"""From the loss configuration to the functions `train_step` takes: the token loss and the normalisation."""

from __future__ import annotations

from functools import partial

from looprl.config import ClippedLoss, LossConfig, MaskedLoss
from looprl.trainer.loss import clipped, masked, normalization, truncated
from looprl.trainer.loss.policy import TokenLoss


def token_loss(config: LossConfig) -> TokenLoss:
    if isinstance(config.ratio, ClippedLoss):
        return partial(clipped.token_loss, eps_low=config.ratio.eps_low, eps_high=config.ratio.eps_high)
    if isinstance(config.ratio, MaskedLoss):
        return partial(masked.token_loss, low=config.ratio.low, high=config.ratio.high)
    return partial(truncated.token_loss, cap=config.ratio.cap)


def normalize(config: LossConfig) -> normalization.Normalization:
    if config.normalization == "constant":
        assert config.normalization_constant is not None  # LossConfig's validator requires it
        return partial(normalization.constant, denominator=config.normalization_constant)
    return getattr(normalization, config.normalization)
