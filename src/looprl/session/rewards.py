"""Reward aggregation: components merged per rollout, zero-filled across a batch, weighted into a total.

Every command that scores rollouts (`rl`, `eval`, `validate`) goes through these, with the run's
`reward_weights` (weight 1 for a component the weights leave out).

seeds/001: "the trainer fills a missing component with zero wherever another rollout in the same
training batch emitted that component". Failed rollouts (operational failures) carry no components
and no total; they are reported, never scored as zero unless the run asks for it. Which components
each rollout was zero-filled on is stored with it (`mark_zero_filled`), so viewers can mark them.

`orchestrator.reward_weights` may name a component the env never emits (a typo): `UnusedWeights`
warns once, at the first step whose scored rollouts all lack it, naming the ones they emit. A warning,
not an error: an env may emit a component only on some rollouts (a bonus, a tool-use penalty), so a
step without it proves nothing and stopping the run there would kill a correct config.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from looprl.config import OrchestratorConfig
from looprl.envs.types import RolloutResult
from looprl.store.records import RolloutRecord
from looprl.utils.logger import get_logger


def component_names(results: Iterable[RolloutResult]) -> list[str]:
    """Every component emitted by a scored rollout of the batch, in first-seen order."""
    names: dict[str, None] = {}
    for r in results:
        if r.scored:
            names.update(dict.fromkeys(r.rewards))
    return list(names)


def zero_filled(rewards: Mapping[str, float], names: Sequence[str]) -> dict[str, float]:
    """`rewards` with every batch component present (missing ones as 0.0)."""
    return {name: float(rewards.get(name, 0.0)) for name in names}


def mark_zero_filled(batch: Sequence[RolloutRecord]) -> None:
    """Set each record's `zero_filled`: the batch's components a scored rollout did not emit (sorted);
    none for failed ones. The batch is the set `reward_stats` averages over."""
    names = component_names(batch)
    for r in batch:
        r.zero_filled = sorted(n for n in names if n not in r.rewards) if r.scored else []


def total_reward(rewards: Mapping[str, float], weights: Mapping[str, float] | None = None) -> float:
    """Weighted sum of components (weight 1 unless configured). Zero-filled components add nothing."""
    weights = weights or {}
    return float(sum(weights.get(k, 1.0) * v for k, v in rewards.items()))


def rollout_reward(result: RolloutResult, weights: Mapping[str, float] | None = None,
                   include_failed: bool = False) -> float | None:
    """The rollout's total reward; None for a failed rollout unless failures count as 0."""
    if result.scored:
        return total_reward(result.rewards, weights)
    return 0.0 if include_failed else None


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def reward_stats(results: Sequence[RolloutResult], weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Batch means and stds of the total and of each zero-filled component, over scored rollouts."""
    scored = [r for r in results if r.scored]
    names = component_names(scored)
    stats: dict[str, float] = {}
    totals = [total_reward(r.rewards, weights) for r in scored]
    stats["reward"], stats["reward_std"] = mean_std(totals)
    for name in names:
        values = [zero_filled(r.rewards, names)[name] for r in scored]
        stats[f"reward/{name}"], stats[f"reward/{name}_std"] = mean_std(values)
    return stats


class UnusedWeights:
    """Warns about each weighted component that a step's scored rollouts all lack (once per name)."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        self.unchecked = set(weights)

    def check(self, step: int, results: Iterable[RolloutResult]) -> list[str]:
        """The weighted names this step's scored rollouts all lack (each returned once per run), logged."""
        scored = [r for r in results if r.scored]
        if not scored or not self.unchecked:
            return []
        emitted = component_names(scored)
        missing = sorted(self.unchecked - set(emitted))
        self.unchecked -= set(missing)
        for name in missing:
            get_logger().warning("orchestrator.reward_weights names {!r}, but no scored rollout of step {} emitted it "
                                 "(they emitted: {}); check the name", name, step, ", ".join(emitted) or "nothing")
        return missing


def run_reward_rule(kind: str, config: Mapping[str, Any]) -> OrchestratorConfig:
    """The reward rule a stored run scored with (`reward_weights`, `include_failed`, `normalize_std`, `failed_group`),
    from its resolved config: an `rl` run's `[orchestrator]`; an `eval` run's `--reward-weights` with
    the default rest. `looprl rescore`, `looprl replay` and the inspector's reward arithmetic use it."""
    if kind == "rl":
        return OrchestratorConfig.model_validate(config.get("orchestrator", {}))
    return OrchestratorConfig(reward_weights=config.get("reward_weights") or {})
