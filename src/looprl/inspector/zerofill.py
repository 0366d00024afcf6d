"""Which reward components each rollout lacks, and per-step reward statistics, cached.

The store keeps reward components exactly as the env emitted them. A component that other rollouts of
the same scope emitted and this one did not was zero-filled by the orchestrator (it counted as 0); the
inspector marks it. The scope is the step and split in an `rl` run (the orchestrator zero-fills per
batch) and the whole split in an `eval` run. Failed rollouts (no aggregated reward) were not scored,
so nothing is zero-filled for them.

Scanning reward JSON is costly on large stores, so answers are cached per run, split (and step) and
recomputed only when that scope's rollout count changes (runs being written grow).
"""

from __future__ import annotations

import threading
from typing import Any

from looprl.inspector.catalog import RunRef
from looprl.inspector.models import RolloutRow
from looprl.store.reader import RunStoreReader
from looprl.store.records import RolloutRecord


class ZeroFill:
    """Component scopes and per-step statistics, cached by (run, split, rollout count)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._split_components: dict[tuple[str, str], tuple[int, list[str]]] = {}
        self._step_components: dict[tuple[str, str, int], tuple[int, list[str]]] = {}
        self._step_rewards: dict[tuple[str, str], tuple[int, list[dict[str, Any]]]] = {}

    def rows(self, r: RunStoreReader, ref: RunRef, records: list[RolloutRecord]) -> list[RolloutRow]:
        """Table rows for `records`, each with the components it was zero-filled on."""
        kind = r.run(ref.run_id).kind
        scopes: dict[tuple[str, int], list[str]] = {}
        for split in {rec.split for rec in records}:
            if kind == "rl":
                steps = sorted({rec.step for rec in records if rec.split == split})
                for step, names in self._steps(r, ref, split, steps).items():
                    scopes[(split, step)] = names
            else:
                names = self._whole_split(r, ref, split)
                scopes.update({(split, rec.step): names for rec in records if rec.split == split})
        return [_row(rec, [] if rec.reward is None else
                     [c for c in scopes.get((rec.split, rec.step), []) if c not in rec.rewards]) for rec in records]

    def step_rewards(self, r: RunStoreReader, ref: RunRef, split: str, count: int) -> list[dict[str, Any]]:
        """`RunStoreReader.step_rewards`, recomputed only when the split's rollout count changed."""
        key = (ref.id, split)
        with self._lock:
            hit = self._step_rewards.get(key)
        if hit and hit[0] == count:
            return hit[1]
        value = r.step_rewards(ref.run_id, split)
        with self._lock:
            self._step_rewards[key] = (count, value)
        return value

    def _steps(self, r: RunStoreReader, ref: RunRef, split: str, steps: list[int]) -> dict[int, list[str]]:
        """Component names per step, recomputed only for steps whose rollout count changed."""
        counts = r.step_counts(ref.run_id, split, steps)
        with self._lock:
            stale = [s for s in steps if self._step_components.get((ref.id, split, s), (None,))[0] != counts.get(s)]
        fresh = r.reward_components(ref.run_id, split, stale) if stale else {}
        with self._lock:
            for step in stale:
                self._step_components[(ref.id, split, step)] = (counts.get(step, 0), fresh.get(step, []))
            return {s: self._step_components[(ref.id, split, s)][1] for s in steps}

    def _whole_split(self, r: RunStoreReader, ref: RunRef, split: str) -> list[str]:
        count = r.rollout_counts(ref.run_id).get(split, 0)
        key = (ref.id, split)
        with self._lock:
            hit = self._split_components.get(key)
        if hit and hit[0] == count:
            return hit[1]
        names = r.reward_components(ref.run_id, split).get(-1, [])
        with self._lock:
            self._split_components[key] = (count, names)
        return names


def _row(rec: RolloutRecord, zero_filled: list[str]) -> RolloutRow:
    return RolloutRow(
        rollout_id=rec.rollout_id, step=rec.step, split=rec.split, example_id=rec.example_id,
        group_id=rec.group_id, termination_reason=rec.termination_reason, error=rec.error, rewards=rec.rewards,
        zero_filled=zero_filled, reward=rec.reward, advantage=rec.advantage, turns=rec.turns,
        tool_calls=rec.tool_calls, prompt_tokens=rec.prompt_tokens, completion_tokens=rec.completion_tokens,
        started_at=rec.started_at, duration_s=rec.duration_s, log_count=rec.log_count,
        max_log_level=rec.max_log_level)
