"""Response types of the inspector's analysis endpoints: reward arithmetic, tokens, history, snippets,
histograms.

Like `looprl.inspector.api_types`, every endpoint of `looprl.inspector.rollout_analysis` and
`looprl.inspector.run_analysis` declares one of these as its `response_model=`; every string in them
comes from a run store and is rendered as text.
"""

from __future__ import annotations

from pydantic import BaseModel


class RewardTerm(BaseModel):
    """One emitted reward component: value x weight = contribution to the total."""

    name: str
    value: float
    weight: float
    contribution: float


class BaselineMember(BaseModel):
    """A sibling as the group baseline saw it."""

    rollout_id: str
    reward: float | None
    """The reward that entered the baseline: the stored total, 0 for a failure with `include_failed`, else None."""
    counted: bool
    advantage: float | None


class GroupBaseline(BaseModel):
    """How an `rl` train rollout's advantage follows from its group (session/advantages.py)."""

    members: list[BaselineMember]
    mean: float | None
    std: float | None
    """Population std of the counted rewards."""
    normalize_std: bool
    include_failed: bool
    eps: float
    skipped: bool
    """No counted rollout has a non-zero advantage: the group carried no signal and was left out of the batch."""
    advantage: float | None
    """(reward - mean), divided by (std + eps) when `normalize_std`; None when the rollout was not trained."""


class RewardExplanation(BaseModel):
    """The reward arithmetic of one rollout."""

    weights: dict[str, float]
    """The run's configured `orchestrator.reward_weights`; components not named weigh 1."""
    weights_configured: bool
    """Whether the run's config names reward weights at all (else every weight is 1)."""
    terms: list[RewardTerm]
    total: float | None
    """The stored total (None: a failed rollout, not scored)."""
    baseline: GroupBaseline | None = None
    """Only for train rollouts of `rl` runs."""


class CallTokens(BaseModel):
    """The completion tokens of one model call."""

    idx: int
    status: int
    finish_reason: str | None = None
    token_ids: list[int]
    texts: list[str] | None = None
    """Each token decoded on its own with the run model's tokenizer; None when no tokenizer is at hand."""
    logprobs: list[float] | None = None
    """The sampler's logprob of each token."""
    policy_versions: list[int] | None = None
    """The weights version (trainer step) that sampled each token; several within one reply when an in-flight
    weight update landed while it generated (`orchestrator.in_flight_updates`)."""
    trainer_logprobs: list[float] | None = None
    """The trainer's logprob of each token, when the store holds them (`model_calls.trainer_logprobs`)."""
    correction_weights: list[float] | None = None
    """Each token's rollout-correction weight (`trainer.loss.correction`, from the trainer's and the
    sampler's logprobs; at sequence level the call is taken as the sequence), when the run used one."""
    trained: bool
    """Whether the loss trained on these tokens (the rollout trained and the call had ids and logprobs)."""


class TokenView(BaseModel):
    """Every model call's completion tokens, with the loss mask and (when recorded) the trainer's logprobs."""

    tokenizer: str | None
    """Where the tokenizer came from, or None (ids are shown)."""
    trained: bool
    why: str
    """Why the rollout did (not) train, in words."""
    trainer_logprobs_recorded: bool
    calls: list[CallTokens]


class HistoryPoint(BaseModel):
    """One step at which an example was sampled, in one split."""

    split: str
    step: int
    rollouts: int
    scored: int
    mean_reward: float | None
    rollout_ids: list[str]
    """Up to 8 of the step's rollouts of this example."""


class ExampleHistory(BaseModel):
    example_id: str
    points: list[HistoryPoint]


class Snippet(BaseModel):
    """Where a search matched: the matched text with a little context either side."""

    where: str
    before: str
    match: str
    after: str


class RewardHistogram(BaseModel):
    """Counts of rewards per step over `bins` equal bins spanning [lo, hi]."""

    lo: float
    hi: float
    bins: int
    steps: list[int]
    counts: list[list[int]]
    """One list of `bins` counts per entry of `steps`."""
