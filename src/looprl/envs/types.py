"""Types of the environment contract and of what a finished rollout reports.

Produced by env code (datasets, tools) and by the rollout runtime in the env worker; consumed by the
orchestrator, which adds step, aggregated reward and advantage and hands the result to the run store.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DatasetSplit = Literal["train", "eval"]
"""Which traffic a dataset or rollout belongs to: training or evaluation."""

Message = dict[str, Any]
"""An OpenAI chat-completions message (`role`, `content`, optional `tool_calls` / `tool_call_id`)."""

Tool = dict[str, Any]
"""An OpenAI function tool: `{"type": "function", "function": {"name", "description", "parameters"}}`."""

SCORED_REASONS = frozenset(
    {"finished", "output_exceeded", "context_exceeded", "max_turns_exceeded", "tool_budget_exceeded"}
)
"""Termination reasons whose transcript is scored. Every other reason is an operational failure."""

TRUNCATED_REASONS = frozenset({"output_exceeded", "context_exceeded"})
"""Scored, but a length limit cut the reply off: `orchestrator.mask_truncated` leaves these out of the loss."""

FAILURE_REASONS = frozenset(
    {"model_error", "tool_error", "reward_error", "group_reward_error", "env_error", "timeout", "env_worker_died"}
)
"""The built-in operational failures; a hook may also raise `RolloutFailure` with a reason of its own."""


class Example(BaseModel):
    """One dataset item: a stable id and its payload (which must hold non-empty `prompt_messages`)."""

    model_config = ConfigDict(frozen=True)

    id: str
    payload: dict[str, Any]

    @property
    def prompt_messages(self) -> list[Message]:
        messages: list[Message] = self.payload["prompt_messages"]  # checked by `check_payload`
        return messages

    @property
    def example_args(self) -> dict[str, Any]:
        """Every payload field but `prompt_messages`: what reward hooks read as `rollout.example_args`."""
        return {k: v for k, v in self.payload.items() if k != "prompt_messages"}


class LogRecordData(BaseModel):
    """One stdlib `logging` record captured for a rollout (see `looprl.envs.logging`)."""

    time: float
    level: int
    level_name: str
    logger: str
    message: str
    pathname: str | None = None
    lineno: int | None = None
    func: str | None = None
    exception: str | None = None


class RolloutResult(BaseModel):
    """What one rollout produced, as the env runtime reports it to the orchestrator."""

    rollout_id: str
    group_id: str
    example_id: str
    split: DatasetSplit
    messages: list[Message]
    example_args: dict[str, Any] = Field(default_factory=dict)
    termination_reason: str
    error: str | None = None
    rewards: dict[str, float] = Field(default_factory=dict)
    turns: int = 0
    tool_calls: int = 0
    started_at: float
    finished_at: float
    logs: list[LogRecordData] = Field(default_factory=list)
    logs_dropped: int = 0
    logs_truncated: int = 0
    native_trace: dict[str, Any] | None = None
    """An adapted framework's own record of the rollout (a `verifiers.v1` trace), kept so that framework's
    scoring can run again offline (`looprl rescore`); None for looprl's own envs."""

    @property
    def scored(self) -> bool:
        return self.termination_reason in SCORED_REASONS


class GroupRequest(BaseModel):
    """Run `len(rollout_ids)` sibling rollouts of one example; sent by the orchestrator to an env."""

    group_id: str
    example: Example
    split: DatasetSplit
    rollout_ids: list[str]
    model: str
    """The model name env code passes to the OpenAI client."""
    base_url_template: str
    """Per-rollout gateway URL with a `{rollout_id}` placeholder, e.g. `http://127.0.0.1:PORT/sessions/{rollout_id}/v1`."""
    timeout_s: float | None = None
    """Wall-clock limit for each rollout; exceeded -> `timeout`."""

    def base_url(self, rollout_id: str) -> str:
        return self.base_url_template.format(rollout_id=rollout_id)
