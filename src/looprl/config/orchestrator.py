"""The orchestrator's configuration (the `[orchestrator]` and `[env]` tables of an rl config).

`SamplingParams` (`[orchestrator.sampling]`) is also what `looprl eval` and `looprl validate` pass to
the gateway.

Pydantic only, no torch: the launcher validates the whole config before any process starts.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from looprl.config.base import Strict
from looprl.config.env_runtime import EnvSource
from looprl.envs.types import DatasetSplit


class SamplingParams(Strict):
    """Sampling applied to every model call of the run (None: leave the request's value); the gateway
    applies it to each request (`gateway.sampling_params.apply_sampling`)."""

    temperature: float | None = Field(1.0, ge=0)
    """Sampling temperature; RL needs the same value the trainer assumes (default 1.0)."""
    top_p: float | None = Field(None, gt=0, le=1)
    """Nucleus sampling: sample from the smallest token set whose probability reaches top_p."""
    max_tokens: int | None = Field(None, ge=1)
    """Upper bound on tokens generated per call."""
    seed: int | None = None
    """Base seed (None: the run's `seed`); each model call gets a seed derived from it, the call's index and what
    the rollout is in the run: a training draw's epoch and position in the example order, or an eval's step and
    example, and its place among its siblings. Two runs of one config so draw the same numbers for the same
    rollouts (not from the rollout's id, which is new each run)."""
    stop: list[str] = Field(default_factory=list)
    """Stop strings, added to each request's own."""


class EnvConfig(EnvSource):
    """`[env]`: the environment class trained and evaluated on, and how its code runs."""

    train_split: DatasetSplit = "train"
    """Split the training examples come from."""
    eval_split: DatasetSplit = "eval"
    """Split the periodic evaluation runs on."""
    max_train_examples: int | None = Field(None, ge=1)
    """Load at most this many training examples (None: all)."""


class PeriodicEvalConfig(Strict):
    """`[orchestrator.eval]`: evaluation on the eval split during `looprl rl` (not `looprl eval`'s
    `EvalRunConfig`)."""

    interval: int = Field(0, ge=0)
    """Evaluate at steps 1, 1+N, 1+2N, ... (step 1: the initial model) and after the last step (0: only after
    the last)."""
    num_examples: int = Field(20, ge=0)
    """Eval examples per evaluation (the first N of the split; 0 disables evaluation)."""
    rollouts_per_example: int = Field(1, ge=1)
    """Sibling rollouts per eval example."""


class DynamicSampling(Strict):
    """DAPO's dynamic sampling: a group whose rollouts all got the same reward carries no signal, so
    the step samples another in its place (the one left out is stored, not trained)."""

    max_extra_groups: int = Field(4, ge=1)
    """Most groups sampled per step beyond `batch_size / group_size` (the cap on extra generation);
    when it is reached the step trains on the groups with signal it has."""


class CollapseRecovery(Strict):
    """`[orchestrator.collapse]`: step in when the policy stops exploring (`orchestrator.collapse`). `method`
    `rollback`: put the weights back to those of the last step whose groups mostly had signal and go on at a
    lower learning rate; `temperature`: raise the sampling temperature of the next groups until groups regain
    a learning signal, then decay it back (with `escalate`, roll back when raising brought no signal back)
    (docs/training.md, 'Collapse recovery')."""

    method: Literal["temperature", "rollback", "off"] = "temperature"
    """`temperature`, `rollback` or `off` (only warn). The temperature is the default: at 64 rollouts a step it
    stalled no seed of 5 on `examples/two_digit`, where the rollback stalled 2 of 3 and no recovery 2 of 2; on
    `examples/large_number` neither brought back every collapsed seed (docs/benchmarks.md)."""
    lr_factor: float = Field(0.7, gt=0, lt=1)
    """rollback: the learning rate is multiplied by this at each rollback, for the rest of the run. 0.7 by default
    (0.5 until 2026-12-07): a run that rolled back twice and gave up goes on at 0.49 of the rate instead of 0.25;
    every seed that gave up at 0.7 reached 80 % after (3 of 3 on examples/large_number and two_digit), 1 of 6
    at 0.5 within twice its median, and on large_number 0.7 learnt 4 seeds of 5 where 0.5 learnt 3 in the same
    hours (docs/benchmarks.md)."""
    raise_by: float = Field(0.25, gt=0)
    """temperature: added to the sampling temperature at each step that still has most groups without signal."""
    max_temperature: float | None = Field(None, gt=0, le=2)
    """temperature: highest temperature it raises to (the engines accept up to 2); None: 0.5 above the sampling
    temperature, at most 2 (1.5 at the default temperature, 1)."""
    decay_by: float = Field(0.1, gt=0)
    """temperature: taken off the raised temperature at each step with signal, until it is back at the
    configured one."""
    max_attempts: int = Field(2, ge=1)
    """Before it gives up (the run then says how far the reward rose: to a plateau, part of the way, or hardly, a task
    that does not look learnable at these settings so far; short of a plateau, it says so should the reward still rise
    half the way): rollbacks in the run (`rollback`), or raises in a row without a step regaining signal (`temperature`,
    whose temperature then goes back; with `escalate` it rolls back instead and gives up after as many rollbacks). A
    temperature recovery that has raised also gives up (or escalates) once 7 of the last 10 steps had most groups
    without signal, however few raises in a row (one step before the 8 of 10 that counts as a stuck run). Where the
    reward says a plateau (half the way from the first steps' to the best), the temperature recovery holds instead: the
    temperature stays raised and the raises count again. 2 by default (4 until 2026-12-06): with `escalate`, 4 raises
    before the rollback let 2 of 3 large_number seeds stall at one answer, 2 let none of 5 (docs/benchmarks.md)."""
    escalate: bool = True
    """temperature: once `max_attempts` raises in a row brought no signal back (and the reward says no plateau), roll
    back as `rollback` does (and go on as `rollback`) instead of giving up; the trainer then keeps a copy of the
    trainable weights from the start, as for `rollback`: host memory of their size (each rank its shards), refreshed
    at each step whose groups mostly had signal (0.06 s a step for SmolLM2-135M on this project's CPU). On by default
    since 2026-12-06: with the entropy bonus and 2 raises it learnt examples/large_number on 5 seeds of 5, where the
    temperature alone left 2 of 5 at one answer (docs/benchmarks.md); `false` saves the copy."""
    rollback_to: Literal["explored", "start"] = "explored"
    """rollback (and the temperature's escalation): which weights a rollback goes back to. `explored`: those that
    sampled the last step whose groups mostly had signal (the trainer updates its copy at each such step); `start`:
    the run's first (those it resumed from, after `--resume`), a restart at the lower learning rate. On
    `examples/large_number` the last step with signal was often already on its way to the collapse, and the
    rolled-back policy collapsed again within a few steps (docs/benchmarks.md)."""
    entropy_coef: float = Field(0.01, ge=0)
    """An entropy bonus the recovery adds to the loss from its first intervention (the first time the watch fires)
    on, steered by `entropy_ceiling`: the trainer's loss then uses the larger of this and
    `trainer.loss.entropy_coef`. A run that collapsed once has shown that its policy settles on one answer; the bonus
    keeps pushing it to explore while the method brings signal back, and a run that never collapses trains without
    it. 0: no bonus. 0.01 by default since 2026-12-06 (with `escalate` and `max_attempts = 2`, docs/benchmarks.md)."""
    entropy_ceiling: float | None = Field(1.0, gt=0)
    """Steers the bonus: it is off for the next batch while the policy's entropy (the trainer's mean entropy a token
    of the last step it reported) is above this multiple of its mean over the run's first steps that trained, and on
    again once it is back under. The policy a run starts from explores, so its entropy is as much as the bonus needs
    to restore; a fixed bonus has nothing to stop it, and on examples/large_number it took a seed's replies from 1.2
    to 2.6 nats a token over 90 steps while the reward stayed near 0.5 (docs/benchmarks.md). None: the bonus stays on
    whatever the entropy."""
    solved_reward: float | None = None
    """The total reward (as `reward_weights` weigh its components) of a reply that solves the task, e.g. 1.5 on
    `examples/two_digit` (right sum 1, format 0.5). Given, a group whose rollouts all got the same reward counts as
    solved only at this reward or above, so a policy settled on part of the reward (the format alone) is seen as
    stuck, and warned of, even in `off`. None: the best reward the run has seen counts as solved (which cannot
    tell a policy stuck on a partial reward from the start from a solved task)."""

    @model_validator(mode="after")
    def _bonus_needs_a_method(self) -> CollapseRecovery:
        """The bonus goes on with an intervention, and `off` never intervenes (a bonus set for it is a mistake; the
        default's is simply never used)."""
        if self.method == "off" and self.entropy_coef and "entropy_coef" in self.model_fields_set:
            raise ValueError(f"orchestrator.collapse.entropy_coef ({self.entropy_coef}) goes on with the recovery's "
                             "first intervention, and method 'off' never intervenes: set method to 'temperature' or "
                             "'rollback', or trainer.loss.entropy_coef for a bonus from the first step")
        return self

    @property
    def keeps_weights(self) -> bool:
        """Whether the trainer keeps a copy of the weights (for `rollback`, or a `temperature` that escalates)."""
        return self.method == "rollback" or (self.method == "temperature" and self.escalate)

    def ceiling(self, base_temperature: float) -> float:
        """The highest temperature the recovery raises to, for a run sampling at `base_temperature`."""
        return self.max_temperature if self.max_temperature is not None else min(2.0, base_temperature + 0.5)


class OrchestratorConfig(Strict):
    """`[orchestrator]`: the RL loop's rollouts, rewards, advantages and training batches."""

    batch_size: int = Field(64, ge=1)
    """Rollouts per training step; a multiple of `group_size`. 64 (8 prompts in groups of 8) rather than 32:
    with 4 prompts a step the update's direction for what all prompts share (one answer, one reply shape) is
    set by the draw, and on `examples/large_number` it walked into one answer for every question on 5 seeds
    of 5, where 8 prompts learnt it on 3 of 3; on the other tasks of the learning matrix the time to a reward
    level stayed about the same (docs/benchmarks.md)."""
    group_size: int = Field(8, ge=1)
    """Sibling rollouts per example (the GRPO group the advantage baseline is taken over)."""
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    """Sampling applied to every model call (temperature, top_p, max_tokens, seed, stop)."""
    reward_weights: dict[str, float] = Field(default_factory=dict)
    """Weight of each reward component in the total (components not listed weigh 1). Component names
    come from the env, so a name here cannot be checked when the config loads: the orchestrator logs a
    warning (and `looprl rl` prints it) at the first step whose scored rollouts all lack it. Not an
    error, because an env may emit a component only on some rollouts (`session.rewards`)."""
    include_failed: bool = False
    """Train on failed rollouts as reward 0 (default: keep them in the store, out of the loss)."""
    failed_group: Literal["train_rest", "drop"] = "train_rest"
    """A group with a failed rollout (an operational failure: `env_error`, `timeout`, ...): `train_rest`
    trains its other rollouts, with the group's baseline over them (the failed one out of the loss, or
    reward 0 with `include_failed`); `drop` leaves the whole group out (stored, counted in `groups_failed`,
    `failed` in the prompt ledger), as prime-rl does. `train_rest` is the default because most failures
    are the infrastructure's (a sandbox down, a worker killed) and say nothing about the reply, so the
    siblings' signal is sound and their generation is not wasted; choose `drop` when failures depend on
    what the model did (its tool calls crash the tool, its long loops time out): training the survivors
    then favours the replies that did not fail. A group whose rollouts all failed is out either way."""
    max_consecutive_failures: int | None = Field(50, ge=1)
    """Halt the run when this many rollouts in a row (train and eval, in the order they finished) end in
    an operational failure: an env or sandbox that stopped working, not one bad example (which fails
    only its own group). The error names the last failures and where their tracebacks are. None: never
    halt. The default, 50, is more than six groups of the default `group_size` failing whole in a row."""
    mask_truncated: bool = False
    """Leave out of the loss the rollouts a length limit cut off (`output_exceeded`: the reply reached
    `sampling.max_tokens`; `context_exceeded`) in groups where a sibling finished, as TRL's
    `mask_truncated_completions` and DAPO's overlong filtering do; their rewards still count in their group's
    baseline. A group in which no reply finished trains as usual (TRL and DAPO mask it too, which on
    `examples/two_digit`, whose replies all start out running past the limit, trained almost nothing for 15-40 steps).
    On `examples/large_number`, whose replies often run on past the answer to the limit, it reached 80 % of the reward
    in about half the defaults' time, its slowest seed sooner than their median; off by default because on
    `one_word` it came a step or two later and on `two_digit` its worst seed of four stalled where the defaults' did
    not (docs/benchmarks.md)."""
    normalize_std: bool = True
    """Divide group advantages by the group's reward std (GRPO, and TRL's default). On a task where
    successes are rare it weighs the one right reply of a group far above the usual spread: on
    `examples/two_digit` it halved the steps to every reward level; false gives Dr. GRPO's
    unscaled advantages (docs/benchmarks.md)."""
    dynamic_sampling: DynamicSampling | None = None
    """`[orchestrator.dynamic_sampling]`: replace groups without signal by new ones (DAPO); None (the
    default): such groups are skipped and the step trains on the rest."""
    collapse: CollapseRecovery = Field(default_factory=CollapseRecovery)
    """`[orchestrator.collapse]`: recover when most groups carry no signal for several steps in a row while
    the task is unsolved (docs/training.md, 'Collapse recovery'); on by default, chosen by the worst seed of
    the learning matrix (docs/benchmarks.md); `method = "off"` only warns."""
    max_off_policy_steps: int | None = Field(None, ge=0)
    """Largest lag between a rollout's policy and the one being trained; older groups are dropped.
    Unset, `looprl rl` picks by hardware and writes the number into the run's `config.toml`: 0 without a
    GPU (the engine and the trainer share the cores, so they take turns, each on every core), 1 with
    GPUs (generation of step n overlaps training of step n-1)."""
    in_flight_updates: bool = False
    """Load new weights between two decoding steps of the requests in flight (the embedded engine, vLLM's
    `pause_generation(mode="keep")`), which continue on them, instead of once they finish. Each token then
    records the weights version that sampled it, one reply may span several, and `max_off_policy_steps`
    bounds its oldest token. Off by default: on the long-tail bench (docs/benchmarks.md) it dropped more
    groups, not fewer (a long reply's oldest token goes stale while it runs on; between replies it
    finishes on its own weights first), at no better steps per hour. It matters only with overlap
    (`max_off_policy_steps` >= 1)."""
    token_budget: int = Field(512, ge=1)
    """Most tokens in one packed micro-batch (one forward/backward pass of the trainer). Attention in a
    packed row is block-diagonal through a dense mask, so its cost grows with the square of the row's
    length: on CPU, rows of 512 train ~1.6x faster than one 2k-token row (bench/train_step.py)."""
    context_budget: int | None = Field(None, ge=1)
    """Most tokens in one rollout's context (prompt + completions); None: the model's limit."""
    timeout_s: float | None = Field(None, gt=0)
    """Seconds a rollout may take before it ends as `timeout`."""
    eval: PeriodicEvalConfig = Field(default_factory=PeriodicEvalConfig)
    """Periodic evaluation on the eval split."""

    @model_validator(mode="after")
    def _whole_groups(self) -> OrchestratorConfig:
        if self.batch_size % self.group_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of group_size ({self.group_size})")
        return self

    @model_validator(mode="after")
    def _failed_rollouts_rule(self) -> OrchestratorConfig:
        if self.include_failed and self.failed_group == "drop":
            raise ValueError("include_failed = true trains failed rollouts as reward 0, failed_group = 'drop' "
                             "leaves their groups out: choose one")
        return self

    @model_validator(mode="after")
    def _room_to_raise(self) -> OrchestratorConfig:
        """A `max_temperature` the user set must leave room to raise; the default ceiling may not (a run that
        samples at 2, the engines' highest), and then the recovery only warns (`recovery`, `recovery_note`)."""
        ceiling = self.collapse.max_temperature
        if self.collapse.method == "temperature" and ceiling is not None and ceiling <= self.base_temperature:
            raise ValueError(f"orchestrator.collapse.max_temperature ({ceiling}) must be above the sampling "
                             f"temperature ({self.base_temperature}): there is nothing to raise to; set "
                             "collapse.method to 'rollback' or 'off'")
        return self

    @property
    def base_temperature(self) -> float:
        """The sampling temperature of the run (1.0, the engines' default, when the config leaves it unset)."""
        return 1.0 if self.sampling.temperature is None else self.sampling.temperature

    @property
    def recovery(self) -> CollapseRecovery | None:
        """`[orchestrator.collapse]` when it steps in (None: `method = "off"`, or the default `temperature` in a
        run that already samples at the highest temperature: `recovery_note`)."""
        return None if self.collapse.method == "off" or self.recovery_note else self.collapse

    @property
    def recovery_note(self) -> str | None:
        """Why the configured recovery only warns in this run (None: it steps in as configured, or is off)."""
        if self.collapse.method != "temperature" or self.collapse.max_temperature is not None:
            return None
        ceiling = self.collapse.ceiling(self.base_temperature)
        if ceiling > self.base_temperature:
            return None
        bonus = " (and its entropy_coef never goes on)" if self.collapse.entropy_coef else ""
        return (f"orchestrator.collapse: the sampling temperature ({self.base_temperature}) is already the highest "
                f"the recovery raises to ({ceiling}), so a collapse is only warned of{bonus}; set collapse.method = "
                "'rollback' for a recovery, or 'off' to silence this")

    @property
    def groups_per_step(self) -> int:
        return self.batch_size // self.group_size

    @property
    def off_policy_steps(self) -> int:
        """`max_off_policy_steps` as the run uses it (`looprl rl` sets it when the config leaves it unset)."""
        if self.max_off_policy_steps is None:
            raise ValueError("orchestrator.max_off_policy_steps is unset: `looprl rl` sets it by hardware in the "
                             "run's config.toml (RLConfig.for_hardware)")
        return self.max_off_policy_steps
