"""Rollout correction: importance weights for the gap between the engine that sampled and the trainer.

The engine's logprobs (`logp_engine`) and the trainer's for the same tokens differ: other kernels
(bf16 vLLM against an fp32 lm_head grows it on GPUs) and, at lag >= 1, the weights moved since. The
correction measures it with the trainer's own logprobs before the step's update (`logp_old`,
no gradient; at lag 0 exactly the weights that sampled):

rho_t = exp(logp_old_t - logp_engine_t)            (token level)
rho_i = exp(sum over sequence i of (logp_old_t - logp_engine_t)) = prod of rho_t  (sequence level)

- TIS (truncated IS):  w = min(rho, cap)
- MIS (masked IS):     w = rho inside [low, high], 0 outside (the token, or the whole sequence, is dropped)

It is separate from the objective (as verl's `rollout_corr` and prime-rl): with a correction, the
objective's ratio is taken against `logp_old` instead of the engine's (1 in value at one optimizer
step per batch, so the objective clips nothing it should not), and each token's loss is multiplied
by w, a constant (decoupled PPO). Without one (the default), the objective's ratio against the
engine's logprobs is the only correction, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from looprl.trainer.loss.sequences import sequence_sum

Level = Literal["token", "sequence"]


@dataclass
class CorrectionOutput:
    """Each token's weight (no gradient), and where it was truncated or masked (bool, same shape)."""

    weight: torch.Tensor
    truncated: torch.Tensor
    masked: torch.Tensor


Correction = Callable[[torch.Tensor, torch.Tensor], CorrectionOutput]
"""`(log_rho, sequences) -> CorrectionOutput`: `tis` or `mis` with its settings bound; `log_rho` is
logp_old - logp_engine per token (0 off the loss mask), `sequences` each token's sequence index (-1 off)."""


def _log_ratio(log_rho: torch.Tensor, sequences: torch.Tensor, level: Level) -> torch.Tensor:
    return sequence_sum(log_rho, sequences) if level == "sequence" else log_rho


def tis(log_rho: torch.Tensor, sequences: torch.Tensor, cap: float = 2.0, level: Level = "token") -> CorrectionOutput:
    rho = torch.exp(_log_ratio(log_rho.detach(), sequences, level))
    truncated = rho > cap
    return CorrectionOutput(weight=torch.clamp(rho, max=cap), truncated=truncated, masked=torch.zeros_like(truncated))


def mis(log_rho: torch.Tensor, sequences: torch.Tensor, low: float = 0.5, high: float = 2.0,
        level: Level = "token") -> CorrectionOutput:
    rho = torch.exp(_log_ratio(log_rho.detach(), sequences, level))
    masked = (rho < low) | (rho > high)
    return CorrectionOutput(weight=torch.where(masked, torch.zeros_like(rho), rho), truncated=torch.zeros_like(masked),
                            masked=masked)
