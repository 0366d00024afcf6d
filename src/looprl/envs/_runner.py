"""The runner: the runtime's side of a `BaseEnv`, an object that holds the env and drives its hooks.

`BaseEnv` holds only what users write (seeds/001: the hooks and the two limits). Everything the
runtime does with those hooks lives here, on `EnvRunner`, never on the class users subclass: so a
user's env may define any method (`_score_rollout`, `_exit_context`, `contract_problems`, ...) and
the runtime still runs it the same way. `run_group` implements the seven steps of a rollout: for each
sibling, enter the `rollout_context` hook, run the chat/tool loop, score with `compute_reward`; once
every sibling is scored, `compute_group_rewards` adds group-relative components; then each
`rollout_context` exits. Every failure settles only its own rollout (or, for the group hook, its
group) with a termination reason and an error text; siblings are never cancelled or changed.

Another framework's env base class (benchmax's, in `looprl.interop`) scores by rules of its own: it
subclasses `EnvRunner` and registers the subclass for its base class (`register_runner`);
`runner_for(env)` picks the runner of the env's nearest registered base class.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import openai

from looprl.envs._chat_loop import ModelError, ToolError, run_chat_loop
from looprl.envs._deadlines import deadline
from looprl.envs._model_client import model_client
from looprl.envs._progress import report, report_context_exit, report_group_hook_started
from looprl.envs._rewards_check import InvalidReward, check_reward_dict
from looprl.envs.failures import RolloutFailure
from looprl.envs.logging import attribute_to
from looprl.envs.rollout import BaseRollout
from looprl.envs.types import GroupRequest, RolloutResult, Tool

if TYPE_CHECKING:
    from looprl.envs.base_env import BaseEnv  # it imports this module, to hand its groups to the runner


def describe(e: BaseException) -> str:
    """An exception as a rollout's error text: type, message and the innermost frames."""
    return f"{type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])


def limit_problems(env_cls: type, max_turns: Any, max_tool_calls: Any) -> list[str]:
    """What is wrong with these limits (a class's, or an instance's when its constructor sets them)."""
    problems = []
    if not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1:
        problems.append(f"{env_cls.__name__}.max_turns must be set to a positive int (got {max_turns!r}), "
                        "e.g. `max_turns = 1` for single-turn tasks")
    if max_tool_calls is not None and (not isinstance(max_tool_calls, int) or max_tool_calls < 0):
        problems.append(f"{env_cls.__name__}.max_tool_calls must be None or an int >= 0")
    return problems


class EnvRunner:
    """Runs a `BaseEnv`'s rollout groups and its scoring steps; the env itself gains no name."""

    def __init__(self, env: BaseEnv) -> None:
        self.env = env

    # -- the contract, checked on the class ----------------------------------------------------

    @staticmethod
    def has_reward_hook(env_cls: type[BaseEnv]) -> bool:
        return env_cls.compute_reward is not _sdk_base().compute_reward

    @staticmethod
    def has_group_reward_hook(env_cls: type[BaseEnv]) -> bool:
        return env_cls.compute_group_rewards is not _sdk_base().compute_group_rewards

    @classmethod
    def hook_problems(cls, env_cls: type[BaseEnv]) -> list[str]:
        """The required hooks `env_cls` lacks."""
        problems = []
        if env_cls.create_dataset is _sdk_base().create_dataset:
            problems.append(f"{env_cls.__name__} does not implement create_dataset (required)")
        if not (cls.has_reward_hook(env_cls) or cls.has_group_reward_hook(env_cls)):
            problems.append(f"{env_cls.__name__} implements neither compute_reward nor compute_group_rewards")
        return problems

    @classmethod
    def contract_problems(cls, env_cls: type[BaseEnv]) -> list[str]:
        """What `env_cls` gets wrong about the contract (empty when it is fine)."""
        return cls.hook_problems(env_cls) + limit_problems(env_cls, env_cls.max_turns, env_cls.max_tool_calls)

    # -- the group loop ------------------------------------------------------------------------

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        env = self.env
        problems = self.hook_problems(type(env)) + limit_problems(type(env), env.max_turns, env.max_tool_calls)
        if problems:
            raise TypeError("; ".join(problems))
        rollouts = [BaseRollout(rollout_id=rid, group_id=request.group_id, example=request.example,
                                split=request.split, messages=[dict(m) for m in request.example.prompt_messages])
                    for rid in request.rollout_ids]
        try:
            tools = await env.list_tools()
        except Exception as e:
            for r in rollouts:
                r.fail("env_error", f"list_tools raised {describe(e)}")
            tools = []
        group_hook = self.has_group_reward_hook(type(env))
        scored, group_scored = asyncio.Event(), asyncio.Event()
        pending = [r for r in rollouts if not r.failed]
        reached = 0

        async def one(r: BaseRollout) -> None:
            nonlocal reached
            client = model_client(request.base_url(r.rollout_id))
            with attribute_to([r.rollout_id]):
                async with AsyncExitStack() as stack:
                    await self.run_and_score(r, stack, client, request, tools)
                    report(self.result(r, request), group_hook and not r.failed)
                    reached += 1
                    if reached == len(pending):
                        scored.set()
                    await group_scored.wait()  # keep rollout_context open until group rewards are in
                    report_context_exit(r.rollout_id, done=False)
                    await self.exit_context(r, stack, request)
                    report_context_exit(r.rollout_id, done=True)

        async def group() -> None:
            await scored.wait()
            try:
                await self.score_group(rollouts, request)
                if group_hook:
                    for r in pending:
                        report(self.result(r, request), False)
            finally:
                group_scored.set()

        if not pending:
            scored.set()
        await asyncio.gather(group(), *(one(r) for r in pending))
        return [self.result(r, request) for r in rollouts]

    async def run_and_score(self, r: BaseRollout, stack: AsyncExitStack, client: openai.AsyncOpenAI,
                            request: GroupRequest, tools: list[Tool]) -> None:
        """Enter `rollout_context`, run the chat loop and `compute_reward`: every fault settles `r`."""
        try:
            async with deadline(request.timeout_s) as stuck:
                try:
                    await stack.enter_async_context(self.env.rollout_context(r.rollout_id, request.example))
                except RolloutFailure:
                    raise
                except Exception as e:
                    r.fail("env_error", f"rollout_context raised on enter: {describe(e)}")
                    return
                await run_chat_loop(self.env, r, client, request.model, tools)
                await self.score_rollout(r)
        except RolloutFailure as e:
            r.fail(e.reason, e.message)
        except ModelError as e:
            r.fail("model_error", str(e))
        except ToolError as e:
            r.fail("tool_error", f"{e}\n{describe(e.__cause__)}" if e.__cause__ else str(e))
        except TimeoutError:
            r.fail("timeout", f"rollout exceeded its {request.timeout_s} s timeout "
                              f"(after {r.turns} turns, {r.tool_calls} tool calls)\n{stuck.stack}")
        except Exception as e:  # a bug in env code outside the named hooks
            r.fail("env_error", describe(e))

    async def score_rollout(self, r: BaseRollout) -> None:
        """`compute_reward` on a completed rollout (when the env has it); `RolloutFailure` propagates."""
        if self.has_reward_hook(type(self.env)):
            try:
                r.rewards = check_reward_dict(await self.env.compute_reward(r), "compute_reward")
            except (RolloutFailure, TimeoutError):
                raise
            except Exception as e:
                r.fail("reward_error", describe(e) if not isinstance(e, InvalidReward) else str(e))

    async def exit_context(self, r: BaseRollout, stack: AsyncExitStack, request: GroupRequest) -> None:
        """Exit the rollout's `rollout_context`; a fault there fails the rollout."""
        try:
            async with deadline(request.timeout_s) as stuck:
                await stack.aclose()
        except RolloutFailure as e:
            r.fail(e.reason, e.message)
        except TimeoutError:
            r.fail("timeout", f"rollout_context exceeded the {request.timeout_s} s timeout on exit\n{stuck.stack}")
        except Exception as e:
            r.fail("env_error", f"rollout_context raised on exit: {describe(e)}")
        r.finished_at = time.time()

    async def score_group(self, rollouts: list[BaseRollout], request: GroupRequest) -> None:
        """`compute_group_rewards` on the rollouts not failed; a failing hook fails them all."""
        members = [r for r in rollouts if not r.failed]
        if not members or not self.has_group_reward_hook(type(self.env)):
            return
        report_group_hook_started()
        try:
            with attribute_to([r.rollout_id for r in members]):
                async with deadline(request.timeout_s) as stuck:
                    result = await self.env.compute_group_rewards(members)
            result = self.check_group_result(members, result)
        except RolloutFailure as e:
            for r in members:
                self.settle_group_failure(r, e.reason, e.message)
            return
        except TimeoutError:
            for r in members:
                r.fail("timeout", f"compute_group_rewards exceeded the {request.timeout_s} s timeout\n{stuck.stack}")
            return
        except Exception as e:
            for r in members:
                self.settle_group_failure(r, "group_reward_error", str(e) if isinstance(e, InvalidReward)
                                          else describe(e))
            return
        for r in members:
            if r.rollout_id in result:
                try:
                    r.rewards = {**r.rewards, **check_reward_dict(result[r.rollout_id], "compute_group_rewards")}
                except InvalidReward as e:
                    r.fail("reward_error", str(e))

    def check_group_result(self, members: list[BaseRollout], result: Any) -> dict[str, dict[str, float]]:
        """`compute_group_rewards`' result, or `InvalidReward` (the group's `group_reward_error`) when it is not
        `{rollout_id: dict}` over ids of the group (a subset is fine: the rest get no group components)."""
        if not isinstance(result, dict):
            raise InvalidReward(f"compute_group_rewards must return {{rollout_id: dict}}, got {type(result).__name__}")
        unknown = set(result) - {r.rollout_id for r in members}
        if unknown:
            raise InvalidReward(f"compute_group_rewards returned ids not in the group: {sorted(map(str, unknown))}")
        return result

    def settle_group_failure(self, r: BaseRollout, reason: str, error: str) -> None:
        """A failed group hook settles each member as an operational failure."""
        r.fail(reason, error)

    @staticmethod
    def result(r: BaseRollout, request: GroupRequest) -> RolloutResult:
        return RolloutResult(
            rollout_id=r.rollout_id, group_id=r.group_id, example_id=r.example_id, split=r.split,
            messages=r.messages, example_args=r.example_args, termination_reason=r.termination_reason or "env_error",
            error=r.error, rewards=r.rewards, turns=r.turns, tool_calls=r.tool_calls,
            started_at=r.started_at, finished_at=r.finished_at or time.time(),
        )


_RUNNERS: dict[type[BaseEnv], type[EnvRunner]] = {}
"""The runner of each env base class: looprl's `BaseEnv` (`register_sdk_base`) and other frameworks'
(`looprl.interop`)."""
_SDK_BASE: list[type[BaseEnv]] = []
"""looprl's `BaseEnv`, once `base_env` has named it."""


def register_sdk_base(base: type[BaseEnv]) -> None:
    """Name looprl's `BaseEnv` (`base_env` does as it defines it: this module cannot import it, being
    imported by it) and run its subclasses with `EnvRunner`."""
    _SDK_BASE[:] = [base]
    register_runner(base, EnvRunner)


def _sdk_base() -> type[BaseEnv]:
    """looprl's `BaseEnv`: its hooks are the defaults that mean "this env has no such hook"."""
    return _SDK_BASE[0]


def register_runner(base: type[BaseEnv], runner: type[EnvRunner]) -> None:
    """Run the envs that subclass `base` (an env base class) with `runner`."""
    _RUNNERS[base] = runner


def runner_class(env_cls: type[BaseEnv]) -> type[EnvRunner]:
    """The runner registered for `env_cls`'s nearest base class; a `TypeError` for a class with none."""
    for c in env_cls.__mro__:
        if c in _RUNNERS:
            return _RUNNERS[c]
    raise TypeError(f"{env_cls.__module__}.{env_cls.__qualname__} is not an environment: subclass "
                    "looprl.envs.BaseEnv (or a registered framework's env base class, e.g. benchmax's)")


def runner_for(env: BaseEnv) -> EnvRunner:
    """A runner holding `env`."""
    return runner_class(type(env))(env)
