"""Seeing a policy stop exploring: most groups without a learning signal, step after step.

When every rollout of a group gets the same reward (all right, all wrong, or all the same reply),
the group's advantages are all zero and it teaches nothing. A policy that collapses onto one
answer makes that the rule: every group's siblings begin alike, and the run goes on stepping while
it trains on nothing. `ExplorationWatch` follows the share of such groups per step (the metric
`no_signal_frac`): when it is above `share` for `steps` steps in a row, `observe` says so once
(again only after a step with signal). The orchestrator then logs `warning(...)` (and `looprl rl`
prints it, naming one such rollout and its inspector page); the inspector's run page replays the
watch over the stored steps and shows the same line.
"""

from __future__ import annotations

STEPS = 3
"""Steps in a row."""
SHARE = 0.5
"""Share of a step's groups without signal above which the step counts."""


class ExplorationWatch:
    def __init__(self, steps: int = STEPS, share: float = SHARE) -> None:
        self.steps, self.share = steps, share
        self.streak: list[int] = []
        self.warned = False

    def observe(self, step: int, sampled: int, without_signal: int) -> bool:
        """Whether to warn after `step`, whose `without_signal` of `sampled` groups carried no signal."""
        if sampled == 0 or without_signal / sampled <= self.share:
            self.streak, self.warned = [], False
            return False
        self.streak.append(step)
        if len(self.streak) < self.steps or self.warned:
            return False
        self.warned = True
        return True

    def warning(self, step: int, sampled: int, without_signal: int, example: str | None = None) -> str:
        """The one-line warning for the streak that ends at `step`; `example`: where to see such a group."""
        return (f"the policy stopped exploring: at each of steps {self.streak[0]}-{step} most groups "
                f"({without_signal} of {sampled} at step {step}) gave every rollout the same reward, so they "
                f"taught nothing{f'; e.g. rollout {example}' if example else ''} (docs/training.md, 'Collapse': "
                f"try an entropy bonus, clip-higher, a KL term, dynamic sampling or a lower or decaying learning rate)")
