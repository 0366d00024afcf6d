"""Seeing a policy stop exploring: most groups without a learning signal, step after step.

When every rollout of a group gets the same reward (all right, all wrong, or all the same reply),
the group's advantages are all zero and it teaches nothing. A policy that collapses onto one
answer makes that the rule: every group's siblings begin alike, and the run goes on stepping while
it trains on nothing. `ExplorationWatch` follows the share of such groups per step (the metric
`no_signal_frac`): when it is above `share` for `steps` steps in a row, `observe` says so once
(again only after a step with signal). The orchestrator then logs `warning(...)` (and `looprl rl`
prints it, naming one such rollout and its inspector page); the inspector's run page replays the
watch over the stored steps and shows the same line. With `[orchestrator.collapse]` the orchestrator
also acts on it (`session.collapse_recovery`).

A step whose groups without signal all have every rollout at the task's maximum is a solved task, not a
stuck policy (`groups_solved`): the watch does not count those groups (on the demo it warned at steps
8-10, every reply right and brief). The maximum is `[orchestrator.collapse] solved_reward` where the
config gives it, else the best reward the run has seen (and a worse one seen too), which cannot tell a
policy that settled early on part of the reward from one that solved the task. One group all at the
run's worst among them and they all count, as a policy that answers alike, right or wrong by luck,
gives both kinds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from looprl.session.advantages import GroupAdvantages

STEPS = 3
"""Steps in a row."""
SHARE = 0.5
"""Share of a step's groups without signal above which the step counts."""


def step_counts(metrics: Mapping[str, float]) -> tuple[int, int]:
    """A stored step's groups sampled and those without signal that do not say the task is solved (`observe`'s
    `sampled` and `without_signal`), from its metrics."""
    sampled, skipped = int(metrics.get("groups_sampled", 0)), int(metrics.get("groups_skipped", 0))
    return sampled, skipped - int(metrics.get("groups_solved", 0))


class ExplorationWatch:
    def __init__(self, steps: int = STEPS, share: float = SHARE, solved_reward: float | None = None) -> None:
        self.steps, self.share = steps, share
        self.solved_reward = solved_reward
        """The reward of a reply that solves the task (`orchestrator.collapse.solved_reward`; None: unknown)."""
        self.overshot = False
        """Whether a rollout scored above `solved_reward` (said once: `overshoot`)."""
        self.streak: list[int] = []
        self.warned = False
        self.best, self.worst = float("-inf"), float("inf")
        """The best and worst train reward of any rollout so far."""

    def solved(self, advantages: Sequence[GroupAdvantages]) -> int:
        """A step's groups without signal that say the task is solved: all of them when every such group
        has all its rollouts at `solved_reward` or above (unknown: at the run's best reward so far, this
        step's counted, with a worse one seen before); else 0. A step mixing all-best and all-worst groups
        is a policy answering alike and right or wrong by luck (a collapse on a yes/no task), so none of its
        groups count as solved."""
        rewards = [r for a in advantages for r in a.rewards if r is not None]
        self.best, self.worst = max([self.best, *rewards]), min([self.worst, *rewards])
        known, top = self.solved_reward is not None, self.top
        skipped = [a for a in advantages if a.skipped]
        at_top = [a for a in skipped if a.rewards and all(r is not None and r >= top for r in a.rewards)]
        return len(at_top) if (known or self.best > self.worst) and len(at_top) == len(skipped) else 0

    @property
    def top(self) -> float:
        """The reward of a reply that solves the task: `solved_reward`, else the best rollout's so far."""
        return self.solved_reward if self.solved_reward is not None else self.best

    def overshoot(self) -> str | None:
        """Once, when a rollout scored above `solved_reward`: the warning that it is set too low (then any group
        at it counts as solved, however far below the best replies)."""
        if self.solved_reward is None or self.best <= self.solved_reward or self.overshot:
            return None
        self.overshot = True
        return (f"a rollout's reward {self.best:g} is above orchestrator.collapse.solved_reward = "
                f"{self.solved_reward:g}, the reward of a reply that solves the task: the collapse watch counts groups "
                "at it as solved; set it to the best total reward a reply can get (reward_weights included)")

    def observe(self, step: int, sampled: int, without_signal: int) -> bool:
        """Whether to warn after `step`, whose `without_signal` of `sampled` groups carried no signal."""
        if not self.stuck(sampled, without_signal):
            self.streak, self.warned = [], False
            return False
        self.streak.append(step)
        if len(self.streak) < self.steps or self.warned:
            return False
        self.warned = True
        return True

    def stuck(self, sampled: int, without_signal: int) -> bool:
        """Whether a step whose `without_signal` of `sampled` groups carried no signal counts towards a streak."""
        return sampled > 0 and without_signal / sampled > self.share

    def resume(self, steps: Sequence[Mapping[str, float]], rewards: tuple[float, float] | None) -> None:
        """Go on after `--resume` from the stored `steps` (each step's metrics with its `step`, in order) and the
        lowest and highest reward of the groups they counted: the streak, whether it warned, whether it said the
        overshoot."""
        for metrics in steps:
            self.replay(int(metrics["step"]), metrics)
        if rewards:
            self.worst, self.best = rewards
            self.overshot = self.solved_reward is not None and self.best > self.solved_reward

    def replay(self, step: int, metrics: Mapping[str, float]) -> str | None:
        """`observe` a stored step from its metrics, with the restart its rollback made (`collapse/rollback`): how a
        resumed run's watch picks up where it stopped, and how the inspector's run page shows the warnings. The
        warning line where it fired there, else None."""
        sampled, stuck = step_counts(metrics)
        line = self.warning(step, sampled, stuck) if self.observe(step, sampled, stuck) else None
        if metrics.get("collapse/rollback"):
            self.restart()
        return line

    def restart(self) -> None:
        """Forget the streak (after a rollback: the restored policy's own steps decide the next warning)."""
        self.streak, self.warned = [], False

    def warning(self, step: int, sampled: int, without_signal: int, example: str | None = None) -> str:
        """The one-line warning for the streak that ends at `step`; `example`: where to see such a group."""
        return (f"the policy stopped exploring: at each of steps {self.streak[0]}-{step} most groups "
                f"({without_signal} of {sampled} at step {step}) gave every rollout the same reward, so they "
                f"taught nothing{f'; e.g. rollout {example}' if example else ''} (docs/training.md, 'Collapse': "
                "remedies: more prompts per step (orchestrator.batch_size), a lower or decaying learning rate "
                "(trainer.optim), an entropy bonus (trainer.loss.entropy_coef), clip-higher, dynamic sampling or a "
                "KL term; collapse recovery, [orchestrator.collapse], steps in by itself unless its method is 'off')")
