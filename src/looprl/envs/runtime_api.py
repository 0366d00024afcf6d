"""The seam between the environment SDK and the code that runs environments: what `looprl.envserver`,
`looprl rescore` and `looprl replay` use of `looprl.envs` beyond the user contract.

Env authors never import it (it is not in `looprl.envs.__all__`). The runtime imports this module and
the contract's public modules, never the private `_` modules: an import-linter contract in
`pyproject.toml` forbids `looprl.envs._*` outside `looprl.envs`, so what the runtime depends on is
listed here, in one place. Nothing here is a name on the env: `BaseEnv` holds only the user's hooks,
and the runtime drives them through a runner that holds the env (`EnvRunner`, `runner_for`).

- the shared HTTP pool of `BaseEnv`'s model clients: `warm_up` before the first rollout, `aclose_pool`
  when the host shuts down;
- progress reports while a group runs (`Reporter`, `reporting_to`), which the env worker streams to
  its server so finished rollouts survive the worker's death;
- the contract checks on a `BaseEnv` class (`contract_problems`, `has_group_reward_hook`, and
  `limit_problems` for limits a constructor sets);
- `EnvRunner` and `register_runner`, for another framework's env base class whose scoring rules differ
  (`looprl.interop`'s benchmax layer);
- `BaseEnv`'s scoring steps run alone, on rollouts rebuilt from results (`rollout_from_result`):
  `score_rollout` (`compute_reward`), `score_group` (`compute_group_rewards`), and `score_waiting`
  (the group hook on rollouts whose worker died while they waited for it);
- the run's caps on a tool result and a transcript (`TranscriptCaps`, `capped_to`), and the size and error
  the runtime holds every environment's transcripts to (`transcript_chars`, `transcript_error`);
- the reward checks `BaseEnv` applies to its hooks' results (`check_reward_dict`, `InvalidReward`), for
  adapters of other frameworks' envs that score through hooks of their own (`looprl.interop`).
"""

from __future__ import annotations

from looprl.envs._caps import TRANSCRIPT_TOO_LARGE, TranscriptCaps, capped_to, transcript_chars, transcript_error
from looprl.envs._model_client import aclose_pool, warm_up
from looprl.envs._progress import Reporter, reporting_to
from looprl.envs._rewards_check import InvalidReward, check_reward_dict
from looprl.envs._runner import EnvRunner, limit_problems, register_runner, runner_class, runner_for
from looprl.envs.base_env import BaseEnv
from looprl.envs.rollout import BaseRollout
from looprl.envs.types import Example, GroupRequest, RolloutResult

__all__ = [
    "TRANSCRIPT_TOO_LARGE",
    "EnvRunner",
    "InvalidReward",
    "Reporter",
    "TranscriptCaps",
    "aclose_pool",
    "capped_to",
    "check_reward_dict",
    "contract_problems",
    "has_group_reward_hook",
    "limit_problems",
    "register_runner",
    "reporting_to",
    "rollout_from_result",
    "score_group",
    "score_rollout",
    "score_waiting",
    "transcript_chars",
    "transcript_error",
    "warm_up",
]


def rollout_from_result(result: RolloutResult, example: Example) -> BaseRollout:
    """A completed rollout as its reward hooks see it again (transcript, counters, rewards, times), from its
    result or its stored record, on the `example` it ran on."""
    return BaseRollout(rollout_id=result.rollout_id, group_id=result.group_id, example=example, split=result.split,
                       messages=[dict(m) for m in result.messages], turns=result.turns, tool_calls=result.tool_calls,
                       termination_reason=result.termination_reason, rewards=dict(result.rewards),
                       started_at=result.started_at, finished_at=result.finished_at)


def contract_problems(env_cls: type[BaseEnv]) -> list[str]:
    """What the `BaseEnv` subclass `env_cls` gets wrong about the contract (empty when it is fine)."""
    return runner_class(env_cls).contract_problems(env_cls)


def has_group_reward_hook(env_cls: type[BaseEnv]) -> bool:
    """Whether the `BaseEnv` subclass `env_cls` scores its groups with `compute_group_rewards`."""
    return runner_class(env_cls).has_group_reward_hook(env_cls)


async def score_rollout(env: BaseEnv, rollout: BaseRollout) -> None:
    """`compute_reward` on a completed rollout, as `run_group` runs it (`RolloutFailure` propagates)."""
    await runner_for(env).score_rollout(rollout)


async def score_group(env: BaseEnv, rollouts: list[BaseRollout], request: GroupRequest) -> None:
    """`compute_group_rewards` on the group's rollouts not failed, as `run_group` runs it (a failing hook
    fails them)."""
    await runner_for(env).score_group(rollouts, request)


async def score_waiting(env: BaseEnv, request: GroupRequest, results: list[RolloutResult]) -> list[RolloutResult]:
    """`compute_group_rewards` on rollouts that were done and waited for it (their results: transcripts,
    `compute_reward` components), without their `rollout_context`s, as `score_group` scores them."""
    rollouts = [rollout_from_result(r, request.example) for r in results]
    runner = runner_for(env)
    await runner.score_group(rollouts, request)
    return [runner.result(r, request) for r in rollouts]
