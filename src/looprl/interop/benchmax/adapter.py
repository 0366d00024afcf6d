"""A real benchmax environment (benchmax >= 0.2, Python 3.12) as a looprl `Environment`.

`adapt(cls)` makes a looprl environment class whose instances construct the user's benchmax class
with the run's env args and run each group through benchmax's own `Environment.run_group`, with one
`RolloutRequest` per rollout pointed at that rollout's gateway URL. Termination reasons, errors and
reward components are therefore exactly benchmax's; looprl adds what benchmax hands to its trainer
instead: the transcript (taken from the `BaseRollout` each `run_rollout` returns), turn and
tool-call counts, per-rollout log records and model calls, and its `timeout` per rollout.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ClassVar

from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.logging import attribute_to
from looprl.envs.types import DatasetSplit, Example, GroupRequest, Message, RolloutResult

_attempts: ContextVar[dict[str, Any]] = ContextVar("looprl_benchmax_attempts")
"""The current group's attempts by rollout id, filled as benchmax's `run_rollout` calls return."""
_timeout: ContextVar[float | None] = ContextVar("looprl_benchmax_timeout", default=None)


def is_benchmax_env(cls: Any) -> bool:
    """Whether `cls` subclasses the installed benchmax's `Environment`."""
    import sys

    envs = sys.modules.get("benchmax.envs")
    return isinstance(cls, type) and envs is not None and issubclass(cls, getattr(envs, "Environment", ()))


def adapt(cls: type) -> type[Environment]:
    """A looprl environment class that runs the benchmax class `cls` (keeping its name for logs)."""
    return type(cls.__name__, (BenchmaxEnvironment,), {"wrapped": cls, "__module__": cls.__module__,
                                                       "__doc__": cls.__doc__})


class BenchmaxEnvironment(Environment):
    wrapped: ClassVar[type]

    def __init__(self, **env_args: Any) -> None:
        self.env = self.wrapped(**env_args)
        run_rollout = self.env.run_rollout

        async def recorded(request: Any) -> Any:
            """benchmax's `run_rollout` with its records, deadline and transcript kept for looprl."""
            from benchmax.envs import RolloutFailure

            with attribute_to([request.rollout_id]):
                try:
                    async with asyncio.timeout(_timeout.get()):
                        attempt = await run_rollout(request)
                except TimeoutError:
                    raise RolloutFailure("timeout", f"rollout exceeded its {_timeout.get()} s timeout") from None
            _attempts.get()[request.rollout_id] = attempt
            return attempt

        self.env.run_rollout = recorded  # benchmax's run_group calls self.run_rollout

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        source = await self.env.create_dataset(split, base_dir, max_examples=max_examples)
        return Dataset((Example(id=e.id, payload=dict(e.payload)) for e in source), source=type(self.env).__name__)

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        from benchmax.envs import Example as BenchmaxExample
        from benchmax.envs import RolloutRequest, StaticBearerAuth

        started = time.time()
        example = BenchmaxExample(id=request.example.id, payload=dict(request.example.payload))
        requests = [RolloutRequest(rollout_id=rid, example=example, model=request.model,
                                   base_url=request.base_url(rid), model_auth=StaticBearerAuth("looprl"),
                                   split=request.split) for rid in request.rollout_ids]
        attempts: dict[str, Any] = {}
        _attempts.set(attempts)
        _timeout.set(request.timeout_s)
        try:
            outcomes: Mapping[str, Any] = await self.env.run_group(requests)
        except Exception as e:  # a contract error benchmax raises after every sibling settled
            error = f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])
            return [self._result(request, rid, started, None, "env_error", error, {}) for rid in request.rollout_ids]
        return [self._result(request, rid, started, attempts.get(rid), outcomes[rid].termination_reason,
                             outcomes[rid].error, dict(outcomes[rid].rewards)) for rid in request.rollout_ids]

    @staticmethod
    def _result(request: GroupRequest, rollout_id: str, started: float, attempt: Any, reason: str,
                error: str | None, rewards: dict[str, float]) -> RolloutResult:
        prompt = [dict(m) for m in request.example.prompt_messages]
        messages: list[Message] = [dict(m) for m in getattr(attempt, "messages", None) or prompt]
        new = messages[len(prompt):]
        return RolloutResult(
            rollout_id=rollout_id, group_id=request.group_id, example_id=request.example.id, split=request.split,
            messages=messages, example_args=request.example.example_args, termination_reason=reason, error=error,
            rewards={k: float(v) for k, v in rewards.items()}, turns=sum(m.get("role") == "assistant" for m in new),
            tool_calls=sum(m.get("role") == "tool" for m in new), started_at=started, finished_at=time.time())

    async def aclose(self) -> None:
        await self.env.aclose()
