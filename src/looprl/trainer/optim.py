"""AdamW with a linear learning-rate warmup, then a constant, linear or cosine learning rate.

The fused implementation (one kernel over all parameters, on CPU as on GPU) makes the step several
times faster than the per-tensor loop for a model of a few hundred tensors.

A decaying schedule is one of the remedies for a policy that stops exploring (docs/training.md,
"Collapse"): late steps move the policy less, so a run that found a good answer is less likely to
push every reply onto it. The schedule is a `LambdaLR` whose factor is a pure function of the step,
so a checkpoint's scheduler state (the step count) resumes it exactly, and `--resume --max_steps M`
stretches the decay to the new last step.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Literal

import torch

Schedule = Literal["constant", "linear", "cosine"]


def build_optimizer(model: Any, lr: float = 1e-6, weight_decay: float = 0.0,
                    betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> torch.optim.AdamW:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps, fused=True)


def build_scheduler(optimizer: torch.optim.Optimizer, warmup_steps: int = 0, schedule: Schedule = "constant",
                    max_steps: int = 1, min_lr_ratio: float = 0.0) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate of each step, as a factor of the optimizer's lr (`lr_factor`)."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, partial(lr_factor, warmup_steps=warmup_steps,
                                                                schedule=schedule, max_steps=max_steps,
                                                                min_lr_ratio=min_lr_ratio))


def lr_factor(done: int, warmup_steps: int, schedule: Schedule, max_steps: int, min_lr_ratio: float) -> float:
    """The factor of the step after `done` steps: min(1, (done + 1) / warmup_steps) (the first step already
    learns), times the decay. `linear` / `cosine` go from 1 at the end of the warmup to `min_lr_ratio` at
    `max_steps` (the step after the last), along a line / half a cosine wave; `constant` stays at 1."""
    warmup = min(1.0, (done + 1) / max(warmup_steps, 1))
    if schedule == "constant":
        return warmup
    progress = min(1.0, max(0, done - warmup_steps) / max(max_steps - warmup_steps, 1))
    shape = 1 - progress if schedule == "linear" else 0.5 * (1 + math.cos(math.pi * progress))
    return warmup * (min_lr_ratio + (1 - min_lr_ratio) * shape)
