"""Collapse recovery by rollback, the trainer's side (`[orchestrator.collapse] method = "rollback"`, or
`"temperature"` with `escalate`, which rolls back once raising the temperature brought no signal back).

The orchestrator marks each batch `explored` when most of its groups had signal, and `rollback` when its watch saw
the policy stop exploring (`session.collapse_recovery` says why a lower learning rate is the way back). Before
training an explored batch the trainer copies the trainable weights that sampled it (at one step of lag or none,
the weights it holds then; each rank its own shards, on the CPU); on a rollback batch it copies them back (with
`rollback_to = "start"` the copy is the run's first weights, never replaced) instead of training, zeroes AdamW's
momentum (it points the way the policy collapsed) and multiplies the learning rate by `lr_factor`, then broadcasts
as for any step. AdamW's second moment and step count stay: dropped with the momentum (as until 2026-12-06), the
next update is the learning rate times the gradient's sign for every weight, the largest step of the run, and on
large_number the restored policy swung to the other answer within a few steps; kept, the momentum grows back
from zero over about ten steps at the scale the run had, a warm-up of its own (docs/benchmarks.md).

The factor lives in the scheduler's base learning rates, so a checkpoint keeps it; the copy does not (a resumed run
starts a new one from the weights it resumed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from looprl.handoff import TrainBatch


def _local(param: torch.Tensor) -> torch.Tensor:
    """The part of a parameter this rank holds (an FSDP2 shard's local tensor, or the tensor itself)."""
    to_local = getattr(param, "to_local", None)
    return to_local() if callable(to_local) else param


class Rollback:
    def __init__(self, model: Any, lr_factor: float, follow_explored: bool = True) -> None:
        self.lr_factor = lr_factor
        """The learning rate is multiplied by this at each rollback (`orchestrator.collapse.lr_factor`)."""
        self.follow_explored = follow_explored
        """Whether an `explored` batch's weights replace the copy (`rollback_to = "explored"`); else the copy stays
        the run's first weights (`"start"`)."""
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.kept: list[torch.Tensor] = []
        self.keep()

    @torch.no_grad()
    def keep(self) -> None:
        """Copy the trainable weights as they are now (into the same CPU buffers after the first time)."""
        if not self.kept:
            self.kept = [torch.empty_like(_local(p), device="cpu") for p in self.params]
        for kept, p in zip(self.kept, self.params):
            kept.copy_(_local(p))

    @torch.no_grad()
    def restore(self, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler) -> None:
        """The kept weights back, AdamW's momentum zeroed (its second moment and step count kept), the learning rate
        times `lr_factor` from now on."""
        for kept, p in zip(self.kept, self.params):
            _local(p).copy_(kept)
        for state in optimizer.state.values():
            if "exp_avg" in state:
                state["exp_avg"].zero_()
        scheduler.base_lrs = [lr * self.lr_factor for lr in scheduler.base_lrs]
        for group in optimizer.param_groups:
            group["lr"] *= self.lr_factor

    def before_step(self, batch: TrainBatch, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, begin_change: Callable[[], None]) -> bool:
        """What `batch` asks before its step: a `rollback` batch puts the kept weights back (True: the orchestrator
        sent nothing to train; `begin_change` runs first, the weights change outside an optimizer step); an
        `explored` one has its weights kept, as the last ones a rollback may go back to."""
        if batch.rollback:
            begin_change()
            self.restore(optimizer, scheduler)
            return True
        if batch.explored and self.follow_explored:
            self.keep()
        return False
