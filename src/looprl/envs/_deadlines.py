"""Timeouts that remember where the code was stuck when they fired.

`asyncio.timeout` cancels a task without saying what it was awaiting. `deadline(seconds)` is the same
timeout, but just before it cancels it records the task's stack (the coroutine chain down to the
await that never finished), so a `timeout` rollout's error shows the line it hung on.

    async with deadline(request.timeout_s) as stuck:
        await hook()
    # on TimeoutError: stuck.stack is "Stack for <Task ...> (most recent call last): ..."
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class Stuck:
    """Filled in when the deadline fires: the awaiting task's stack at that moment."""

    stack: str = ""


def task_stack(task: asyncio.Task) -> str:
    out = io.StringIO()
    task.print_stack(file=out)
    return out.getvalue().rstrip()


@asynccontextmanager
async def deadline(seconds: float | None) -> AsyncIterator[Stuck]:
    """`asyncio.timeout(seconds)` that records the current task's stack before cancelling it."""
    stuck = Stuck()
    if seconds is None:
        yield stuck
        return
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    async with asyncio.timeout(None) as timeout:
        def expire() -> None:
            stuck.stack = task_stack(task)
            timeout.reschedule(loop.time())

        handle = loop.call_later(seconds, expire)
        try:
            yield stuck
        finally:
            handle.cancel()
