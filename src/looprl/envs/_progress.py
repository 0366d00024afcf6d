"""How `BaseEnv` reports each rollout as soon as it is settled, before its whole group returns.

The env worker runs a group as one call, but a rollout that blocks the worker gets the worker
killed, and with it the group's call. So that finished siblings survive that, `BaseEnv` reports each
rollout when it is scored (and again when group rewards are in); the runtime forwards the reports
to the env server, which keeps the latest one per rollout. Outside a runtime that listens, reports
go nowhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from looprl.envs.types import RolloutResult

Reporter = Callable[[RolloutResult, bool], None]
"""Called with a rollout's result so far and whether it still waits for `compute_group_rewards`."""

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
        reporter(result, group_pending)
