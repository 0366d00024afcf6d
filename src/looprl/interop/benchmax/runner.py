"""benchmax's scoring rules on looprl's runner, for envs subclassing the compatibility layer's `BaseEnv`.

`compat.envs.base.BaseEnv` registers `BenchmaxRunner` for itself, so the runtime scores its subclasses
by benchmax's rules (listed there) while the env class keeps only benchmax's user contract: a benchmax
env's own helper methods (upstream's math env has a `_score_rollout`) never meet the runtime's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from looprl.envs import BaseEnv, BaseRollout
from looprl.envs.failures import RolloutFailure
from looprl.envs.runtime_api import EnvRunner, InvalidReward, check_reward_dict


class BenchmaxRunner(EnvRunner):
    @classmethod
    def contract_problems(cls, env_cls: type[BaseEnv]) -> list[str]:
        """Only the hooks: benchmax envs may set their limits in the constructor (checked at rollout time)."""
        return cls.hook_problems(env_cls)

    async def score_rollout(self, r: BaseRollout) -> None:
        try:
            value = await self.env.compute_reward(r)
            if value is not None:
                r.rewards = check_reward_dict(value, "compute_reward")
        except TimeoutError:
            raise
        except RolloutFailure as e:
            _settle(r, e.reason, e.message)
        except Exception as e:
            _settle(r, "reward_error", str(e) if isinstance(e, InvalidReward) else f"{type(e).__name__}: {e}")

    def check_group_result(self, members: list[BaseRollout], result: Any) -> dict[str, dict[str, float]]:
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

    def settle_group_failure(self, r: BaseRollout, reason: str, error: str) -> None:
        _settle(r, reason, r.error or error)


def _settle(r: BaseRollout, reason: str, error: str) -> None:
    """benchmax's rule: a scoring failure relabels a clean finish; a budget stop keeps its reason."""
    if r.termination_reason == "finished":
        r.fail(reason, error)
    else:
        r.rewards, r.error = {}, error
