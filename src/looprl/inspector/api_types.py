"""Response types of the inspector's JSON API.

Every endpoint declares one of these as its `response_model=`, so the API's shape is documented in
one place and the browser code reads exactly these fields. Every string here comes from a run store
and is untrusted: the pages render it as text, never as markup.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from looprl.envs.types import LogRecordData
from looprl.store.records import ModelCall, RolloutRecord


class RunSummary(BaseModel):
    """One run as the runs list and the run page header show it."""

    id: str
    """The inspector's id for the run (unique across the RUN_DIRs given), used in URLs."""
    run_id: str
    """The id the run store holds."""
    run_dir: str
    kind: str
    env: str
    env_name: str
    model: str
    status: str
    created_at: float
    finished_at: float | None = None
    steps: int
    """Number of recorded training steps."""
    last_step: int | None = None
    last_reward: float | None = None
    """Mean reward of the last step (training metrics), else of the run's scored rollouts (summary)."""
    rollouts: dict[str, int]
    """Rollout count per split."""
    summary: dict[str, Any] = Field(default_factory=dict)


class RolloutRow(RolloutRecord):
    """A rollout as a row of the rollout table: the stored record, so every stored column reaches the
    API (`zero_filled`: the components it counted as 0), less what the table does not show."""

    run_id: str = Field(exclude=True)
    env_name: str = Field(exclude=True)
    finished_at: float = Field(exclude=True)
    messages: list[dict[str, Any]] = Field(exclude=True)
    example_args: dict[str, Any] = Field(default_factory=dict, exclude=True)
    logs: list[LogRecordData] = Field(default_factory=list, exclude=True)
    logs_dropped: int = Field(0, exclude=True)
    logs_truncated: int = Field(0, exclude=True)
    model_calls: list[ModelCall] = Field(default_factory=list, exclude=True)


class RolloutPage(BaseModel):
    """One page of the filtered, sorted rollout list."""

    rows: list[RolloutRow]
    total: int
    """Rows matching the filters, before `limit`/`offset`."""
    limit: int
    offset: int
    components: list[str]
    """Reward component names across the page's rows (the table's reward columns)."""


class RolloutDetail(RolloutRow):
    """Everything the rollout page shows."""

    run: str
    """The inspector's run id."""
    env_name: str
    messages: list[dict[str, Any]]
    example_args: dict[str, Any]
    model_calls: list[ModelCall]
    logs: list[LogRecordData]
    logs_dropped: int
    logs_truncated: int
    siblings: list[RolloutRow]
    """The group's rollouts (this one included), in the order they were written."""
    sibling_ids: list[str]
    prev_id: str | None = None
    """The rollout before this one in the list the request's filters and sort select."""
    next_id: str | None = None


class StepMetrics(BaseModel):
    """Training metrics of one step, as the trainer and orchestrator recorded them."""

    step: int
    time: float
    metrics: dict[str, float]


class SplitStats(BaseModel):
    """What a tab of the run page summarises about one split."""

    rollouts: int
    termination_reasons: dict[str, int]
    by_step: list[dict[str, float | int | None]]
    """Per step: `step`, `rollouts`, `failed`, `reward` and `reward/<component>` means from the rollouts."""


class ExplorationWarning(BaseModel):
    """Most groups carried no learning signal for several steps in a row (the orchestrator's warning)."""

    step: int
    """The step the warning came at."""
    message: str
    rollout_id: str | None
    """A rollout of that step whose group had no signal, to look at."""


class EpochCoverage(BaseModel):
    """What became of one epoch's training examples, from the prompt ledger (`looprl.store.ledger`)."""

    epoch: int
    """1 = the first pass over the train split."""
    size: int
    """Examples in the split."""
    outcomes: dict[str, int]
    """Examples per outcome of their live draw: trained, skipped, filtered, stale, failed, in_flight, cancelled."""
    retrained: int
    """Examples trained in a draw a resume undid (its weights were lost), and trained again after it."""
    redrawn: int
    """Examples drawn again after a resume undid a draw that had not trained."""
    resumed_from: list[int]
    """Checkpoint steps of the resumes that undid draws of the epoch."""
    line: str
    """The same in words, as `looprl metrics` prints it."""
class CollapseIntervention(BaseModel):
    """A step at which collapse recovery stepped in (`[orchestrator.collapse]`, `session.collapse_recovery`),
    rebuilt from the step's `collapse/...` metrics."""

    step: int
    action: Literal["escalate", "rollback", "raise", "decay", "hold", "give_up", "unlearnable", "rose", "bonus_off",
                    "bonus_on"]
    """What it did: rolled the weights back (`escalate`: as the temperature's raises brought no signal back),
    raised or decayed the sampling temperature, held it raised on a plateau, gave up, reported a task without
    signal, said that the reward rose half the way after a give-up (`rose`: the give-up's reading revised), or held
    its entropy bonus off while the policy's entropy was above `entropy_ceiling` (`bonus_off`) and put it back in
    (`bonus_on`)."""
    method: Literal["rollback", "temperature"]
    value_from: float
    value_to: float
    """The method's setting before and after the step: the learning-rate factor (rollback) or the sampling
    temperature of the groups started after it (temperature); bonus_off and bonus_on: the entropy bonus the batches
    carry."""
    entropy_coef: float = 0.0
    """The entropy bonus this intervention put into the loss from then on (0: none; held off at times by
    `entropy_ceiling`: the `bonus_off` and `bonus_on` marks)."""
    progress: float | None = None
    """give_up, hold and rose: how far the mean reward of its last steps came from the run's first steps' towards the
    best (0: not at all, 1: all the way; None: not known), which its message reads."""
    plateau: bool = False
    """give_up, hold and rose: at least half the way (the policy learnt part of the task): the message of a give_up
    or a hold says a plateau; a rose is always at least half the way."""
    message: str
    """The line the orchestrator logged: when, why, what changed."""


class RunMetrics(BaseModel):
    """Plots of the run page: step metrics plus per-split statistics of the rollouts."""

    steps: list[StepMetrics]
    keys: list[str]
    """Numeric metric names present in any step, in first-seen order."""
    splits: dict[str, SplitStats]
    exploration: list[ExplorationWarning] = []
    """When the policy stopped exploring (`session.collapse`, replayed over the stored steps)."""
    coverage: list[EpochCoverage] = []
    """Per epoch of an rl run: what became of its examples (empty for runs without a prompt ledger)."""
    interventions: list[CollapseIntervention] = []
    """When collapse recovery stepped in, why and what it changed (empty when it was off)."""
