"""What an env server knows about each worker and each request it sent: the state settlement reads.

A `WorkerSlot` is one worker id: the process behind it now (a respawn replaces the slot) and what it has in
flight. A `PendingRequest` is one request on it, with everything the worker streamed while it ran, so
that a worker's death still settles every rollout (`looprl.envserver.settlement`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from looprl.envs.types import GroupRequest, LogRecordData
from looprl.envserver.protocol import RolloutSettled


@dataclass
class PendingRequest:
    future: asyncio.Future[Any]
    request: GroupRequest | None = None
    """The group it runs or scores (None for `CreateDataset`)."""
    deadline: asyncio.TimerHandle | None = None
    started: float = field(default_factory=time.time)
    logs: dict[str, list[LogRecordData]] = field(default_factory=dict)
    """The records streamed so far, per rollout."""
    settled: dict[str, RolloutSettled] = field(default_factory=dict)
    """The latest report of each rollout settled before its group returned."""
    exiting: set[str] = field(default_factory=set)
    """Rollouts whose `rollout_context` exit has started and not completed."""
    exited: set[str] = field(default_factory=set)
    """Rollouts whose `rollout_context` exit has completed."""
    group_hook_started: bool = False
    rescoring: bool = False
    """A `ScoreGroup`: if its worker dies, its rollouts are not sent to another one again."""


@dataclass
class WorkerSlot:
    """One worker id: the current process behind it and what it has in flight."""

    worker_id: int
    ready: asyncio.Future[None]
    proc: asyncio.subprocess.Process | None = None
    pending: dict[str, PendingRequest] = field(default_factory=dict)
    """Requests in flight, by message id."""
    rollouts: dict[str, PendingRequest] = field(default_factory=dict)
    """The pending group of each rollout in flight."""
    timed_out: dict[str, str] = field(default_factory=dict)
    """Rollouts ended as `timeout` because their code did not yield, with the error; the worker is being killed."""
    killed_for: str | None = None
    task: asyncio.Task[None] | None = None
