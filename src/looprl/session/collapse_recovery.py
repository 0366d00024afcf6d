"""Stepping in when the policy stops exploring: a hotter sampling temperature until groups regain signal.

`ExplorationWatch` (`session.collapse`) sees the collapse: most groups of several steps in a row gave
every rollout the same reward, while the task is unsolved. On the tasks where it was measured the
policy had settled on one answer pattern (all eight replies of a group alike), so nothing inside the
loss can help: a group without signal has zero advantages, hence zero gradient, whatever the loss, its
clipping or an entropy term computed on it; dynamic sampling only draws more groups from the same
collapsed policy. Signal can come back only from replies that differ, i.e. from the sampling. The
most direct lever on that is the temperature: dividing the logits by T > 1 spreads probability from
the one dominant reply onto the others, at once, on the next groups, without touching the weights
(unlike an entropy bonus, which has to move them first, and only through groups that already have
signal, or a return to an earlier checkpoint, which throws away what was learnt since).

So with `[orchestrator.collapse]` set, `CollapseRecovery`:

- **raises** the temperature of the groups started from then on by `raise_by` (up to
  `max_temperature`) when the watch fires, and again at each further step that is still stuck;
- **decays** it by `decay_by` per step once a step has signal again, back to the configured one (a
  hotter policy is not the one being trained: the trainer's log-probabilities are the temperature-1
  policy's, so rollouts drawn hot enter the loss as if drawn from it; the sooner sampling is back to
  that policy, the smaller the bias);
- **gives up** after `max_attempts` raises in a row without a step regaining signal: the temperature
  goes back, the recovery stays off for the rest of the run, and the run says the task does not look
  learnable at these settings, rather than sampling ever hotter noise that hides it.

Detection stays honest (issue 37): a solved task is no collapse (the watch leaves all-right groups
out), and a run whose rollouts have all had the same reward since it started never lost an
exploration it had: that is reported once as "not learnable at these settings", with no intervention.

Every intervention is an `Intervention`: a line in the orchestrator's log (`line()`), the step's
`collapse/...` metrics (`metrics()`, every step while the recovery is on), and a mark on the
inspector's run page, rebuilt from those metrics (`from_metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from looprl.config import CollapseRecovery as RecoveryConfig
from looprl.session.collapse import ExplorationWatch

Action = Literal["raise", "decay", "give_up", "unlearnable"]
ACTIONS: tuple[Action, ...] = get_args(Action)


@dataclass(frozen=True)
class Intervention:
    """What the recovery did after `step` (whose `stuck` of `sampled` groups had no signal), and why."""

    step: int
    action: Action
    temperature_from: float
    temperature_to: float
    attempt: int
    """Raises in a row without a step with signal, this one included."""
    sampled: int
    stuck: int

    def line(self) -> str:
        why = f"{self.stuck} of {self.sampled} groups at step {self.step} without signal"
        change = f"sampling temperature of the next groups {self.temperature_from:g} -> {self.temperature_to:g}"
        if self.action == "raise":
            held = " (held at its maximum)" if self.temperature_to == self.temperature_from else ""
            return f"collapse recovery: {why}, policy not exploring; {change}{held} (raise {self.attempt})"
        if self.action == "decay":
            return f"collapse recovery: groups have signal again at step {self.step}; {change}"
        if self.action == "give_up":
            return (f"collapse recovery gave up: {why} after {self.attempt} raises up to temperature "
                    f"{self.temperature_from:g}; the task does not look learnable at these settings; {change}, "
                    "no further interventions in this run")
        return (f"no learning signal since the run started: every rollout got the same reward ({why}); the task "
                "is not learnable at these settings (nothing to recover: the policy never explored it)")

    def metrics(self) -> dict[str, float]:
        """This step's intervention as `collapse/...` metrics (with `CollapseRecovery.metrics`)."""
        return {f"collapse/{self.action}": 1.0}

    @classmethod
    def from_metrics(cls, step: int, metrics: Mapping[str, float], previous: float | None) -> Intervention | None:
        """The intervention a stored step's metrics record (None: none); `previous`: the temperature the
        step before left (None: unknown, then this step's)."""
        action = next((a for a in ACTIONS if metrics.get(f"collapse/{a}")), None)
        if action is None or "collapse/temperature" not in metrics:
            return None
        to = metrics["collapse/temperature"]
        sampled, skipped = int(metrics.get("groups_sampled", 0)), int(metrics.get("groups_skipped", 0))
        return cls(step, action, to if previous is None else previous, to, int(metrics.get("collapse/attempt", 0)),
                   sampled, skipped - int(metrics.get("groups_solved", 0)))


class CollapseRecovery:
    """The temperature the next groups sample at, moved by what each step's groups showed."""

    def __init__(self, cfg: RecoveryConfig, base_temperature: float) -> None:
        self.cfg, self.base = cfg, base_temperature
        self.temperature = base_temperature
        self.attempt = 0
        self.gave_up = self.reported = False

    def after_step(self, step: int, watch: ExplorationWatch, fired: bool, sampled: int,
                   stuck: int) -> Intervention | None:
        """Update after `step`, once `watch` has observed it (`fired`: it detected a collapse there)."""
        before = self.temperature
        if self.gave_up or sampled == 0:  # a step that trained only carried-over groups says nothing new
            return None
        is_stuck = stuck / sampled > watch.share
        if fired and watch.best <= watch.worst:
            if self.reported:
                return None
            self.reported = True
            return Intervention(step, "unlearnable", before, before, 0, sampled, stuck)
        if is_stuck and (fired or self.attempt or self.temperature != self.base):
            if self.attempt == self.cfg.max_attempts:
                self.gave_up, self.temperature = True, self.base
                return Intervention(step, "give_up", before, self.base, self.attempt, sampled, stuck)
            self.attempt += 1
            self.temperature = round(min(self.cfg.max_temperature, self.temperature + self.cfg.raise_by), 6)
            return Intervention(step, "raise", before, self.temperature, self.attempt, sampled, stuck)
        if not is_stuck:
            self.attempt = 0
            if self.temperature > self.base:
                self.temperature = round(max(self.base, self.temperature - self.cfg.decay_by), 6)
                return Intervention(step, "decay", before, self.temperature, 0, sampled, stuck)
        return None

    def metrics(self) -> dict[str, float]:
        """Every step's state: the next groups' temperature and the raises in a row so far."""
        return {"collapse/temperature": self.temperature, "collapse/attempt": float(self.attempt)}
