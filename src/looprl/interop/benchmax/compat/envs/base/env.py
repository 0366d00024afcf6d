"""benchmax's `BaseEnv` on looprl's loop: benchmax's constructor, defaults and scoring rules.

Where benchmax 0.2 and looprl's own `BaseEnv` differ, this class follows benchmax:
- `max_turns` / `max_tool_calls` may come from the constructor (checked there, as benchmax does);
- both reward hooks are optional and may return None: a rollout scored only by
  `compute_group_rewards` is no `reward_error`;
- `compute_group_rewards` must cover exactly the rollouts it was given, must not repeat a component
  that `compute_reward` returned, and a finished rollout must end with some component; each mistake
  is the group's `group_reward_error`;
- a failing reward hook relabels only a `finished` rollout; one stopped by a budget
  (`max_turns_exceeded`, ...) keeps its reason, loses its components and records the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from looprl.envs import BaseEnv as _LooprlBaseEnv
from looprl.envs import BaseRollout
from looprl.envs.failures import RolloutFailure
from looprl.envs.runtime_api import InvalidReward, check_reward_dict

__all__ = ["BaseEnv", "BaseRollout"]


class BaseEnv(_LooprlBaseEnv):
    """Subclass as you would benchmax's `BaseEnv`; looprl runs its chat/tool loop."""

    def __init__(self, *, max_turns: int | None = None, max_tool_calls: int | None = None) -> None:
        if max_turns is not None:
            self.max_turns = max_turns
        if max_tool_calls is not None:
            self.max_tool_calls = max_tool_calls
        if self.max_turns is not None or self.max_tool_calls is not None:
            problems = self.limit_problems(1 if self.max_turns is None else self.max_turns, self.max_tool_calls)
            if problems:
                raise ValueError("; ".join(problems))

    @classmethod
    def contract_problems(cls) -> list[str]:
        """Only the hooks: benchmax envs may set their limits in the constructor (checked at rollout time)."""
        return cls.hook_problems()

    async def compute_reward(self, rollout: BaseRollout) -> Mapping[str, float] | None:  # type: ignore[override]
        return None

    async def compute_group_rewards(  # type: ignore[override]
            self, rollouts: list[BaseRollout]) -> Mapping[str, Mapping[str, float]] | None:
        return None

    async def _score_rollout(self, r: BaseRollout) -> None:
        try:
            value = await self.compute_reward(r)
            if value is not None:
                r.rewards = check_reward_dict(value, "compute_reward")
        except TimeoutError:
            raise
        except RolloutFailure as e:
            _settle(r, e.reason, e.message)
        except Exception as e:
            _settle(r, "reward_error", str(e) if isinstance(e, InvalidReward) else f"{type(e).__name__}: {e}")

    def _check_group_result(self, members: list[BaseRollout], result: Any) -> dict[str, dict[str, float]]:
        if result is None:
            result = {}
        elif not isinstance(result, Mapping):
            raise InvalidReward(f"compute_group_rewards must return a mapping or None, got {type(result).__name__}")
        elif set(result) != {r.rollout_id for r in members}:
            ids = {r.rollout_id for r in members}
            raise InvalidReward(f"compute_group_rewards returned misaligned rollout IDs: "
                                f"missing={sorted(ids - set(result))}, unknown={sorted(map(str, set(result) - ids))}")
        checked = {rid: check_reward_dict(rewards, "compute_group_rewards") for rid, rewards in result.items()}
        for r in members:
            group = checked.get(r.rollout_id, {})
            if r.rewards.keys() & group.keys():
                raise InvalidReward(f"individual and group rewards contain duplicate keys for rollout "
                                    f"{r.rollout_id!r}: {sorted(r.rewards.keys() & group.keys())}")
            if not (r.rewards or group) and r.termination_reason == "finished":
                raise InvalidReward(f"rollout {r.rollout_id!r} has no rewards; implement compute_reward or "
                                    "compute_group_rewards")
        return checked

    def _settle_group_failure(self, r: BaseRollout, reason: str, error: str) -> None:
        _settle(r, reason, r.error or error)


def _settle(r: BaseRollout, reason: str, error: str) -> None:
    """benchmax's rule: a scoring failure relabels a clean finish; a budget stop keeps its reason."""
    if r.termination_reason == "finished":
        r.fail(reason, error)
    else:
        r.rewards, r.error = {}, error
