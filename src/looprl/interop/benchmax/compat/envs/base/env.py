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

The class holds only benchmax's user contract: the scoring rules are the runtime's, on
`looprl.interop.benchmax.runner.BenchmaxRunner`, registered here for this class and its subclasses.
"""

from __future__ import annotations

from collections.abc import Mapping

from looprl.envs import BaseEnv as _LooprlBaseEnv
from looprl.envs import BaseRollout
from looprl.envs.runtime_api import limit_problems, register_runner
from looprl.interop.benchmax.runner import BenchmaxRunner

__all__ = ["BaseEnv", "BaseRollout"]


class BaseEnv(_LooprlBaseEnv):
    """Subclass as you would benchmax's `BaseEnv`; looprl runs its chat/tool loop."""

    def __init__(self, *, max_turns: int | None = None, max_tool_calls: int | None = None) -> None:
        if max_turns is not None:
            self.max_turns = max_turns
        if max_tool_calls is not None:
            self.max_tool_calls = max_tool_calls
        if self.max_turns is not None or self.max_tool_calls is not None:
            problems = limit_problems(type(self), 1 if self.max_turns is None else self.max_turns, self.max_tool_calls)
            if problems:
                raise ValueError("; ".join(problems))

    async def compute_reward(self, rollout: BaseRollout) -> Mapping[str, float] | None:  # type: ignore[override]
        return None

    async def compute_group_rewards(  # type: ignore[override]
            self, rollouts: list[BaseRollout]) -> Mapping[str, Mapping[str, float]] | None:
        return None


register_runner(BaseEnv, BenchmaxRunner)
