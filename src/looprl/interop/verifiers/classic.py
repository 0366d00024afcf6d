"""An installed classic verifiers environment package (verifiers 0.3.x), `vf:ENV_ID`, as a looprl `Environment`.

`env_class("reverse-text")` makes a looprl environment class whose instances call verifiers'
`load_environment("reverse-text", **env_args)`. Its dataset (`get_dataset`, `get_eval_dataset`)
becomes looprl's train and eval splits, one example per row (`prompt` as `prompt_messages`, the
other columns kept). Each rollout runs verifiers' own `env.rollout` with a client bound to that
rollout's gateway URL, so every model call is recorded; then the env's rubric scores the group the
way verifiers does (`score_rollout` per rollout, or `score_group` when it has group reward
functions). The stored components are verifiers' metrics and the env declares the rubric's weights
as its `reward_weights`, so looprl's total equals verifiers' `state["reward"]` (zero-weight metrics
such as `num_turns` are monitor-only). `termination` maps verifiers' stop conditions and errors.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any, ClassVar

from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.logging import attribute_to
from looprl.envs.types import SCORED_REASONS, DatasetSplit, Example, GroupRequest, Message, RolloutResult


def env_class(env_id: str) -> type[Environment]:
    """A looprl environment class for the installed verifiers env package `env_id`."""
    return type(env_id.replace("-", "_"), (VerifiersEnvironment,), {"env_id": env_id})


def termination(state: Any, max_turns: int | None) -> tuple[str, str | None]:
    """looprl's termination reason and error for a finished verifiers rollout state (README table)."""
    from verifiers import errors

    error = state.get("error")
    if error is not None:  # the exception in a live state; {"error": class name, ...} in a RolloutOutput
        kind = type(error) if isinstance(error, BaseException) else getattr(errors, str(error.get("error")), Exception)
        text = (f"{type(error).__name__}: {error}" if isinstance(error, BaseException)
                else str(error.get("error_chain_repr") or error))
        if isinstance(error, BaseException) and error.__cause__ is not None:
            text += f" (caused by {type(error.__cause__).__name__}: {error.__cause__})"
        reason = ("model_error" if issubclass(kind, errors.ModelError) else
                  "tool_error" if issubclass(kind, errors.ToolError) else "env_error")
        return reason, text
    stop = state.get("stop_condition")
    if stop == "timeout_reached":
        return "timeout", "verifiers' timeout_seconds ran out"
    if stop == "prompt_too_long":
        return "context_exceeded", None
    if state.get("is_truncated") or stop == "max_total_completion_tokens_reached":
        return "output_exceeded", None
    if stop == "max_turns_reached" and max_turns != 1:
        return "max_turns_exceeded", None
    return "finished", None  # a single-turn env's max_turns_reached, no_tools_called, the env's own conditions


def _plain(message: Any) -> Message:
    return dict(message.model_dump(exclude_none=True) if hasattr(message, "model_dump") else message)


class VerifiersEnvironment(Environment):
    env_id: ClassVar[str]

    def __init__(self, **env_args: Any) -> None:
        import verifiers as vf

        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        self.env = vf.load_environment(self.env_id, **env_args)
        if threading.current_thread() is threading.main_thread():
            for s, handler in handlers.items():  # verifiers' handlers would exit the env worker mid-group
                signal.signal(s, handler)
        own = logging.getLogger("verifiers")  # verifiers logs to its own stderr handler and stops propagation:
        own.handlers.clear()  # hand its records to looprl's capture instead, at their own level, on their rollout
        own.propagate = True
        rubric = self.env.rubric
        self.reward_weights = dict(zip(rubric._get_reward_func_names(), map(float, rubric._get_reward_weights())))

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        rows = await asyncio.to_thread(self._rows, split, max_examples)
        return Dataset((Example(id=str(row.get("example_id", i)), payload=self._payload(row))
                        for i, row in enumerate(rows)), source=f"{self.env_id} {split} dataset")

    def _rows(self, split: DatasetSplit, max_examples: int | None) -> list[dict[str, Any]]:
        dataset = self.env.get_dataset() if split == "train" else self.env.get_eval_dataset()
        if max_examples is not None:
            dataset = dataset.select(range(min(max_examples, len(dataset))))
        return list(dataset.to_list())

    @staticmethod
    def _payload(row: dict[str, Any]) -> dict[str, Any]:
        prompt = row["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [_plain(m) for m in prompt]
        return {"prompt_messages": messages, **{k: v for k, v in row.items() if k != "prompt"}}

    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        from openai import AsyncOpenAI
        from verifiers.clients import OpenAIChatCompletionsClient

        started = time.time()
        row = {"prompt": request.example.prompt_messages, **request.example.example_args}

        async def one(rollout_id: str) -> Any:
            client = OpenAIChatCompletionsClient(AsyncOpenAI(base_url=request.base_url(rollout_id), api_key="looprl",
                                                             max_retries=0))
            with attribute_to([rollout_id]):
                try:
                    async with asyncio.timeout(request.timeout_s):
                        return await self.env.rollout(dict(row), client, request.model, None)
                finally:
                    await client.close()

        outcomes = await asyncio.gather(*(one(rid) for rid in request.rollout_ids), return_exceptions=True)
        states = [(rid, s) for rid, s in zip(request.rollout_ids, outcomes) if not isinstance(s, BaseException)]
        await self._score([s for _, s in states], [rid for rid, _ in states])
        return [self._result(request, rid, started, outcome) for rid, outcome in zip(request.rollout_ids, outcomes)]

    async def _score(self, states: list[Any], rollout_ids: list[str]) -> None:
        """As verifiers scores: the rubric on each rollout (its records on that rollout), or on the
        group when it has group reward functions; then the rubric's cleanup."""
        rubric = self.env.rubric
        if not states:
            return
        if rubric.has_group_rewards:
            with attribute_to(rollout_ids):
                await rubric.score_group(states)
        else:
            for rollout_id, state in zip(rollout_ids, states):
                with attribute_to([rollout_id]):
                    await rubric.score_rollout(state)
        for state in states:
            await rubric.cleanup(state)

    def _result(self, request: GroupRequest, rollout_id: str, started: float, outcome: Any) -> RolloutResult:
        prompt = [dict(m) for m in request.example.prompt_messages]
        if isinstance(outcome, BaseException):
            reason = "timeout" if isinstance(outcome, TimeoutError) else "env_error"
            error: str | None = f"{type(outcome).__name__}: {outcome}\n" + "".join(
                traceback.format_exception(outcome)[-6:])
            new: list[Message] = []
            rewards: dict[str, float] = {}
        else:
            reason, error = termination(outcome, getattr(self.env, "max_turns", None))
            new = [_plain(m) for m in outcome.get("completion") or []]
            rewards = {k: float(v) for k, v in (outcome.get("metrics") or {}).items()}
        return RolloutResult(
            rollout_id=rollout_id, group_id=request.group_id, example_id=request.example.id, split=request.split,
            messages=prompt + new, example_args=request.example.example_args, termination_reason=reason,
            error=error, rewards=rewards if reason in SCORED_REASONS else {},
            turns=sum(m.get("role") == "assistant" for m in new), tool_calls=sum(m.get("role") == "tool" for m in new),
            started_at=started, finished_at=time.time())

    async def aclose(self) -> None:
        await self.env._teardown()
