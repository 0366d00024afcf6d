"""Which rollout a log record belongs to: the attribution env code sees and narrows.

Env code logs with plain `logging.getLogger(__name__)`. While a group runs, the runtime names its
rollouts in context variables; the runtime's capture handler (`looprl.envserver.capture`) copies
each record to the rollouts named here. Context variables follow `asyncio` tasks and
`asyncio.to_thread`, so records from spawned tasks and worker threads land on the right rollout,
and hundreds of interleaved rollouts never leak into each other.

Inside `compute_group_rewards` the context names every rollout of the group; narrow it with
`rollout_context(rollout_id)` (a log-attribution helper, not the `BaseEnv.rollout_context` hook):

    from looprl.envs.logging import rollout_context

    with rollout_context(r.rollout_id):
        logger.info("scoring individual rollout")   # attributed to this rollout only
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

_running: ContextVar[frozenset[str]] = ContextVar("looprl_running_rollouts", default=frozenset())
"""The rollouts the runtime runs in this context (a group's): the ids the helpers accept."""
_targets: ContextVar[tuple[str, ...]] = ContextVar("looprl_log_targets", default=())
"""The rollouts a record emitted here is attributed to."""


@contextmanager
def attribute_group(rollout_ids: Sequence[str]) -> Iterator[None]:
    """Run a group inside the block: its rollouts become nameable, and records belong to all of them.

    The runtime calls this around `Environment.run_group`; env code never does."""
    running, targets = _running.set(frozenset(rollout_ids)), _targets.set(tuple(rollout_ids))
    try:
        yield
    finally:
        _targets.reset(targets)
        _running.reset(running)


@contextmanager
def attribute_to(rollout_ids: Sequence[str]) -> Iterator[None]:
    """Attribute records emitted inside the block (and tasks/threads it starts) to these rollouts."""
    token = _targets.set(tuple(rollout_ids))
    try:
        yield
    finally:
        _targets.reset(token)


def current_rollout_ids() -> tuple[str, ...]:
    """The rollouts that a record emitted here would be attributed to (empty outside rollouts)."""
    return _targets.get()


def _running_ids(rollout_ids: Sequence[str]) -> Sequence[str]:
    running = _running.get()
    for rollout_id in rollout_ids:
        if rollout_id not in running:
            raise ValueError(f"rollout_context({rollout_id!r}): no rollout with this id is running here")
    return rollout_ids


@contextmanager
def rollout_context(rollout_id: str) -> Iterator[None]:
    """Attribute records inside the block to this one rollout only (e.g. in `compute_group_rewards`)."""
    with attribute_to(_running_ids([rollout_id])):
        yield


@contextmanager
def group_context(rollout_ids: Sequence[str]) -> Iterator[None]:
    """Attribute records inside the block to each of these rollouts."""
    with attribute_to(_running_ids(rollout_ids)):
        yield
