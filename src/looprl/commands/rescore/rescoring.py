"""Re-running an env's reward hooks on stored rollouts: what `looprl rescore` computes.

Each stored group is re-scored as it ran: `compute_reward` on every sibling, then
`compute_group_rewards` on those still scored, with the runtime's own error handling (a hook that
raises settles its rollout as `reward_error` / `group_reward_error`) and the hooks' log records
captured per rollout. Totals and advantages then follow the run's own rule
(`session.advantages`). Rollouts that failed before they could be scored (a model or tool
error, a timeout) are left as they were; those whose reward hook failed are scored again.
Nothing is written: the store is opened read-only.

An env whose framework scores its own rollouts (`OfflineScoring`: the verifiers v1 adapter) re-scores each
stored rollout from the record it kept of it (`native_trace`), one rollout at a time.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

from looprl.commands.stored import OfflineScoring, stored_example
from looprl.config import OrchestratorConfig
from looprl.envs.base_env import BaseEnv
from looprl.envs.failures import RolloutFailure
from looprl.envs.logging import attribute_group, attribute_to
from looprl.envs.rollout import BaseRollout
from looprl.envs.runtime_api import rollout_from_result, score_group, score_rollout
from looprl.envs.types import Example, GroupRequest, LogRecordData
from looprl.envserver.capture import LogLimits, close_capture, open_capture
from looprl.session.advantages import batch_advantages
from looprl.store.records import RolloutRecord

RESCORABLE_FAILURES = frozenset({"reward_error", "group_reward_error"})
"""Failures of the reward hooks themselves: their transcripts are complete, so they are scored again."""


@dataclass
class Rescored:
    """One stored rollout and what the env's reward code makes of it now."""

    before: RolloutRecord
    after: RolloutRecord
    """The stored row with the new components, termination reason, error and log records."""
    rescored: bool
    """False for a rollout that failed before scoring: `after` is `before`."""
    reward: float | None = None
    advantage: float | None = None
    """None for a failed rollout, or one of a group with no learning signal (as the orchestrator stores it)."""
    logs: list[LogRecordData] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """The rollout's total (or whether it has one) is not what was stored."""
        old, new = self.before.reward, self.reward
        if old is None or new is None:
            return (old is None) != (new is None)
        return not math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-9)


def rescorable(record: RolloutRecord) -> bool:
    return record.scored or record.termination_reason in RESCORABLE_FAILURES


async def rescore(env: BaseEnv | OfflineScoring, records: list[RolloutRecord], settings: OrchestratorConfig, *,
                  concurrency: int = 64, limits: LogLimits | None = None) -> list[list[Rescored]]:
    """Every group of `records` (grouped by `group_id`, in stored order) re-scored, with new totals
    and advantages. At most `concurrency` groups are scored at once."""
    groups: dict[str, list[RolloutRecord]] = {}
    for record in records:
        groups.setdefault(record.group_id, []).append(record)
    gate = asyncio.Semaphore(concurrency)

    async def one(group: list[RolloutRecord]) -> list[Rescored]:
        async with gate:
            return await _rescore_group(env, group, limits)

    rescored = await asyncio.gather(*(one(g) for g in groups.values()))
    advantages = batch_advantages([[r.after for r in group] for group in rescored], settings)
    for group, adv in zip(rescored, advantages):
        for item, reward, advantage in zip(group, adv.rewards, adv.advantages):
            item.reward, item.advantage = reward, None if adv.skipped else advantage
    return rescored


async def _rescore_group(env: BaseEnv | OfflineScoring, records: list[RolloutRecord],
                         limits: LogLimits | None) -> list[Rescored]:
    if not isinstance(env, BaseEnv):
        return [await _rescore_native(env, record, limits) for record in records]
    scorable = [r for r in records if rescorable(r)]
    rollouts: dict[str, BaseRollout] = {}
    if scorable:
        example = stored_example(scorable[0])  # siblings share their example
        rollouts = {r.rollout_id: _scorable(r, example) for r in scorable}
    ids = list(rollouts)
    buffers = {rid: open_capture(rid, limits) for rid in ids}
    try:
        with attribute_group(ids):
            await asyncio.gather(*(_score(env, r) for r in rollouts.values()))
            if rollouts:
                first = next(iter(rollouts.values()))
                request = GroupRequest(group_id=first.group_id, example=first.example, split=first.split,
                                       rollout_ids=ids, model="", base_url_template="")
                await score_group(env, list(rollouts.values()), request)
    finally:
        for rid in ids:
            close_capture(rid)
    out = []
    for record in records:
        r = rollouts.get(record.rollout_id)
        if r is None:
            out.append(Rescored(before=record, after=record, rescored=False))
            continue
        logs = buffers[record.rollout_id].records
        after = record.model_copy(update={"rewards": r.rewards, "termination_reason": r.termination_reason,
                                          "error": r.error, "logs": logs})
        out.append(Rescored(before=record, after=after, rescored=True, logs=logs))
    return out


def _scorable(record: RolloutRecord, example: Example) -> BaseRollout:
    """The stored rollout, ready for its reward hooks: no reward components yet (the hooks give them again),
    a failed hook's rollout as `finished`."""
    rollout = rollout_from_result(record, example)
    rollout.rewards = {}
    if record.termination_reason in RESCORABLE_FAILURES:
        rollout.termination_reason = "finished"
    return rollout


async def _score(env: BaseEnv, rollout: BaseRollout) -> None:
    with attribute_to([rollout.rollout_id]):
        try:
            await score_rollout(env, rollout)
        except RolloutFailure as e:
            rollout.fail(e.reason, e.message)


async def _rescore_native(env: OfflineScoring, record: RolloutRecord, limits: LogLimits | None) -> Rescored:
    if not rescorable(record):
        return Rescored(before=record, after=record, rescored=False)
    buffer = open_capture(record.rollout_id, limits)
    try:
        result = await env.rescore(record)
    finally:
        close_capture(record.rollout_id)
    after = record.model_copy(update={"rewards": result.rewards, "termination_reason": result.termination_reason,
                                      "error": result.error, "logs": buffer.records})
    return Rescored(before=record, after=after, rescored=True, logs=buffer.records)
