"""Seeing a policy stop exploring: most groups without a learning signal, step after step.

When every rollout of a group gets the same reward (all right, all wrong, or all the same reply),
the group's advantages are all zero and it teaches nothing. A policy that collapses onto one
answer makes that the rule: every group's siblings begin alike, and the run goes on stepping while
it trains on nothing. `ExplorationWatch` follows the share of such groups per step (the metric
`no_signal_frac`) and, when it is above `share` for `steps` steps in a row, returns a one-line
warning (the orchestrator logs it, `looprl rl` prints it) naming one such group's rollout and its
inspector page; it warns again only after a step with signal.
"""

from __future__ import annotations

from pathlib import Path

from looprl.trackers import inspector_link

STEPS = 3
"""Steps in a row."""
SHARE = 0.5
"""Share of a step's groups without signal above which the step counts."""


class ExplorationWatch:
    def __init__(self, run_id: str, run_dir: Path, steps: int = STEPS, share: float = SHARE) -> None:
        self.run_id, self.run_dir, self.steps, self.share = run_id, run_dir, steps, share
        self.streak: list[int] = []
        self.warned = False

    def observe(self, step: int, sampled: int, without_signal: int, example_rollout: str | None) -> str | None:
        """The warning to log after `step`, or None."""
        if sampled == 0 or without_signal / sampled <= self.share:
            self.streak, self.warned = [], False
            return None
        self.streak.append(step)
        if len(self.streak) < self.steps or self.warned:
            return None
        self.warned = True
        example = (f"; e.g. rollout {example_rollout}: {inspector_link(self.run_dir, self.run_id, example_rollout)}"
                   if example_rollout else "")
        return (f"the policy stopped exploring: at each of steps {self.streak[0]}-{step} most groups "
                f"({without_signal} of {sampled} at step {step}) gave every rollout the same reward, so they "
                f"taught nothing{example} (README, 'Collapse': try dynamic sampling, clip-higher, a KL term "
                f"or a lower learning rate)")
