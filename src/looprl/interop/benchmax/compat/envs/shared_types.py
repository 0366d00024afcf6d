"""benchmax's shared types for env code: the split, examples, reward maps and `RolloutFailure`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from looprl.envs.failures import RolloutFailure as _LooprlRolloutFailure
from looprl.envs.types import DatasetSplit
from looprl.envs.types import Example as _LooprlExample

RewardMap = Mapping[str, float]


class Example(_LooprlExample):
    """A looprl `Example` that also takes benchmax's positional form, `Example(id, payload)`."""

    def __init__(self, id: str | None = None, payload: Any = None, **fields: Any) -> None:
        if id is not None:
            fields["id"] = id
        if payload is not None:
            fields["payload"] = payload
        super().__init__(**fields)


class RolloutFailure(_LooprlRolloutFailure):
    """benchmax's `RolloutFailure(termination_reason, message)`; looprl's runtime settles it by `reason`."""

    def __init__(self, termination_reason: str, message: str) -> None:
        if termination_reason == "finished":
            raise ValueError("a rollout failure cannot terminate as 'finished'")
        super().__init__(termination_reason, message)
        self.termination_reason = termination_reason


__all__ = ["DatasetSplit", "Example", "RewardMap", "RolloutFailure"]
