"""Rows the run store writes and reads, as typed models.

`ModelCall` is produced by the gateway (one per chat-completions call a rollout made);
`RolloutRecord` by the orchestrator (the env's `RolloutResult` plus step, aggregated reward,
advantage, zero-filled components and its model calls); its attributes named in
`schema.ROLLOUT_COLUMNS` are the `rollouts` table's columns. The inspector and the CLI read the
same models back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

from looprl.envs.types import RolloutResult


class ModelCall(BaseModel):
    """One model call through the gateway, attributed to its rollout."""

    rollout_id: str
    idx: int
    started_at: float
    latency_s: float
    status: int = 200
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    error: str | None = None
    completion_policy_versions: list[int] | None = None
    """The weights version (trainer step) that sampled each completion token: more than one within a call
    when an in-flight weight update landed while it generated; None when the engine did not say."""
    trainer_logprobs: list[float] | None = None
    """The trainer's logprob of each completion token (the weights it trained on), once its report for
    the step is stored; None until then, and for calls that did not train."""

    @property
    def trainable(self) -> bool:
        """The call returned token ids and one logprob per completion token: the trainer can learn from
        it (the orchestrator's samples) and the inspector marks its tokens as trained."""
        return (self.status == 200 and self.prompt_token_ids is not None and self.completion_token_ids is not None
                and self.completion_logprobs is not None
                and len(self.completion_logprobs) == len(self.completion_token_ids))


class RolloutRecord(RolloutResult):
    """A finished rollout as stored: the env's result plus what the orchestrator knows of it."""

    run_id: str
    step: int = 0
    env_name: str
    reward: float | None = None
    zero_filled: list[str] = Field(default_factory=list)
    """Components other scored rollouts of its batch emitted and this scored one did not: they counted
    as 0 (sorted; set by whoever scores the batch, `session.rewards.mark_zero_filled`)."""
    advantage: float | None = None
    prompt_tokens: int = 0
    """Sum over the rollout's model calls."""
    completion_tokens: int = 0
    log_count: int = 0
    max_log_level: int = 0
    """Highest stdlib level among its log records (0 when none)."""
    model_calls: list[ModelCall] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at

    @classmethod
    def from_result(cls, result: RolloutResult, *, run_id: str, env_name: str, step: int,
                    reward: float | None, advantage: float | None, model_calls: list[ModelCall]) -> RolloutRecord:
        """Join an env's result with the orchestrator's view of it (step, reward, model calls)."""
        return cls(
            **result.model_dump(), run_id=run_id, env_name=env_name, step=step, reward=reward,
            advantage=advantage, model_calls=model_calls,
            prompt_tokens=sum(c.prompt_tokens for c in model_calls),
            completion_tokens=sum(c.completion_tokens for c in model_calls),
            log_count=len(result.logs), max_log_level=max((r.level for r in result.logs), default=0),
        )


class RunInfo(BaseModel):
    """The `runs` row."""

    run_id: str
    kind: str
    env: str
    env_name: str
    model: str
    config: dict[str, Any] = Field(default_factory=dict)
    status: str = "running"
    created_at: float
    finished_at: float | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
