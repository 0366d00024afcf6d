"""The prompt ledger: every training example a run drew, with its epoch and what became of it.

A *draw* is one group of sibling rollouts of one example, identified by its `group_id` (the
`rollouts.group_id` of its rollouts). The orchestrator records a draw when the group starts
(`in_flight`) and settles it in the step that takes it:

- `trained`: its samples were in step N's batch;
- `skipped`: it landed in step N but carried no signal (every rollout scored alike), so nothing trained;
- `filtered`: the same, under dynamic sampling, which replaced it by another group;
- `stale`: it started on weights more than `max_off_policy_steps` behind step N and was dropped;
- `failed`: its rollouts failed (all of them, or one under `orchestrator.failed_group = "drop"`);
  `reason` holds the termination reasons;
- `cancelled`: the run ended (or stopped on an error) while it generated.

A resume from checkpoint K (`--resume`) cannot keep what happened after K: the trainer's weights of
later steps are lost, and the store forgets their rows. So every draw settled after K, or not settled
at all (in flight at the crash, or cancelled), is *undone*: `undone_at` is set to K and the row stays,
so the ledger says honestly that the example was trained in step 7, then retrained after the resume
from step 5. The resumed run draws every example whose draws are all undone again, in the epoch's
order, before it goes on (`looprl.orchestrator.ledger`): within an epoch no example is skipped, and
none is trained twice except where an undone draw says why.

`coverage` reduces the rows to a line per epoch (`looprl metrics`, the inspector's run page).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

SETTLED: frozenset[str] = frozenset({"trained", "skipped", "filtered", "stale", "failed"})
"""Outcomes that consume the example for its epoch (a resume keeps those of steps up to its checkpoint)."""


@dataclass
class LedgerEntry:
    """One row of `ledger`."""

    group_id: str
    epoch: int
    """1 = the first pass over the train split."""
    position: int
    """Index of the example in the epoch's shuffled order (0-based)."""
    example_id: str
    epoch_size: int
    """Examples in the split (so a reader can say how much of an epoch is covered)."""
    drawn_at: float
    outcome: str = "in_flight"
    step: int | None = None
    """The step that settled it (None in flight and when cancelled)."""
    reason: str | None = None
    """Why it was not trained: termination reasons of its failures, `no signal`, ..."""
    undone_at: int | None = None
    """K when a resume from checkpoint K undid it (its outcome came after K, or it never settled)."""


@dataclass
class EpochCoverage:
    """What became of one epoch's examples, counting each example by its live (not undone) draw."""

    epoch: int
    size: int
    outcomes: dict[str, int] = field(default_factory=dict)
    """Live draws per outcome."""
    retrained: int = 0
    """Examples trained in a draw a resume undid, and trained again after it."""
    redrawn: int = 0
    """Examples drawn again after a resume undid a draw that had not trained (in flight, or dropped after K)."""
    resumed_from: list[int] = field(default_factory=list)
    """The checkpoint steps of the resumes that undid draws of this epoch."""
    repeated: int = 0
    """Examples with more than one live settled draw: never expected (the kill test asserts 0)."""

    @property
    def drawn(self) -> int:
        return sum(self.outcomes.values())

    def line(self) -> str:
        """`epoch 2: 312/500 examples trained, 4 dropped stale, 11 filtered, 2 failed, 6 in flight`."""
        o = self.outcomes
        parts = [f"epoch {self.epoch}: {o.get('trained', 0)}/{self.size} examples trained"]
        for outcome, words in (("skipped", "skipped (no signal)"), ("filtered", "filtered"),
                               ("stale", "dropped stale"), ("failed", "failed"), ("in_flight", "in flight"),
                               ("cancelled", "cancelled at the end")):
            if o.get(outcome):
                parts.append(f"{o[outcome]} {words}")
        if self.drawn < self.size:
            parts.append(f"{self.size - self.drawn} not drawn yet")
        if self.retrained or self.redrawn:
            after = ", ".join(map(str, self.resumed_from))
            parts.append(f"{self.retrained} retrained and {self.redrawn} redrawn after resume from step {after}")
        if self.repeated:
            parts.append(f"{self.repeated} trained more than once")
        return ", ".join(parts)


def live(entries: Iterable[LedgerEntry]) -> list[LedgerEntry]:
    """The draws no resume undid."""
    return [e for e in entries if e.undone_at is None]


def coverage(entries: Sequence[LedgerEntry]) -> list[EpochCoverage]:
    """Per epoch, in order: outcomes of the live draws, and what resumes undid and redid."""
    epochs: dict[int, EpochCoverage] = {}
    by_position: dict[tuple[int, int], list[LedgerEntry]] = {}
    for e in entries:
        epochs.setdefault(e.epoch, EpochCoverage(e.epoch, e.epoch_size))
        by_position.setdefault((e.epoch, e.position), []).append(e)
    for (epoch, _), draws in by_position.items():
        cov = epochs[epoch]
        current = live(draws)
        counted = Counter(d.outcome for d in current)
        for outcome, n in counted.items():
            cov.outcomes[outcome] = cov.outcomes.get(outcome, 0) + n
        cov.repeated += sum(counted[o] for o in SETTLED) > 1
        undone = [d for d in draws if d.undone_at is not None]
        if undone and current:
            if any(d.outcome == "trained" for d in undone) and counted["trained"]:
                cov.retrained += 1
            else:
                cov.redrawn += 1
        for k in {d.undone_at for d in undone if d.undone_at is not None} - set(cov.resumed_from):
            cov.resumed_from.append(k)
    for cov in epochs.values():
        cov.resumed_from.sort()
    return [epochs[e] for e in sorted(epochs)]
