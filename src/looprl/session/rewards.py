"""Reward aggregation: components merged per rollout, zero-filled across a batch, weighted into a total.

Every command that scores rollouts (`rl`, `eval`, `validate`) goes through these, with the run's
`reward_weights` (weight 1 for a component the weights leave out).

seeds/001: "the trainer fills a missing component with zero wherever another rollout in the same
training batch emitted that component". Failed rollouts (operational failures) carry no components
and no total; they are reported, never scored as zero unless the run asks for it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from looprl.envs.types import RolloutResult


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
