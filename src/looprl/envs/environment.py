"""`Environment`: the lower-level contract, for environments that own their whole group loop.

Most users subclass `BaseEnv`, which implements `run_group` as the standard chat/tool loop. Subclass
`Environment` directly when the loop itself is yours (self-play, multi-agent, a custom simulator):
you get a `GroupRequest` (the example, the rollout ids, each rollout's gateway URL) and return one
`RolloutResult` per rollout id. Log records emitted during `run_group` belong to every rollout of the
group; narrow them with `looprl.envs.logging.rollout_context(rollout_id)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path

from looprl.envs.dataset import Dataset
from looprl.envs.types import DatasetSplit, GroupRequest, RolloutResult


class Environment(ABC):
    """A source of examples and a way to run a group of sibling rollouts on one of them."""

    reward_weights: dict[str, float] = {}  # noqa: RUF012 (read-only; an instance may set its own)
    """The weight of each reward component in the rollout's total, as the env means them (unnamed: 1).
    Weight 0 makes a component monitor-only: stored and shown, not counted. The run's own
    `reward_weights` (`--reward-weights`, `orchestrator.reward_weights`) override these."""

    @abstractmethod
    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *,
                             max_examples: int | None = None) -> Dataset:
        """Map a split ("train" or "eval") to a finite dataset; `max_examples` loads a small slice."""

    @abstractmethod
    async def run_group(self, request: GroupRequest) -> list[RolloutResult]:
        """Run one rollout per `request.rollout_ids` and report each; a failure settles only its rollout."""

    async def aclose(self) -> None:  # noqa: B027 (an optional hook: a no-op unless overridden)
        """Close environment-owned shared resources when the environment is done."""
