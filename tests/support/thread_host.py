"""An environment hosted on its own event loop in a dedicated thread: the tests' in-process env host.

Env code still never runs on the caller's event loop (the env gets a loop of its own in one thread,
results come back through futures), but without worker processes, so unit tests of the contract
start in milliseconds. Every command runs env code in env server processes (`EnvServerHost`), which
run the same `run_group_captured` inside worker processes.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from looprl.config import LogLimits
from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.runtime_api import aclose_pool
from looprl.envs.types import DatasetSplit, GroupRequest, RolloutResult
from looprl.envserver.capture import install_capture
from looprl.envserver.runtime import run_group_captured

T = TypeVar("T")


class ThreadEnvHost:
    """Owns one environment instance and the thread whose event loop runs all of its code."""

    def __init__(self, make_env: Callable[[], Environment], *, log_level: str = "INFO",
                 log_limits: LogLimits | None = None) -> None:
        self._make_env = make_env
        self._limits = log_limits
        self._log_level = log_level
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="looprl-env", daemon=True)
        self.env: Environment | None = None

    async def start(self) -> None:
        install_capture(self._log_level)
        self._thread.start()
        self.env = await self._call(self._construct)

    async def _construct(self) -> Environment:
        return self._make_env()

    async def _call(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        future = asyncio.run_coroutine_threadsafe(factory(), self._loop)
        return await asyncio.wrap_future(future)

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, max_examples: int | None) -> Dataset:
        assert self.env is not None
        env = self.env
        return await self._call(lambda: env.create_dataset(split, base_dir, max_examples=max_examples))

    async def submit_group(self, request: GroupRequest) -> list[RolloutResult]:
        assert self.env is not None
        env = self.env
        return await self._call(lambda: run_group_captured(env, request, self._limits))

    async def aclose(self) -> None:
        if self.env is not None:
            env, self.env = self.env, None
            try:
                await self._call(env.aclose)
                await self._call(aclose_pool)
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
        elif self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
