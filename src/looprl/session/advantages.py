"""Group-relative advantages: each rollout's reward minus its group's mean (GRPO's baseline), divided by
the group's std (plus `EPS`) when the run's rule says `normalize_std`.

The rule is the run's `OrchestratorConfig` (`reward_weights`, `include_failed`, `normalize_std`), passed
whole, so its defaults live in one place, the config: `normalize_std` is on by default (GRPO's and TRL's
scaling); off gives Dr. GRPO's unscaled advantages, which do not up-weight near-unanimous groups.
A rollout's reward is the weighted total of its components (`looprl.session.rewards.rollout_reward`). Failed rollouts
(operational failures, not `scored`) have no reward: by default they stay out of the baseline and out
of the loss (advantage None); with `include_failed` they count as reward 0.

A group whose advantages are all zero (every rollout scored alike, or a single scored rollout) has
no learning signal: it is marked `skipped`, so the orchestrator can leave it out of the batch and
count it. A group whose rollouts all failed, or any of them under `failed_group = "drop"`, is out of
the batch for its failures: every advantage None, `skipped` and `failed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from looprl.config import OrchestratorConfig
from looprl.envs.types import SCORED_REASONS, TRUNCATED_REASONS, RolloutResult
from looprl.session.rewards import mean_std, rollout_reward

ZERO = 1e-8
EPS = 1e-6
"""Added to the group's std before dividing by it (a group of equal rewards has std 0)."""
FINISHED_REASONS = SCORED_REASONS - TRUNCATED_REASONS
"""Scored rollouts no length limit cut off; under `include_failed` a failure has an advantage but is not one."""


@dataclass
class GroupAdvantages:
    rewards: list[float | None]
    advantages: list[float | None]
    """None for rollouts kept out of the loss."""
    skipped: bool
    """True when no rollout of the group has a non-zero advantage."""
    failed: bool = False
    """True when the group is out for its failed rollouts (all of them, or one under `failed_group = "drop"`)."""
    masked: int = 0
    """Rollouts cut off by a length limit that `orchestrator.mask_truncated` left out of the loss (their advantages
    None; the group is skipped when no other rollout has one)."""


def group_advantages(rewards: Sequence[float | None], normalize_std: bool) -> GroupAdvantages:
    """Advantages of one group's rewards: reward minus the mean, over (std + `EPS`) with `normalize_std`
    (None rewards stay None and are not in the baseline)."""
    present = [r for r in rewards if r is not None]
    mean, std = mean_std(present)
    scale = std + EPS if normalize_std else 1.0
    advantages = [None if r is None else (r - mean) / scale for r in rewards]
    return GroupAdvantages(list(rewards), advantages, without_signal(advantages))


def without_signal(advantages: Sequence[float | None]) -> bool:
    """Whether no rollout of a group carries a non-zero advantage (the group is skipped)."""
    return all(a is None or abs(a) < ZERO for a in advantages)


def batch_advantages(groups: Sequence[Sequence[RolloutResult]], rule: OrchestratorConfig) -> list[GroupAdvantages]:
    """`group_advantages` of every group of a step, from the rollouts' reward components, by the run's rule."""
    out = []
    for group in groups:
        adv = group_advantages([rollout_reward(r, rule.reward_weights, rule.include_failed) for r in group],
                               rule.normalize_std)
        failures = sum(not r.scored for r in group)
        if failures and (failures == len(group) or rule.failed_group == "drop"):
            adv = GroupAdvantages(adv.rewards, [None] * len(group), skipped=True, failed=True)
        elif rule.mask_truncated:
            adv = masked_truncated([r.termination_reason for r in group], adv)
        out.append(adv)
    return out


def masked_truncated(reasons: Sequence[str], adv: GroupAdvantages) -> GroupAdvantages:
    """`adv` of a group whose rollouts ended for `reasons`, with those a length limit cut off out of the loss
    (`orchestrator.mask_truncated`): their rewards stay in the baseline the others' advantages were taken against.
    A group without signal keeps its advantages, and so does one in which no reply finished: the mask prefers a
    finished reply to one cut off, and with none to prefer, leaving the group out would only lose what its rewards
    say about the answer (a task whose replies all start out running past the limit would train nothing until one
    stops by chance).
    The orchestrator and the inspector's baseline both take a group's advantages through it."""
    cut = [reason in TRUNCATED_REASONS and a is not None for reason, a in zip(reasons, adv.advantages)]
    finished = any(reason in FINISHED_REASONS and a is not None for reason, a in zip(reasons, adv.advantages))
    if adv.skipped or not (any(cut) and finished):
        return adv
    kept = [None if c else a for c, a in zip(cut, adv.advantages)]
    return GroupAdvantages(adv.rewards, kept, without_signal(kept), masked=sum(cut))
