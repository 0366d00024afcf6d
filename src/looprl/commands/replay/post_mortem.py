"""`looprl replay --pdb`: a post-mortem debugger in env code, before the runtime settles the error.

The runtime turns an exception in a hook into a failed rollout (`reward_error`, `tool_error`, …) and
keeps only its text. `stop_on_error` wraps the env instance's hooks so that an exception raised in
one first opens pdb in the frame that raised it; leaving pdb (`c`) lets the runtime go on as it
would have. `RolloutFailure`, the deliberate way to fail a rollout, does not stop.
"""

from __future__ import annotations

import functools
import pdb
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from looprl.envs.environment import Environment
from looprl.envs.failures import RolloutFailure

HOOKS = ("run_group", "list_tools", "run_tool", "compute_reward", "compute_group_rewards")
"""Async methods wrapped (when the env has them); `rollout_context` is wrapped as a context manager."""


@contextmanager
def _post_mortem() -> Iterator[None]:
    try:
        yield
    except RolloutFailure:
        raise
    except Exception as e:
        print(f"\n{type(e).__name__}: {e}\n(looprl replay --pdb: in the frame that raised; `c` goes on)")
        pdb.post_mortem(e.__traceback__)
        raise


def _wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _post_mortem():
            return await method(*args, **kwargs)

    return wrapper


def stop_on_error(env: Environment) -> None:
    """Make `env`'s hooks open pdb on an exception (only this instance; its class is unchanged)."""
    for name in HOOKS:
        method = getattr(env, name, None)
        if method is not None:
            setattr(env, name, _wrap(method))
    context = getattr(env, "rollout_context", None)
    if context is not None:

        @asynccontextmanager
        async def rollout_context(*args: Any) -> AsyncIterator[Any]:
            with _post_mortem():
                async with context(*args) as value:
                    yield value

        setattr(env, "rollout_context", rollout_context)  # noqa: B010 (only some environments declare it)
