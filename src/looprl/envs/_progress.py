"""How `BaseEnv` reports each rollout as soon as it is settled, before its whole group returns.

The env worker runs a group as one call, but a rollout that blocks the worker gets the worker
killed, and with it the group's call. So that finished siblings survive that, `BaseEnv` reports each
rollout when it is scored (and again when group rewards are in), says when `compute_group_rewards`
starts (until then, siblings waiting for it can be scored by another worker; after that, the hook may
be what killed the worker, and is not run again), and when each `rollout_context` exit starts and
completes (a worker that dies inside an exit fails that rollout, not its siblings). The runtime forwards the
reports to the env server, which keeps the latest one per rollout. Outside a runtime that listens,
reports go nowhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from looprl.envs.types import RolloutResult


class Reporter(Protocol):
    def settled(self, result: RolloutResult, group_pending: bool) -> None:
        """A rollout's result so far; `group_pending`: it still waits for `compute_group_rewards`."""

    def group_hook_started(self) -> None:
        """`compute_group_rewards` is about to run on the group's waiting rollouts."""

    def context_exit(self, rollout_id: str, done: bool) -> None:
        """The rollout's `rollout_context` exit is about to run (`done` False) or has completed (`done` True)."""


_reporter: ContextVar[Reporter | None] = ContextVar("looprl_rollout_reporter", default=None)


@contextmanager
def reporting_to(reporter: Reporter | None) -> Iterator[None]:
    """Send the reports of rollouts run inside the block to `reporter`."""
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)


def report(result: RolloutResult, group_pending: bool) -> None:
    reporter = _reporter.get()
    if reporter is not None:
        reporter.settled(result, group_pending)


def report_group_hook_started() -> None:
    reporter = _reporter.get()
    if reporter is not None:
        reporter.group_hook_started()


def report_context_exit(rollout_id: str, done: bool) -> None:
    reporter = _reporter.get()
    if reporter is not None:
        reporter.context_exit(rollout_id, done)
