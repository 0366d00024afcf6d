"""Stepping in when the policy stops exploring: back to weights that still explored at a lower learning
rate, or a hotter sampling temperature until groups regain signal.

`ExplorationWatch` (`session.collapse`) sees the collapse: most groups of several steps in a row gave
every rollout the same reward, while the task is unsolved. On the tasks where it was measured the
policy had settled on one answer pattern (all eight replies of a group alike), so nothing inside the
loss can bring signal back: a group without signal has zero advantages, hence zero gradient, whatever the
loss, its clipping or an entropy term computed on it; dynamic sampling only draws more groups from the
same collapsed policy. Two ways back, `[orchestrator.collapse] method`, and a lever for after (below):

- **rollback** (`trainer.rollback`): the trainer puts the weights back to those of the last step whose groups
  mostly had signal (it keeps a copy of them), or with `rollback_to = "start"` to the run's first, zeroes AdamW's
  momentum (its second moment kept) and multiplies the learning rate by `lr_factor` for the rest of the run. Why
  the learning rate: on a task whose policy does not yet tell the questions apart (examples/large_number), each
  step's update moves the shared preference for one answer by about a learning rate, in a direction set by which
  questions the step drew; the policy is lost once that walk reaches one answer for all (every group alike, no
  gradient), and it learns the questions only if their signal adds up first. A smaller step makes the walk slower
  against the signal's drift: at 1e-5 the task was learnt on seeds on which 2e-5 collapsed (docs/benchmarks.md).
  After `max_attempts` rollbacks it gives up (below: what the reward says then).
- **temperature**: raises the temperature of the groups started from then on by `raise_by` (up to
  `max_temperature`, by default 0.5 above the configured one) when the watch fires, and again at each further step
  that is still stuck; **decays** it by `decay_by` per step once a step has signal again, back to the configured
  one (a hotter policy is not the one being trained: the trainer's log-probabilities are the temperature-1
  policy's, so rollouts drawn hot enter the loss as if drawn from it); after `max_attempts` raises in a row without
  a step regaining signal, or once a raise was tried and `STALL_STEPS` of the last `STALL_WINDOW` steps still had
  none, it reads the reward (below). On a **plateau** it **holds**: the temperature stays raised and the raises
  start counting again, neither a rollback nor a give-up (a rollback undoes what the policy learnt: on
  examples/two_digit the escalation's rollbacks at a plateau near 83 % went back to weights already on it, and the
  seed gave up there; the temperature alone brought signal back again and again on the same plateau). Otherwise the
  temperature goes back and, with `escalate` (on by default), the recovery **rolls back** as `rollback` does and
  goes on as `rollback` (a hotter temperature spreads a reply's later tokens, not an answer the policy no longer
  gives: on large_number it brought no collapsed seed back); without it, it **gives up**: the recovery stays off for
  the rest of the run.

Either method's give-up, and the temperature's hold, read the reward first (`Intervention.progress`: how far the
mean reward of the last steps came from the run's first steps' towards the best): at least half the way
(`PLATEAU_SHARE`), the policy learnt part of the task and stopped exploring there, a **plateau** (on examples/two_digit
seeds sat at ~83 % with a few questions answered wrong every time, and one of them reached 95 % after the give-up;
only a rollback recovery gives up there); under a quarter
(`FLAT_SHARE`), the reward hardly rose and the task does not look learnable at these settings; in between it says
only that the reward rose part of the way and stopped, as the reward cannot tell a policy still learning from one
that settled on a partial answer (a large_number seed that gave up there learnt the task 13 steps later, another
had answered "No" to every question since step 19). Its line gives the means and the share of the way.

A give-up is a reading of the reward so far, not a last word: the run goes on without interventions (at the
configured temperature, and the learning rate any rollbacks left), and the recovery keeps reading the reward. Where
a give-up that read no plateau is followed by a recent mean at least `PLATEAU_SHARE` of the way, it says once that
the reward **rose** after it (two large_number seeds that gave up at x0.49 of the learning rate, "the task does not
look learnable", reached 95 % a few minutes later: docs/benchmarks.md).

With `entropy_coef` the first intervention also puts an entropy bonus into the loss from then on
(handed to the trainer with each batch): it cannot bring signal back by itself (it trains only groups with signal),
but once the method has, it keeps a policy that has shown it settles pushed to explore. With `entropy_ceiling` it is
steered (`steer_bonus`): held off while the policy's entropy is above that multiple of the run's first steps', and
back in once it is under (a `BonusSwitch`).

Detection stays honest (issue 37): a solved task is no collapse (the watch leaves all-right groups
out), and a run whose rollouts have all had the same reward since it started never lost an
exploration it had: that is reported once as "not learnable at these settings", with no intervention.

Every intervention is an `Intervention`: a line in the orchestrator's log (`line()`), the step's
`collapse/...` metrics (`metrics()`, every step while the recovery is on), and a mark on the
inspector's run page, rebuilt from those metrics (`from_metrics`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

from looprl.config import CollapseRecovery as RecoveryConfig
from looprl.session.collapse import ExplorationWatch, step_counts

STALL_WINDOW, STALL_STEPS = 10, 7
"""A temperature recovery that has raised at least once is stalled when `STALL_STEPS` of the last `STALL_WINDOW`
steps had most groups without signal: it then gives up or escalates as after `max_attempts` raises in a row. One
step short of issue 37's criterion for a stuck run (8 of 10), so that the escalation's rollback comes before the run
is stuck by it, not on the step that makes it so (at 8, a large_number seed that the rollback brought back still
counted as stalled), and so does the 7th step of a collapse that `max_attempts` = 4 raises did not end. Without
the rule a raised temperature that gives a few groups signal every few steps resets the raises in a row and never
escalates (two seeds of large_number sat at one answer that way)."""


START_STEPS, RECENT_STEPS = 3, 10
"""A give-up compares the mean reward of the run's first `START_STEPS` steps with groups of their own with that of
the last `RECENT_STEPS` steps after them."""
PLATEAU_SHARE, FLAT_SHARE = 0.5, 0.25
"""How far a give-up's recent mean reward came from the first steps' mean towards the best reward (`solved_reward`
where configured, else the best rollout's so far): a plateau from `PLATEAU_SHARE` of the way on, hardly a rise below
`FLAT_SHARE`. Measured on stored runs: examples/two_digit's stalled seeds 0.73-0.82 (~0.2 to ~1.25 of 1.5);
large_number's collapses to one answer for every question 0.12 and 0.17, one after a slow start 0.33, a seed that
then learnt it 0.44; two_digit's collapse to the format alone 0.29."""


def explored(sampled: int, kept: int, share: float) -> bool:
    """Whether a step's groups mostly had signal (`kept` of `sampled` trained, at least 1 - `share` of them): the
    steps whose sampling weights a rollback may go back to. Groups without signal because every rollout was right
    do not count, though the watch leaves them out of a collapse: on a yes/no task one answer to every question
    gives all-right steps by luck."""
    return sampled > 0 and kept >= (1 - share) * sampled


Action = Literal["escalate", "rollback", "raise", "decay", "hold", "give_up", "unlearnable", "rose"]
"""`escalate`: the temperature's rollback (with `collapse/rollback` too, as the orchestrator and trainer act on that);
first, so a stored step's metrics name it. `rose`: the reward rose after a give-up (no intervention: a revised
reading)."""
ACTIONS: tuple[Action, ...] = get_args(Action)
Method = Literal["rollback", "temperature"]
SETTING_METRIC: dict[Method, str] = {"rollback": "collapse/lr_scale", "temperature": "collapse/temperature"}
"""The metric holding each method's setting after every step: the learning-rate factor, the temperature."""


def stored_method(metrics: Mapping[str, float]) -> Method | None:
    """The method whose setting a stored step's metrics hold (`SETTING_METRIC`; a temperature recovery that escalated
    holds both, and is a rollback from then on); None: the recovery was off."""
    return next((m for m, key in SETTING_METRIC.items() if key in metrics), None)


@dataclass(frozen=True)
class Intervention:
    """What the recovery did after `step` (whose `stuck` of `sampled` groups had no signal), and why."""

    step: int
    action: Action
    method: Method
    value_from: float
    value_to: float
    """The method's setting before and after: the learning-rate factor (rollback) or the sampling temperature
    of the next groups (temperature)."""
    attempt: int
    """Rollbacks so far (an escalation's included), or raises in a row without a step with signal; this one
    included."""
    sampled: int
    stuck: int
    rolled_back_to: int | None = None
    """rollback: the step whose sampling weights the trainer went back to (the last whose groups mostly had
    signal; 0: the weights the run started from)."""
    from_start: bool = False
    """rollback: back to the run's first weights because `rollback_to = "start"` (not for want of a step that
    explored)."""
    entropy_coef: float = 0.0
    """The entropy bonus this intervention put into the loss from then on (`entropy_coef` of
    `[orchestrator.collapse]`, with the run's first intervention); 0: none."""
    reward_start: float | None = None
    """give_up, hold and rose: the mean train reward of the run's first `START_STEPS` steps (None: a run stored before
    it was kept, or no step after those had a scored rollout)."""
    reward_recent: float | None = None
    """give_up, hold and rose: the mean train reward of the last `recent_steps` steps after those."""
    recent_steps: int = 0
    reward_best: float | None = None
    """give_up, hold and rose: the best reward (`solved_reward` where configured, else the best rollout's so far)."""

    @property
    def progress(self) -> float | None:
        """give_up, hold and rose: how far the recent mean reward came from the first steps' towards the best (0: not
        at all, 1: all the way; None: not known)."""
        if self.reward_start is None or self.reward_recent is None or self.reward_best is None:
            return None
        if self.reward_best <= self.reward_start:
            return 0.0
        return (self.reward_recent - self.reward_start) / (self.reward_best - self.reward_start)

    @property
    def plateau(self) -> bool:
        """give_up and hold: the policy learnt part of the task and stopped exploring there (`PLATEAU_SHARE`); rose:
        the reward came that far after a give-up that read no plateau."""
        return self.progress is not None and self.progress >= PLATEAU_SHARE

    def line(self) -> str:
        """The intervention in words, for the orchestrator's log: when, why, what it changed."""
        bonus = f"; entropy bonus {self.entropy_coef:g} in the loss from now on" \
            if self.entropy_coef else ""
        return self._line() + bonus

    def _line(self) -> str:
        """`line` without the entropy bonus."""
        why = f"{self.stuck} of {self.sampled} groups at step {self.step} without signal"
        if self.method == "rollback":
            lr = f"learning rate x{self.value_from:g} -> x{self.value_to:g}"
            if self.action in ("rollback", "escalate"):
                escalated = ("; the raised temperature brought no signal back, so sampling is back at the configured "
                             "temperature, and from now on rollbacks" if self.action == "escalate" else "")
                return (f"collapse recovery: {why}, policy not exploring{escalated}; weights back to {self._to()}, "
                        f"AdamW's momentum zeroed, {lr} (rollback {self.attempt})")
        change = f"sampling temperature of the next groups {self.value_from:g} -> {self.value_to:g}"
        if self.action == "raise":
            held = " (held at its maximum)" if self.value_to == self.value_from else ""
            return f"collapse recovery: {why}, policy not exploring; {change}{held} (raise {self.attempt})"
        if self.action == "decay":
            return f"collapse recovery: groups have signal again at step {self.step}; {change}"
        if self.action == "hold":
            return (f"collapse recovery: {why} after raising the temperature; a plateau ({self._rewards()}): the "
                    "policy learnt part of the task, which a rollback would undo, so the sampling temperature of the "
                    f"next groups stays at {self.value_to:g} and the raises start again")
        if self.action == "give_up":
            plural = "s" if self.attempt != 1 else ""
            tried = (f"{self.attempt} rollback{plural} down to learning rate x{self.value_from:g}"
                     if self.method == "rollback" else
                     f"{self.attempt} raise{plural} up to temperature {self.value_from:g}")
            after = "" if self.method == "rollback" else f"; {change}"
            revisit = "" if self.plateau else "; should the reward still rise half the way to the best, it says so"
            return (f"collapse recovery gave up: {why} after {tried}; {self._verdict()}{after}, no further "
                    f"interventions in this run{revisit}")
        if self.action == "rose":
            return (f"collapse recovery: at step {self.step} the reward has risen since it gave up "
                    f"({self._rewards()}): the policy went on learning without interventions, and the give-up's "
                    "reading of the task no longer holds")
        return (f"no learning signal since the run started: every rollout got the same reward ({why}); the task "
                "is not learnable at these settings (nothing to recover: the policy never explored it)")

    def _verdict(self) -> str:
        """A give-up's reading of the reward, for `line` (`PLATEAU_SHARE`, `FLAT_SHARE`)."""
        progress = self.progress
        if progress is None:  # stored before the means were kept, or no step after the first ones was scored
            return "the task does not look learnable at these settings so far"
        rewards = self._rewards()
        if progress >= PLATEAU_SHARE:
            return (f"a plateau ({rewards}): the policy learnt part of the task and most groups give every rollout the "
                    "same reward there, which the recovery could not change")
        if progress < FLAT_SHARE:
            return f"the reward hardly rose ({rewards}): the task does not look learnable at these settings so far"
        return (f"the reward rose part of the way and stopped there ({rewards}), and the recovery could not bring "
                "signal back")

    def _rewards(self) -> str:
        """The means a give-up or a hold read, and how far they came (`progress`), for `line`."""
        return (f"mean reward {self.reward_start:.2f} over the run's first {START_STEPS} steps, "
                f"{self.reward_recent:.2f} over its last {self.recent_steps}: {self.progress:.0%} of the way to the "
                f"best, {self.reward_best:g}")

    def _to(self) -> str:
        """A rollback's weights, for `line`."""
        if self.from_start and self.rolled_back_to:
            return (f"those the run resumed with, that sampled step {self.rolled_back_to} (rollback_to = 'start': a "
                    "restart from the resume)")
        if self.from_start:
            return "the run's first (rollback_to = 'start': a restart)"
        if self.rolled_back_to:
            return f"those that sampled step {self.rolled_back_to} (the last step whose groups mostly had signal)"
        return "the run's first (no step yet whose groups mostly had signal)"

    def metrics(self) -> dict[str, float]:
        """This step's intervention as `collapse/...` metrics (with `CollapseRecovery.metrics`)."""
        rolled = {} if self.rolled_back_to is None else {"collapse/rollback_to": float(self.rolled_back_to)}
        rollback = {"collapse/rollback": 1.0} if self.action == "escalate" else {}
        start = {"collapse/from_start": 1.0} if self.from_start else {}
        bonus = {"collapse/entropy_on": 1.0} if self.entropy_coef else {}
        rewards: dict[str, float] = {}
        if self.reward_start is not None and self.reward_recent is not None and self.reward_best is not None:
            rewards = {"collapse/reward_start": self.reward_start, "collapse/reward_recent": self.reward_recent,
                       "collapse/recent_steps": float(self.recent_steps), "collapse/reward_best": self.reward_best}
        return {f"collapse/{self.action}": 1.0} | rollback | rolled | start | bonus | rewards

    @classmethod
    def from_metrics(cls, step: int, metrics: Mapping[str, float],
                     previous: Mapping[str, float]) -> Intervention | None:
        """The intervention a stored step's metrics record (None: none; the entropy bonus it put in from
        `collapse/entropy_on` and `collapse/entropy_coef`); `previous`: the settings the steps before left, by
        metric (`SETTING_METRIC`; a learning-rate factor not there yet is 1, a temperature this step's)."""
        action = next((a for a in ACTIONS if metrics.get(f"collapse/{a}")), None)
        method = stored_method(metrics)
        if action is None or method is None:
            return None
        to = metrics[SETTING_METRIC[method]]
        before = previous.get(SETTING_METRIC[method], 1.0 if method == "rollback" else to)
        sampled, skipped = int(metrics.get("groups_sampled", 0)), int(metrics.get("groups_skipped", 0))
        rolled = metrics.get("collapse/rollback_to")
        bonus = metrics.get("collapse/entropy_coef", 0.0) if metrics.get("collapse/entropy_on") else 0.0
        return cls(step, action, method, before, to,
                   int(metrics.get("collapse/attempt", 0)), sampled, skipped - int(metrics.get("groups_solved", 0)),
                   None if rolled is None else int(rolled), bool(metrics.get("collapse/from_start")), bonus,
                   metrics.get("collapse/reward_start"), metrics.get("collapse/reward_recent"),
                   int(metrics.get("collapse/recent_steps", 0)), metrics.get("collapse/reward_best"))


@dataclass(frozen=True)
class BonusSwitch:
    """The entropy bonus held off (`held`) or put back in from `step`'s batch on, by the entropy the trainer
    reported for `read_step` against the limit (`entropy_ceiling` times `start`, the mean entropy of the run's first
    steps that trained): a line in the orchestrator's log, the step's metrics, a mark on the inspector's run page."""

    step: int
    held: bool
    read_step: int
    entropy: float
    limit: float
    start: float
    coef: float

    def line(self) -> str:
        read = f"the policy's entropy at step {self.read_step}, {self.entropy:.3g} a token,"
        if self.held:
            return (f"collapse recovery: {read} is above {self.limit:.3g} (entropy_ceiling "
                    f"{round(self.limit / self.start, 6):g} times {self.start:.3g}, the mean over the run's first "
                    f"{START_STEPS} steps that trained): the entropy bonus is off until the entropy is back under it")
        return f"collapse recovery: {read} is back under {self.limit:.3g}: the entropy bonus {self.coef:g} is on again"

    def metrics(self) -> dict[str, float]:
        """This switch as `collapse/...` metrics (with `CollapseRecovery.metrics`: the coefficient, limit, start)."""
        return {"collapse/entropy_off" if self.held else "collapse/entropy_back": 1.0,
                "collapse/entropy_read": self.entropy, "collapse/entropy_read_step": float(self.read_step)}

    @classmethod
    def from_metrics(cls, step: int, metrics: Mapping[str, float]) -> BonusSwitch | None:
        """The switch a stored step's metrics record (None: none)."""
        held = bool(metrics.get("collapse/entropy_off"))
        if not (held or metrics.get("collapse/entropy_back")) or "collapse/entropy_read" not in metrics:
            return None
        return cls(step, held, int(metrics["collapse/entropy_read_step"]), metrics["collapse/entropy_read"],
                   metrics["collapse/entropy_limit"], metrics["collapse/entropy_start"],
                   metrics["collapse/entropy_coef"])


class CollapseRecovery:
    """The method's setting (the learning-rate factor, or the temperature the next groups sample at), moved by
    what each step's groups showed; `rollback` tells the orchestrator to have the trainer roll back."""

    def __init__(self, cfg: RecoveryConfig, base_temperature: float) -> None:
        if cfg.method == "off":
            raise ValueError("collapse recovery with method 'off' (OrchestratorConfig.recovery is None then)")
        self.cfg, self.base = cfg, base_temperature
        self.ceiling = cfg.ceiling(base_temperature)
        self.method: Method = cfg.method
        """`rollback` from the escalation of a `temperature` recovery on."""
        self.temperature = base_temperature
        self.lr_scale = 1.0
        self.attempt = 0
        self.explored = 0
        """The last step whose groups mostly had signal (0: none yet, the weights the run started from)."""
        self.gave_up = self.reported = False
        self.settled = False
        """Whether the run's reading of the reward after a give-up is final: the give-up read a plateau, or the rise
        after it was said (`rose`, once)."""
        self.recent: deque[bool] = deque(maxlen=STALL_WINDOW)
        """Whether each of the last steps had most groups without signal (`STALL_STEPS`)."""
        self.first_rewards: list[float] = []
        """The mean train reward of each of the run's first `START_STEPS` steps (what a give-up says)."""
        self.recent_rewards: deque[float] = deque(maxlen=RECENT_STEPS)
        """The same of the last `RECENT_STEPS` steps after those."""
        self.bonus = False
        """Whether the entropy bonus is in: from the first intervention on, with `cfg.entropy_coef`."""
        self.held = False
        """Whether the bonus is held off for the next batch: the policy's entropy is above `entropy_limit`."""
        self.entropy_first: list[float] = []
        """The trainer's mean entropy a token of each of the run's first `START_STEPS` steps that trained (the base
        of `entropy_limit`)."""
        self.entropy_last: tuple[int, float] | None = None
        """The last step the trainer reported an entropy for, and that entropy."""

    def resume(self, step: int, steps: Sequence[Mapping[str, float]], watch: ExplorationWatch) -> None:
        """Go on after `--resume` from `step`, the last of the stored `steps` (each step's metrics, in order): the
        learning-rate factor (the trainer's scheduler kept it too) or the temperature, and the attempts so far, from
        the last; whether it gave up (and whether its reading is settled) or reported the task unlearnable, the stall
        window (by `watch`'s measure) and the first and recent steps' rewards (their `reward` metric), from all. The
        trainer's copy of the weights is then the resumed ones, which sample the next step, with `rollback_to =
        "start"` too (the copy is not kept across processes)."""
        last = steps[-1]
        self.entropy_first, self.entropy_last = [], None  # rebuilt from every stored step (some noted while recovered)
        self.lr_scale = last.get("collapse/lr_scale", self.lr_scale)
        if "collapse/lr_scale" in last:  # a rollback recovery, or a temperature one that escalated
            self.method = "rollback"
        self.temperature = last.get("collapse/temperature", self.temperature)
        self.attempt = int(last.get("collapse/attempt", self.attempt))
        self.bonus = bool(self.cfg.entropy_coef and last.get("collapse/entropy_coef"))  # as now configured
        self.held = self.cfg.entropy_ceiling is not None and bool(last.get("collapse/entropy_held"))
        self.explored = step + 1
        for metrics in steps:  # as after_step saw them
            sampled, stuck = step_counts(metrics)
            if sampled:
                if not self.gave_up:
                    self.recent.append(watch.stuck(sampled, stuck))
                self.note_reward(metrics.get("reward", math.nan))
            self.note_entropy(int(metrics["step"]), metrics.get("train/entropy", math.nan),
                              metrics.get("train/loss_tokens", 0.0))
            if metrics.get("collapse/rollback") or metrics.get("collapse/hold"):
                self.recent.clear()
            if metrics.get("collapse/give_up"):
                self.gave_up = True
                given_up = Intervention.from_metrics(0, metrics, {})  # its reading needs only its rewards
                self.settled = self.settled or bool(given_up and given_up.plateau)
            self.settled = self.settled or bool(metrics.get("collapse/rose"))
            self.reported = self.reported or bool(metrics.get("collapse/unlearnable"))

    @property
    def setting(self) -> float:
        """The method's setting now (`SETTING_METRIC`): the learning-rate factor, or the next groups' temperature."""
        return self.lr_scale if self.method == "rollback" else self.temperature

    @property
    def sampled_as_configured(self) -> bool:
        """Whether the groups started now sample at the configured temperature. A step sampled hotter does not count
        as one that explored, whatever its signal: the signal came from the temperature, and its weights may be
        those of the collapsed policy (on large_number an escalation went back to such a step's weights)."""
        return self.temperature == self.base

    def note_entropy(self, step: int, entropy: float, loss_tokens: float) -> None:
        """Keep the trainer's mean entropy a token of `step` (its `entropy` metric, over its `loss_tokens`), as it
        arrives: the first steps' for `entropy_limit`, the last for `steer_bonus`; a step that trained no token
        says nothing."""
        if not loss_tokens or math.isnan(entropy) or math.isnan(loss_tokens):
            return
        if len(self.entropy_first) < START_STEPS:
            self.entropy_first.append(entropy)
        self.entropy_last = (step, entropy)

    @property
    def entropy_start(self) -> float | None:
        """The mean entropy of the run's first steps that trained (None: none has reported one yet)."""
        return sum(self.entropy_first) / len(self.entropy_first) if self.entropy_first else None

    @property
    def entropy_limit(self) -> float | None:
        """The entropy above which the bonus holds off: `entropy_ceiling` times `entropy_start` (None: no ceiling
        configured, or no step has reported an entropy yet)."""
        start = self.entropy_start
        return None if self.cfg.entropy_ceiling is None or start is None else self.cfg.entropy_ceiling * start

    @property
    def entropy_coef(self) -> float:
        """The entropy bonus the next batch carries to the trainer: `cfg.entropy_coef` once it is in, unless held."""
        return self.cfg.entropy_coef if self.bonus and not self.held else 0.0

    def steer_bonus(self, step: int) -> BonusSwitch | None:
        """Before `step`'s batch: hold the bonus off while the last reported entropy is above `entropy_limit`, and
        put it back once it is not (None: no change). A fixed bonus raised the entropy with nothing to stop it: on
        examples/large_number a seed's replies went from 1.2 to 2.6 nats a token over 90 steps while its reward
        stayed near 0.5, and a bonus on every sampled token took another from 1.0 to 6.9 (noise after a first word
        that stayed the same); the policy the run started from explored, so its entropy bounds what the bonus needs
        to restore."""
        limit, start, last = self.entropy_limit, self.entropy_start, self.entropy_last
        if not self.bonus or limit is None or start is None or last is None:
            return None
        held = last[1] > limit
        if held == self.held:
            return None
        self.held = held
        return BonusSwitch(step, held, last[0], last[1], limit, start, self.cfg.entropy_coef)

    def note_reward(self, reward: float) -> None:
        """Keep a step's mean train reward (the `reward` metric) for a give-up's verdict and the look back after it;
        NaN (no rollout scored) says nothing."""
        if math.isnan(reward):
            return
        (self.first_rewards if len(self.first_rewards) < START_STEPS else self.recent_rewards).append(reward)

    def after_step(self, step: int, watch: ExplorationWatch, fired: bool, sampled: int, stuck: int, reward: float,
                   explored: bool = False) -> Intervention | None:
        """Update after `step`, once `watch` has observed it (`fired`: it detected a collapse there; `reward`: the mean
        train reward of its scored rollouts, its `reward` metric; `explored`: most of its groups had signal, `explored`,
        sampled at the configured temperature: `sampled_as_configured` before this update)."""
        if sampled == 0:  # a step that trained only carried-over groups says nothing new
            return None
        if self.gave_up:
            self.note_reward(reward)
            return self._look_back(step, watch, sampled, stuck)
        is_stuck = watch.stuck(sampled, stuck)
        self.recent.append(is_stuck)
        self.note_reward(reward)
        if fired and watch.best <= watch.worst:
            if self.reported:
                return None
            self.reported = True
            return Intervention(step, "unlearnable", self.method, self.setting, self.setting, 0, sampled, stuck)
        if explored and self.cfg.rollback_to == "explored":
            self.explored = step
        if self.method == "rollback":
            intervention = self._rollback(step, watch, fired, sampled, stuck)
        else:
            intervention = self._temperature(step, watch, fired, sampled, stuck, is_stuck)
        # `fired`: a decay after a resume that newly configured the bonus does not put it in
        if intervention and fired and self.cfg.entropy_coef and not self.bonus:
            self.bonus = True
            return replace(intervention, entropy_coef=self.cfg.entropy_coef)
        return intervention

    def _rollback(self, step: int, watch: ExplorationWatch, fired: bool, sampled: int, stuck: int,
                  action: Action = "rollback") -> Intervention | None:
        if not fired:
            return None
        before = self.lr_scale
        if self.attempt == self.cfg.max_attempts:
            return self._give_up(step, watch, before, before, sampled, stuck)
        self.attempt += 1
        self.lr_scale = before * self.cfg.lr_factor
        watch.restart()  # the rolled-back policy gets its own steps before the watch can fire again
        self.recent.clear()
        return Intervention(step, action, "rollback", before, self.lr_scale, self.attempt, sampled, stuck,
                            rolled_back_to=self.explored, from_start=self.cfg.rollback_to == "start")

    def _temperature(self, step: int, watch: ExplorationWatch, fired: bool, sampled: int, stuck: int,
                     is_stuck: bool) -> Intervention | None:
        before = self.temperature
        if is_stuck and (fired or self.attempt or not self.sampled_as_configured):
            if self.attempt == self.cfg.max_attempts or (self.attempt and self.stalled):
                hold = self._read(Intervention(step, "hold", "temperature", before, before, 0, sampled, stuck), watch)
                if hold.plateau:  # the raises start again from here, the stall window too
                    self.attempt = 0
                    self.recent.clear()
                    return hold
                self.temperature = self.base
                if self.cfg.escalate:
                    self.method, self.attempt = "rollback", 0
                    return self._rollback(step, watch, True, sampled, stuck, "escalate")
                return self._give_up(step, watch, before, self.base, sampled, stuck)
            self.attempt += 1
            self.temperature = round(min(self.ceiling, self.temperature + self.cfg.raise_by), 6)
            return Intervention(step, "raise", "temperature", before, self.temperature, self.attempt, sampled, stuck)
        if not is_stuck:
            self.attempt = 0
            if self.temperature > self.base:
                self.temperature = round(max(self.base, self.temperature - self.cfg.decay_by), 6)
                return Intervention(step, "decay", "temperature", before, self.temperature, 0, sampled, stuck)
        return None

    def _give_up(self, step: int, watch: ExplorationWatch, value_from: float, value_to: float, sampled: int,
                 stuck: int) -> Intervention:
        """Stop intervening for the rest of the run, with the rewards its line reads (`Intervention.progress`)."""
        self.gave_up = True
        given_up = self._read(Intervention(step, "give_up", self.method, value_from, value_to, self.attempt, sampled,
                                           stuck), watch)
        self.settled = given_up.plateau
        return given_up

    def _look_back(self, step: int, watch: ExplorationWatch, sampled: int, stuck: int) -> Intervention | None:
        """After a give-up that read no plateau: `rose` once the recent mean reward is `PLATEAU_SHARE` of the way."""
        if self.settled:
            return None
        rose = self._read(Intervention(step, "rose", self.method, self.setting, self.setting, self.attempt, sampled,
                                       stuck), watch)
        self.settled = rose.plateau
        return rose if rose.plateau else None

    def _read(self, intervention: Intervention, watch: ExplorationWatch) -> Intervention:
        """A give-up or a hold with the rewards it reads (`Intervention.progress`); as it is where no step after the
        first ones had a scored rollout."""
        if not self.recent_rewards:
            return intervention
        return replace(intervention, reward_start=sum(self.first_rewards) / len(self.first_rewards),
                       reward_recent=sum(self.recent_rewards) / len(self.recent_rewards),
                       recent_steps=len(self.recent_rewards), reward_best=watch.top)

    @property
    def stalled(self) -> bool:
        """Whether `STALL_STEPS` of the last `STALL_WINDOW` steps had most groups without signal."""
        return sum(self.recent) >= STALL_STEPS

    def metrics(self) -> dict[str, float]:
        """Every step's state: the method's setting (the learning-rate factor, and the next groups' temperature
        while the configured method is the temperature, also after it escalated), the entropy bonus once it is on
        (whether it is held off, and the limit and the first steps' entropy it is held off by), and the rollbacks so
        far, or the raises in a row."""
        temperature = {} if self.cfg.method == "rollback" else {"collapse/temperature": self.temperature}
        lr_scale = {"collapse/lr_scale": self.lr_scale} if self.method == "rollback" else {}
        bonus = {"collapse/entropy_coef": self.cfg.entropy_coef, "collapse/entropy_held": float(self.held)} \
            if self.bonus else {}
        if self.bonus and (limit := self.entropy_limit) is not None and (start := self.entropy_start) is not None:
            bonus |= {"collapse/entropy_limit": limit, "collapse/entropy_start": start}
        return lr_scale | temperature | bonus | {"collapse/attempt": float(self.attempt)}
