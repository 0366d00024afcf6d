"""`BaseEnv`: the standard environment — a dataset, an optional toolset, and scoring hooks.

This class holds only what users write (seeds/001): the hooks they override and the limits
`max_turns` / `max_tool_calls`. The machinery that runs a group with them (the chat/tool loop,
scoring, settlement) is the runtime's, on a runner object that holds the env
(`looprl.envs._runner.EnvRunner`), so no name a user gives a method of their own can change what the
runtime does. `run_group` hands the group to that runner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from looprl.envs._runner import register_sdk_base, runner_for
from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.rollout import BaseRollout
from looprl.envs.types import DatasetSplit, Example, GroupRequest, RolloutResult, Tool


class BaseEnv(Environment):
    """Subclass this: implement `create_dataset` and at least one of the two scoring hooks."""

    max_turns: int | None = None
    """Bounds model turns per rollout. Required: set it as a class attribute."""
    max_tool_calls: int | None = None
    """Bounds tool calls per rollout (None: only `max_turns` bounds them)."""

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        raise NotImplementedError(f"{type(self).__name__} must implement create_dataset")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """Score one completed rollout. Override this and/or `compute_group_rewards`."""
        raise NotImplementedError

    async def compute_group_rewards(self, rollouts: list[BaseRollout]) -> dict[str, dict[str, float]]:
        """Score a completed sibling group jointly: `{rollout_id: {component: value}}`."""
        raise NotImplementedError

    async def list_tools(self) -> list[Tool]:
        """OpenAI function tools the model may call. Defaults to none."""
        return []

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args: Any) -> Any:
        """Execute one tool call; the return value (str, or JSON-serialisable) is what the model sees."""
        raise NotImplementedError(f"{type(self).__name__} declares tools but does not implement run_tool")

    @asynccontextmanager
    async def rollout_context(self, rollout_id: str, example: Example) -> AsyncIterator[None]:
        """Acquire per-rollout resources before the model sees the prompt; release them afterwards."""
        yield

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        """Run the group with the standard model/tool loop (the runtime's runner, which holds this env)."""
        return await runner_for(self).run_group(request)


register_sdk_base(BaseEnv)
