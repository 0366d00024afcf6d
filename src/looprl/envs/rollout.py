"""`BaseRollout`: the state of one rollout as env hooks see it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from looprl.envs.types import DatasetSplit, Example, Message


@dataclass
class BaseRollout:
    """One attempt at one example. Hooks read `messages`, `example_args` and `split`.

    `messages` is the full transcript (prompt, assistant turns, tool results); `example_args` holds
    every payload field but `prompt_messages`. The runtime fills in the rest as the rollout runs.
    """

    rollout_id: str
    group_id: str
    example: Example
    split: DatasetSplit
    messages: list[Message] = field(default_factory=list)
    turns: int = 0
    tool_calls: int = 0
    termination_reason: str | None = None
    error: str | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    @property
    def example_id(self) -> str:
        return self.example.id

    @property
    def example_args(self) -> dict[str, Any]:
        return self.example.example_args

    @property
    def failed(self) -> bool:
        """True once an operational failure settled this rollout (it is then never scored)."""
        from looprl.envs.types import SCORED_REASONS

        return self.termination_reason is not None and self.termination_reason not in SCORED_REASONS

    def fail(self, reason: str, error: str) -> None:
        """Settle this rollout as an operational failure: no reward components, the error kept."""
        self.termination_reason = reason
        self.error = error
        self.rewards = {}
