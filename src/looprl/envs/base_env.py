"""`BaseEnv`: the standard environment — a dataset, an optional toolset, and scoring hooks.

`run_group` implements the seven steps of a rollout (seeds/001): for each sibling, enter the
`rollout_context` hook, run the chat/tool loop, score with `compute_reward`; once every sibling is
scored, `compute_group_rewards` adds group-relative components; then each `rollout_context` exits.
Every failure settles only its own rollout (or, for the group hook, its group) with a termination
reason and an error text; siblings are never cancelled or changed. The runtime runs the scoring steps
alone through `looprl.envs.runtime_api` (re-scoring, and rollouts whose worker died).
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import openai

from looprl.envs._chat_loop import ModelError, ToolError, run_chat_loop
from looprl.envs._deadlines import deadline
from looprl.envs._model_client import model_client
from looprl.envs._progress import report, report_context_exit, report_group_hook_started
from looprl.envs._rewards_check import InvalidReward, check_reward_dict
from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.failures import RolloutFailure
from looprl.envs.logging import attribute_to
from looprl.envs.rollout import BaseRollout
from looprl.envs.types import DatasetSplit, Example, GroupRequest, RolloutResult, Tool


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])


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

    # -- contract ------------------------------------------------------------------------------

    @classmethod
    def has_reward_hook(cls) -> bool:
        return cls.compute_reward is not BaseEnv.compute_reward

    @classmethod
    def has_group_reward_hook(cls) -> bool:
        return cls.compute_group_rewards is not BaseEnv.compute_group_rewards

    @classmethod
    def contract_problems(cls) -> list[str]:
        """What this class gets wrong about the contract (empty when it is fine)."""
        return cls.hook_problems() + cls.limit_problems(cls.max_turns, cls.max_tool_calls)

    @classmethod
    def hook_problems(cls) -> list[str]:
        """The required hooks this class lacks."""
        problems = []
        if cls.create_dataset is BaseEnv.create_dataset:
            problems.append(f"{cls.__name__} does not implement create_dataset (required)")
        if not (cls.has_reward_hook() or cls.has_group_reward_hook()):
            problems.append(f"{cls.__name__} implements neither compute_reward nor compute_group_rewards")
        return problems

    @classmethod
    def limit_problems(cls, max_turns: Any, max_tool_calls: Any) -> list[str]:
        """What is wrong with these limits (a class's, or an instance's when its constructor sets them)."""
        problems = []
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
            problems.append(f"{cls.__name__}.max_turns must be set to a positive int (got {max_turns!r}), "
                            "e.g. `max_turns = 1` for single-turn tasks")
        if max_tool_calls is not None and (not isinstance(max_tool_calls, int) or max_tool_calls < 0):
            problems.append(f"{cls.__name__}.max_tool_calls must be None or an int >= 0")
        return problems

    # -- the group loop ------------------------------------------------------------------------

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        problems = self.hook_problems() + self.limit_problems(self.max_turns, self.max_tool_calls)
        if problems:
            raise TypeError("; ".join(problems))
        rollouts = [BaseRollout(rollout_id=rid, group_id=request.group_id, example=request.example,
                                split=request.split, messages=[dict(m) for m in request.example.prompt_messages])
                    for rid in request.rollout_ids]
        try:
            tools = await self.list_tools()
        except Exception as e:
            for r in rollouts:
                r.fail("env_error", f"list_tools raised {_describe(e)}")
            tools = []
        scored, group_scored = asyncio.Event(), asyncio.Event()
        pending = [r for r in rollouts if not r.failed]
        reached = 0

        async def one(r: BaseRollout) -> None:
            nonlocal reached
            client = model_client(request.base_url(r.rollout_id))
            with attribute_to([r.rollout_id]):
                async with AsyncExitStack() as stack:
                    await self._run_and_score(r, stack, client, request, tools)
                    report(self._result(r, request), self.has_group_reward_hook() and not r.failed)
                    reached += 1
                    if reached == len(pending):
                        scored.set()
                    await group_scored.wait()  # keep rollout_context open until group rewards are in
                    report_context_exit(r.rollout_id, done=False)
                    await self._exit_context(r, stack, request)
                    report_context_exit(r.rollout_id, done=True)

        async def group() -> None:
            await scored.wait()
            try:
                await self._score_group(rollouts, request)
                if self.has_group_reward_hook():
                    for r in pending:
                        report(self._result(r, request), False)
            finally:
                group_scored.set()

        if not pending:
            scored.set()
        await asyncio.gather(group(), *(one(r) for r in pending))
        return [self._result(r, request) for r in rollouts]

    async def _run_and_score(self, r: BaseRollout, stack: AsyncExitStack, client: openai.AsyncOpenAI,
                             request: GroupRequest, tools: list[Tool]) -> None:
        try:
            async with deadline(request.timeout_s) as stuck:
                try:
                    await stack.enter_async_context(self.rollout_context(r.rollout_id, request.example))
                except RolloutFailure:
                    raise
                except Exception as e:
                    r.fail("env_error", f"rollout_context raised on enter: {_describe(e)}")
                    return
                await run_chat_loop(self, r, client, request.model, tools)
                await self._score_rollout(r)
        except RolloutFailure as e:
            r.fail(e.reason, e.message)
        except ModelError as e:
            r.fail("model_error", str(e))
        except ToolError as e:
            r.fail("tool_error", f"{e}\n{_describe(e.__cause__)}" if e.__cause__ else str(e))
        except TimeoutError:
            r.fail("timeout", f"rollout exceeded its {request.timeout_s} s timeout "
                              f"(after {r.turns} turns, {r.tool_calls} tool calls)\n{stuck.stack}")
        except Exception as e:  # a bug in env code outside the named hooks
            r.fail("env_error", _describe(e))

    async def _score_rollout(self, r: BaseRollout) -> None:
        """`compute_reward` on a completed rollout (when the env has it); `RolloutFailure` propagates."""
        if self.has_reward_hook():
            try:
                r.rewards = check_reward_dict(await self.compute_reward(r), "compute_reward")
            except (RolloutFailure, TimeoutError):
                raise
            except Exception as e:
                r.fail("reward_error", _describe(e) if not isinstance(e, InvalidReward) else str(e))

    async def _exit_context(self, r: BaseRollout, stack: AsyncExitStack, request: GroupRequest) -> None:
        try:
            async with deadline(request.timeout_s) as stuck:
                await stack.aclose()
        except RolloutFailure as e:
            r.fail(e.reason, e.message)
        except TimeoutError:
            r.fail("timeout", f"rollout_context exceeded the {request.timeout_s} s timeout on exit\n{stuck.stack}")
        except Exception as e:
            r.fail("env_error", f"rollout_context raised on exit: {_describe(e)}")
        r.finished_at = time.time()

    async def _score_group(self, rollouts: list[BaseRollout], request: GroupRequest) -> None:
        members = [r for r in rollouts if not r.failed]
        if not members or not self.has_group_reward_hook():
            return
        report_group_hook_started()
        try:
            with attribute_to([r.rollout_id for r in members]):
                async with deadline(request.timeout_s) as stuck:
                    result = await self.compute_group_rewards(members)
            result = self._check_group_result(members, result)
        except RolloutFailure as e:
            for r in members:
                self._settle_group_failure(r, e.reason, e.message)
            return
        except TimeoutError:
            for r in members:
                r.fail("timeout", f"compute_group_rewards exceeded the {request.timeout_s} s timeout\n{stuck.stack}")
            return
        except Exception as e:
            for r in members:
                self._settle_group_failure(r, "group_reward_error", str(e) if isinstance(e, InvalidReward)
                                           else _describe(e))
            return
        for r in members:
            if r.rollout_id in result:
                try:
                    r.rewards = {**r.rewards, **check_reward_dict(result[r.rollout_id], "compute_group_rewards")}
                except InvalidReward as e:
                    r.fail("reward_error", str(e))

    def _check_group_result(self, members: list[BaseRollout], result: Any) -> dict[str, dict[str, float]]:
        """`compute_group_rewards`' result, or `InvalidReward` (the group's `group_reward_error`) when it is not
        `{rollout_id: dict}` over ids of the group (a subset is fine: the rest get no group components)."""
        if not isinstance(result, dict):
            raise InvalidReward(f"compute_group_rewards must return {{rollout_id: dict}}, got {type(result).__name__}")
        unknown = set(result) - {r.rollout_id for r in members}
        if unknown:
            raise InvalidReward(f"compute_group_rewards returned ids not in the group: {sorted(map(str, unknown))}")
        return result

    def _settle_group_failure(self, r: BaseRollout, reason: str, error: str) -> None:
        """A failed group hook settles each member as an operational failure."""
        r.fail(reason, error)

    def _result(self, r: BaseRollout, request: GroupRequest) -> RolloutResult:
        return RolloutResult(
            rollout_id=r.rollout_id, group_id=r.group_id, example_id=r.example_id, split=r.split,
            messages=r.messages, example_args=r.example_args, termination_reason=r.termination_reason or "env_error",
            error=r.error, rewards=r.rewards, turns=r.turns, tool_calls=r.tool_calls,
            started_at=r.started_at, finished_at=r.finished_at or time.time(),
        )
