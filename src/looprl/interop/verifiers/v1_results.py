"""A `verifiers.v1` episode as looprl's rollout record: transcript, reward components, termination.

- Each `@vf.reward` is a component holding its score (`trace.rewards[name].score`); the env declares
  its weight (`reward_weights`), so looprl's total equals verifiers' `trace.reward`. Each `@vf.metric`
  is a component of weight 0: stored and shown, not counted.
- The trace itself is kept (`native_trace`), so `rescore` runs the task's own `score(trace)` on it again.
- The transcript is the trace's final branch as OpenAI chat messages, the harness's tool calls and
  the tool servers' results included.
- `termination` maps the trace's stop condition and errors (docs/environments.md has the table):
  limits onto looprl's scored reasons, failures onto `model_error` (the provider or the model path),
  `tool_error` (a tool server), `harness_error` (the harness program), `reward_error` (a reward or
  metric raised), `timeout`, `env_error` (the rest).
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from looprl.envs.types import SCORED_REASONS, GroupRequest, Message, RolloutResult

LIMITS = {"max_turns": "max_turns_exceeded", "max_output_tokens": "output_exceeded",
          "max_input_tokens": "context_exceeded", "max_total_tokens": "context_exceeded",
          "compaction_failed": "context_exceeded"}
"""verifiers' framework limits (`trace.stop_condition`) as looprl's scored termination reasons."""

FAILURES = {"ProviderError": "model_error", "InterceptionError": "model_error", "TunnelError": "model_error",
            "ToolsetError": "tool_error", "HarnessError": "harness_error"}
"""verifiers' error types (`trace.errors[].type`) as looprl's failure reasons; `TaskError` is `reward_error`
when scoring raised; anything else (`SandboxError`, `EnvError`, a plain exception) is `env_error`."""


def termination(trace: Any) -> tuple[str, str | None]:
    """looprl's termination reason and error for a finished `vf.Trace`."""
    if trace.is_timeout:
        return "timeout", f"verifiers' {trace.stop_condition or 'stage'} deadline ran out"
    if not trace.ok:
        error = trace.last_error
        if error is None:
            return "env_error", f"the rollout did not complete (stop condition {trace.stop_condition!r})"
        reason = FAILURES.get(error.type, "env_error")
        if error.type == "TaskError" and "scoring" in error.message:
            reason = "reward_error"
        return reason, f"{error.type}: {error.message}" + (f"\n{error.traceback}" if error.traceback else "")
    if trace.stop_condition in LIMITS:
        return LIMITS[trace.stop_condition], None
    if trace.is_truncated:  # the last call finished on `length`
        return "output_exceeded", None
    return "finished", None  # agent_completed, user_closed, or one of the env's own `@vf.stop`s


def components(trace: Any) -> dict[str, float]:
    """Metrics (weight 0) and rewards (their scores; the env's `reward_weights` weigh them) that were scored."""
    metrics = {name: float(value) for name, value in trace.metrics.items() if value is not None}
    return {**metrics, **{name: reward.score for name, reward in trace.rewards.items() if reward is not None}}


def messages(trace: Any) -> list[Message]:
    from verifiers.v1.dialects.chat import message_to_wire

    return [message_to_wire(m) for m in trace.messages]


def result(request: GroupRequest, rollout_id: str, started: float, outcome: Any) -> RolloutResult:
    """The `RolloutResult` of one rollout: `outcome` is its `vf.Episode`, or the exception that ended it."""
    transcript: list[Message] = []
    rewards: dict[str, float] = {}
    turns = tool_calls = 0
    native: dict[str, Any] | None = None
    if isinstance(outcome, BaseException):
        reason = "timeout" if isinstance(outcome, TimeoutError) else "env_error"
        error: str | None = f"{type(outcome).__name__}: {outcome}\n" + "".join(
            traceback.format_exception(outcome)[-6:])
    elif not outcome.traces:  # the env's own hooks failed before any agent ran
        reason = "timeout" if outcome.is_timeout else "env_error"
        error = "; ".join(f"{e.type}: {e.message}" for e in outcome.errors) or "the episode ran no agent"
    else:
        trace = outcome.traces[-1]
        reason, error = termination(trace)
        transcript = messages(trace)
        rewards = components(trace)
        turns, tool_calls = trace.num_turns, len(trace.tool_messages)
        native = trace.to_record()
    return RolloutResult(
        rollout_id=rollout_id, group_id=request.group_id, example_id=request.example.id, split=request.split,
        messages=transcript or [dict(m) for m in request.example.prompt_messages],
        example_args=request.example.example_args, termination_reason=reason, error=error,
        rewards=rewards if reason in SCORED_REASONS else {}, turns=turns, tool_calls=tool_calls,
        started_at=started, finished_at=time.time(), native_trace=native)


def without_scores(record: dict[str, Any]) -> Any:
    """A stored trace ready to be scored again, as `vf-replay` prepares one: no rewards, metrics or judge calls,
    and a scoring failure forgotten (its rollout was complete)."""
    import verifiers.v1 as vf

    trace = vf.WireTrace.model_validate(record)
    trace.info.pop("judge_calls", None)
    trace.rewards, trace.metrics, trace.extra_usage = {}, {}, []
    scoring_failed = [e for e in trace.errors if e.type == "TaskError" and "scoring" in e.message]
    if scoring_failed:
        trace.errors = [e for e in trace.errors if e not in scoring_failed]
        trace.ok = not trace.errors
    return trace
