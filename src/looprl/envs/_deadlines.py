"""Timeouts that remember where the code was stuck when they fired.

`asyncio.timeout` cancels a task without saying what it was awaiting. `deadline(seconds)` is the same
timeout, but just before it cancels it records the task's stack (the coroutine chain down to the
await that never finished, through `async with` and async generators), so a `timeout` rollout's
error shows the line it hung on.

    async with deadline(request.timeout_s) as stuck:
        await hook()
    # on TimeoutError: stuck.stack is "Stack for <Task ...> (most recent call last): ..."
"""

from __future__ import annotations

import asyncio
import gc
import traceback
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any


@dataclass
class Stuck:
    """Filled in when the deadline fires: the awaiting task's stack at that moment."""

    stack: str = ""


def _awaited_frames(task: asyncio.Task[Any]) -> Iterator[FrameType]:
    """The frames of the task's await chain, outermost first (`Task.get_stack` gives only the outermost).

    Follows coroutines, generators and async generators; `anext(gen)` (how `asynccontextmanager`
    enters and exits) hides its generator, which only the garbage collector's referents name."""
    awaitable: object = task.get_coro()
    while awaitable is not None:
        if type(awaitable).__name__ == "async_generator_asend":
            awaitable = next((r for r in gc.get_referents(awaitable) if hasattr(r, "ag_frame")), None)
            continue
        frame = next((f for a in ("cr_frame", "gi_frame", "ag_frame") if (f := getattr(awaitable, a, None))), None)
        if frame is not None:
            yield frame
        awaitable = next((a for n in ("cr_await", "gi_yieldfrom", "ag_await") if (a := getattr(awaitable, n, None))),
                         None)


def task_stack(task: asyncio.Task[Any]) -> str:
    """Where `task` is suspended: each coroutine of its await chain, down to the innermost await."""
    frames = traceback.StackSummary.extract((f, f.f_lineno) for f in _awaited_frames(task))
    return f"Stack for {task!r} (most recent call last):\n" + "".join(frames.format()).rstrip()


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
