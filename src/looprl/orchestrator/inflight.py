"""Rollout groups in flight across step boundaries, and the off-policy bound on which may train.

Groups are not tied to a step when they start. A step takes the first `groups_per_step` groups to
finish, in completion order, so one slow group (a long multi-turn rollout, a tool that hangs) no
longer leaves the engine idle at the end of every step: the groups behind it carry on into the
next step.

Each group is tagged with the engine's weights version when it started. When it lands, its version is
that of its oldest token if the engine recorded per-token versions (`oldest`: with in-flight weight
updates a reply continues on newer weights, and a group that waited in the engine's queue started on
newer ones than its tag), else the tag. A group that lands in step N is *fresh* if
`N - 1 - version <= max_off_policy_steps` (step N trains the policy of version N - 1); a stale group
is dropped, returned for the store and the step's `groups_dropped` count, and replaced.

Groups for the next step start early (prefetch) only when they would still be fresh there, i.e.
when the engine already runs version >= N - max_off_policy_steps. So when the trainer is the
bottleneck (a CPU run), nothing is generated only to be thrown away; when generation is, the engine
always has the next step's groups queued. Drops then come only from groups that outlive more than
one step.

After collapse recovery rolled the weights back at step N (`[orchestrator.collapse] method = "rollback"`),
`floor` = N: groups sampled by older weights, the policy that stopped exploring, are stale however
small their lag, and the orchestrator waits for the weights put back before step N + 1.

Dynamic sampling (DAPO, `orchestrator.dynamic_sampling`): with a `keep` predicate (the group
carries a learning signal: its rewards differ), a fresh group that fails it does not count towards
the step's `groups_per_step`; it is returned as `filtered` (stored, not trained) and another group
takes its place, until the step has `groups_per_step` kept groups or `max_extra` groups beyond
`groups_per_step` have landed for it (the cap on extra generation; then the step trains on what it kept).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Landed(Generic[T]):
    """A finished group, the oldest weights version that sampled its tokens and the one it started on."""

    group: T
    policy_version: int
    started_version: int = -1
    """The engine's version when the group started (-1: same as `policy_version`)."""

    def __post_init__(self) -> None:
        if self.started_version < 0:
            self.started_version = self.policy_version


@dataclass
class Collected(Generic[T]):
    fresh: list[Landed[T]]
    stale: list[Landed[T]]
    filtered: list[Landed[T]] = field(default_factory=list)
    """Fresh groups that failed `keep` (dynamic sampling): stored, not trained."""


class GroupPool(Generic[T]):
    """Starts groups through `launch`, tags them with `version()`, hands them to steps as they finish."""

    def __init__(self, launch: Callable[[], Awaitable[T]], version: Callable[[], int], groups_per_step: int,
                 max_off_policy_steps: int, oldest: Callable[[T], int | None] = lambda group: None,
                 poll_s: float | None = None) -> None:
        """`oldest`: the oldest version that sampled a landed group's tokens (None: not known, its tag counts).
        `poll_s`: also run `collect`'s `before_top_up` this often while no group lands (in-flight weight
        updates: new weights load under the running groups, not only when one finishes)."""
        self.launch, self.version, self.oldest, self.poll_s = launch, version, oldest, poll_s
        self.groups_per_step, self.max_lag = groups_per_step, max_off_policy_steps
        self.tasks: dict[asyncio.Task[T], int] = {}
        self.floor = 0
        """The oldest weights version a group may come from: after collapse recovery rolled the weights back at
        step N, N (the weights it put back); older versions are the policy that stopped exploring."""

    def fresh_for(self, step: int, policy_version: int) -> bool:
        return policy_version >= self.floor and step - 1 - policy_version <= self.max_lag

    async def collect(self, step: int, prefetch: bool = True,
                      before_top_up: Callable[[], Awaitable[object]] | None = None,
                      keep: Callable[[T], bool] | None = None, max_extra: int = 0) -> Collected[T]:
        """The first `groups_per_step` groups fresh for `step` and the stale ones met on the way.

        `prefetch`: also start groups for step + 1 when they would be fresh there (off for the last
        step, so nothing is left running). `before_top_up` runs before groups are started (the
        orchestrator loads newer weights there, so new groups start on the newest policy). `keep`
        and `max_extra`: dynamic sampling (see the module docstring). An exception from a group
        propagates; `cancel()` then stops the rest.
        """
        out: Collected[T] = Collected([], [])
        budget = self.groups_per_step + max_extra
        while len(out.fresh) < self.groups_per_step and len(out.fresh) + len(out.filtered) < budget:
            if before_top_up is not None:
                await before_top_up()
            self._top_up(step, len(out.fresh), prefetch)
            done, _ = await asyncio.wait(self.tasks, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=self._order):
                if len(out.fresh) == self.groups_per_step or len(out.fresh) + len(out.filtered) == budget:
                    break  # finished early: it waits in the pool for the next step
                started = self.tasks.pop(task)
                oldest = self.oldest(task.result())
                landed = Landed(task.result(), started if oldest is None else oldest, started)
                if not self.fresh_for(step, landed.policy_version):
                    out.stale.append(landed)
                elif keep is None or keep(landed.group):
                    out.fresh.append(landed)
                else:
                    out.filtered.append(landed)
        return out

    def _top_up(self, step: int, collected: int, prefetch: bool) -> None:
        version = self.version()
        target = self.groups_per_step - collected
        if prefetch and self.fresh_for(step + 1, version):
            target += self.groups_per_step
        while len(self.tasks) < target:
            self.tasks[asyncio.ensure_future(self.launch())] = version

    def _order(self, task: asyncio.Task[T]) -> int:
        """Among groups finished together, the oldest policy first (the one closest to going stale)."""
        return self.tasks[task]

    async def cancel(self) -> None:
        """Stop every group still running (the run ended or failed)."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
