"""The orchestrator's side of the prompt ledger (`looprl.store.ledger`): draws, outcomes, resume.

Durable in step with the checkpoint: a draw is stored before its group starts, and a step's outcomes
before its batch is handed to the trainer, so checkpoint K implies the ledger holds every outcome of
steps 1..K. `--resume` from K first marks everything later as undone (`RunStoreWriter.delete_steps_after`);
`resume_order` then starts the example order at the first position without a settled draw and passes
over the later ones that have one. The groups in flight at a crash are so drawn again; prime-rl's and
NeMo-RL's cursors (and looprl's before the ledger) skipped them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from looprl.envs.types import Example, RolloutResult
from looprl.orchestrator.example_order import Draw, ExampleOrder
from looprl.session.advantages import GroupAdvantages
from looprl.session.groups import new_id
from looprl.store.ledger import SETTLED, LedgerEntry, live
from looprl.store.writer import RunStoreWriter


def resume_order(examples: Sequence[Example], seed: int, entries: Sequence[LedgerEntry],
                 sampler: dict[str, Any] | None) -> ExampleOrder:
    """The example order a (resumed) run goes on with, from its ledger after the resume's undo.

    Without ledger rows (a new run, or one from before the ledger) it starts at the checkpoint's
    saved position `sampler` (or the beginning)."""
    if not entries:
        return ExampleOrder(examples, seed, sampler)
    settled = {(e.epoch - 1, e.position) for e in live(entries) if e.outcome in SETTLED}
    drawn = {(e.epoch - 1, e.position) for e in entries}
    open_ = sorted(drawn - settled)
    if open_:
        start = open_[0]
    else:
        epoch, position = max(drawn)
        start = (epoch, position + 1)
    return ExampleOrder(examples, seed, {"epoch": start[0], "position": start[1]},
                        done={p for p in settled if p > start})


def outcome(adv: GroupAdvantages, results: Sequence[RolloutResult], trained: bool,
            filtered: bool, rolled_back: bool = False) -> tuple[str, str | None]:
    """A landed, fresh group's ledger outcome and reason. `trained`: its samples are in the batch;
    `filtered`: dynamic sampling left it out; `rolled_back`: collapse recovery rolled the weights back at
    this step, so nothing the collapsed policy sampled trains."""
    if adv.failed:
        reasons = sorted({r.termination_reason for r in results if not r.scored})
        failed = sum(not r.scored for r in results)
        return "failed", f"{failed} of {len(results)} rollouts failed: {', '.join(reasons)}"
    if trained:
        return "trained", None
    why = ("every reply with a learning signal was cut off by a length limit (orchestrator.mask_truncated)"
           if adv.skipped and adv.masked else "no signal" if adv.skipped else
           "collapse recovery rolled the weights back at this step" if rolled_back else
           "no trainable model calls")
    return ("filtered" if filtered else "skipped"), why


def stale_why(version: int, step: int, max_lag: int, floor: int) -> str:
    """Why a group that landed for `step` was too old to train: its oldest token's weights `version` were more
    than `max_lag` behind, or came before the weights a collapse recovery's rollback put back at step `floor`."""
    if version < floor:
        return f"sampled by weights {version}, before the collapse recovery's rollback at step {floor}"
    return f"its oldest token from weights {version}, more than {max_lag} behind step {step}"


class PromptLedger:
    """Draws examples from `order`, recording each in the store before its group starts."""

    def __init__(self, writer: RunStoreWriter, run_id: str, order: ExampleOrder) -> None:
        self.writer, self.run_id, self.order = writer, run_id, order
        self._writes: set[asyncio.Future[None]] = set()
        """Draws being stored: a group cancelled meanwhile does not stop its row (`cancel` waits for them)."""

    async def draw(self) -> tuple[Draw, str]:
        """The next example and the group id its rollouts get (the ledger row's key)."""
        draw, group_id = self.order.draw(), new_id()
        entry = LedgerEntry(group_id=group_id, epoch=draw.epoch + 1, position=draw.position,
                            example_id=draw.example.id, epoch_size=len(self.order.examples), drawn_at=time.time())
        write = asyncio.ensure_future(asyncio.to_thread(self.writer.record_draws, self.run_id, [entry]))
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)
        await asyncio.shield(write)
        return draw, group_id

    async def settle(self, step: int, outcomes: Sequence[tuple[str, str, str | None]]) -> None:
        """Record `(group_id, outcome, reason)` of the groups step `step` took."""
        await asyncio.to_thread(self.writer.settle_draws, self.run_id,
                                [(group_id, what, step, reason) for group_id, what, reason in outcomes])

    async def cancel(self, reason: str) -> None:
        """Mark the draws still in flight `cancelled` (their groups were stopped: the run ended or failed)."""
        await asyncio.gather(*self._writes, return_exceptions=True)
        await asyncio.to_thread(self.writer.cancel_draws, self.run_id, reason)
