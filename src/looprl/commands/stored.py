"""What `looprl rescore` and `looprl replay` rebuild from a run store: the env, its examples, its reward rule.

The store keeps each rollout's transcript and `example_args`, not the example's payload as such. For
`BaseEnv` the transcript opens with the example's `prompt_messages` (everything before the first
assistant turn), so the example is rebuilt from the row itself, with its stored id: no dataset is
loaded, and an env whose dataset has since changed still re-scores what was run.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from looprl.config import OrchestratorConfig
from looprl.envs.base_env import BaseEnv
from looprl.envs.environment import Environment
from looprl.envs.runtime_api import TranscriptCaps
from looprl.envs.types import Example, RolloutResult
from looprl.envserver.loading import instantiate, load_env_class
from looprl.errors import UserError
from looprl.session.rewards import run_reward_rule
from looprl.store.records import RolloutRecord, RunInfo


@runtime_checkable
class OfflineScoring(Protocol):
    """An env that scores a stored rollout again itself, from its framework's record of it (`native_trace`)."""

    async def rescore(self, stored: RolloutResult) -> RolloutResult: ...

    async def aclose(self) -> None: ...


def env_spec(run: RunInfo, override: str | None) -> str:
    """`--env FILE:Class` when given (the edited env), else the env the run recorded."""
    return override or run.env


def env_args(run: RunInfo) -> dict[str, Any]:
    """The env constructor's keyword arguments the run used (`[env] args`, `looprl eval --env-args`)."""
    env = run.config.get("env")
    if isinstance(env, dict):  # rl's [env], eval's env runtime config
        return dict(env.get("args", {}))
    return dict(run.config.get("env_args", {}))  # an eval run stored before its config held the env runtime


def transcript_caps(run: RunInfo) -> TranscriptCaps:
    """The caps the run held its rollouts to (`env.max_tool_result_chars`, `env.max_transcript_chars`), so that
    a replay cuts tool results as the run did; none for a run stored before they existed."""
    env = run.config.get("env")
    env = env if isinstance(env, dict) else {}
    return TranscriptCaps(env.get("max_tool_result_chars"), env.get("max_transcript_chars"))


def load_env(run: RunInfo, override: str | None) -> Environment:
    """An instance of the run's env (or of `override`) built with the run's env args."""
    return instantiate(load_env_class(env_spec(run, override)), env_args(run))


def load_rescoring_env(run: RunInfo, override: str | None) -> BaseEnv | OfflineScoring:
    """The env `rescore` runs: a `BaseEnv` (its reward hooks), or one that scores stored rollouts itself."""
    env = load_env(run, override)
    if not isinstance(env, BaseEnv | OfflineScoring):
        raise UserError(f"{type(env).__name__} is neither a BaseEnv nor an env that re-scores stored rollouts "
                        "(a verifiers v1 env): its reward code cannot be re-run")
    return env


def prompt_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript's messages before the model's first turn: the example's `prompt_messages`."""
    for i, message in enumerate(messages):
        if message.get("role") == "assistant":
            return messages[:i]
    return messages


def stored_example(record: RolloutRecord) -> Example:
    """The example a stored rollout ran on, with the id it had."""
    return Example(id=record.example_id,
                   payload={"prompt_messages": prompt_messages(record.messages), **record.example_args})


def reward_settings(run: RunInfo) -> OrchestratorConfig:
    """The run's reward rule (`reward_weights`, `include_failed`, `normalize_std`)."""
    return run_reward_rule(run.kind, run.config)
