"""Running one group of an environment with its log records captured per rollout.

`run_group_captured` is what every env host runs (the in-process thread host of `looprl eval`, the
env worker processes of `looprl rl`): it opens a log buffer per rollout, attributes records emitted
during `env.run_group` to the whole group (BaseEnv narrows to each rollout itself), attaches each
rollout's records to its result, adds a `failure_record` to each rollout that ended as an
operational failure, and turns an environment that breaks its own contract (raises out of
`run_group`, returns the wrong rollouts) into `env_error` results instead of an exception.

The env worker also passes a record `sink` (records stream out as they are emitted, and results
carry only the counts) and a `reporter` (`BaseEnv` reports each rollout as soon as it is settled, and
when `compute_group_rewards` starts). `score_waiting_captured` runs only `compute_group_rewards`, the
same way, on rollouts whose worker died while they waited for it.

The run's caps (`caps_of`: `env.max_tool_result_chars`, `env.max_transcript_chars`) hold around the group, and
every result, whatever environment made it, is held to the transcript cap (`within_transcript_cap`).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from looprl.config.env_runtime import EnvSource
from looprl.envs.base_env import BaseEnv
from looprl.envs.environment import Environment
from looprl.envs.logging import attribute_group
from looprl.envs.runtime_api import (
    TRANSCRIPT_TOO_LARGE,
    Reporter,
    TranscriptCaps,
    capped_to,
    reporting_to,
    score_waiting,
    transcript_chars,
    transcript_error,
)
from looprl.envs.types import GroupRequest, RolloutResult
from looprl.envserver.capture import LogBuffer, LogLimits, RecordSink, close_capture, failure_record, open_capture


def failed_results(request: GroupRequest, reason: str, error: str, started_at: float) -> list[RolloutResult]:
    """One failed result per rollout of the request (the prompt as transcript, no rewards)."""
    now = time.time()
    return [RolloutResult(rollout_id=rid, group_id=request.group_id, example_id=request.example.id,
                          split=request.split, messages=list(request.example.prompt_messages),
                          example_args=request.example.example_args, termination_reason=reason, error=error,
                          started_at=started_at, finished_at=now)
            for rid in request.rollout_ids]


def caps_of(env: EnvSource) -> TranscriptCaps:
    """The run's caps on a tool result and a transcript."""
    return TranscriptCaps(env.max_tool_result_chars, env.max_transcript_chars)


def within_transcript_cap(result: RolloutResult, limit: int | None) -> RolloutResult:
    """`result`, or, when its transcript is past `limit` characters, the failure `transcript_too_large` that keeps
    the leading messages within the cap (`BaseEnv` ends such a rollout itself; other environments may not)."""
    sizes = [transcript_chars([m]) for m in result.messages] if limit is not None else []
    if limit is None or sum(sizes) <= limit:
        return result
    kept, total = 0, 0
    while kept < len(sizes) and total + sizes[kept] <= limit:
        total += sizes[kept]
        kept += 1
    reason, first_line = result.termination_reason, (result.error or "").partition("\n")[0]
    error = (result.error or "") if reason == TRANSCRIPT_TOO_LARGE else transcript_error(sum(sizes), limit)
    if reason != TRANSCRIPT_TOO_LARGE and not result.scored:
        error += f" (it had ended {reason}: {first_line})"
    error += f"; the stored transcript keeps its first {kept} of {len(sizes)} messages"
    return result.model_copy(update={"messages": result.messages[:kept], "termination_reason": TRANSCRIPT_TOO_LARGE,
                                     "error": error, "rewards": {}})


@contextmanager
def _captured(rollout_ids: list[str], limits: LogLimits | None, sink: RecordSink | None) -> Iterator[list[LogBuffer]]:
    """A log buffer per rollout, records of the block attributed to the whole group."""
    buffers = [open_capture(rid, limits, sink) for rid in rollout_ids]
    try:
        with attribute_group(rollout_ids):
            yield buffers
    finally:
        for rid in rollout_ids:
            close_capture(rid)


def _with_logs(results: dict[str, RolloutResult], buffers: list[LogBuffer]) -> list[RolloutResult]:
    """Each buffer's rollout with its records, a `failure_record` added to those that failed."""
    out = []
    for buffer in buffers:
        result = results[buffer.rollout_id]
        if not result.scored:
            buffer.add(failure_record(result.termination_reason, result.error), bounded=False)
        out.append(result.model_copy(update={
            "logs": buffer.records, "logs_dropped": buffer.dropped, "logs_truncated": buffer.truncated}))
    return out


async def run_group_captured(env: Environment, request: GroupRequest, limits: LogLimits | None = None, *,
                             sink: RecordSink | None = None, reporter: Reporter | None = None,
                             caps: TranscriptCaps | None = None) -> list[RolloutResult]:
    """Run `env.run_group(request)` with per-rollout log capture, held to `caps`; never raises for env faults."""
    started = time.time()
    caps = caps or TranscriptCaps()
    with _captured(request.rollout_ids, limits, sink) as buffers:
        with reporting_to(reporter), capped_to(caps):
            try:
                results = await env.run_group(request)
            except Exception as e:
                error = f"run_group raised {type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])
                results = failed_results(request, "env_error", error, started)
        by_id = {r.rollout_id: within_transcript_cap(r, caps.max_transcript_chars)
                 for r in results if isinstance(r, RolloutResult)}
        missing = [rid for rid in request.rollout_ids if rid not in by_id]
        if missing:
            error = f"{type(env).__name__}.run_group returned no result for rollouts {missing}"
            for r in failed_results(request, "env_error", error, started):
                by_id.setdefault(r.rollout_id, r)
        return _with_logs(by_id, buffers)


async def score_waiting_captured(env: BaseEnv, request: GroupRequest, waiting: list[RolloutResult],
                                 limits: LogLimits | None = None, *, sink: RecordSink | None = None,
                                 reporter: Reporter | None = None) -> list[RolloutResult]:
    """`compute_group_rewards` on `waiting` (the rollouts of `request`, done and unscored by the group hook),
    with per-rollout log capture; a failing hook fails them as it would in `run_group`."""
    with _captured(request.rollout_ids, limits, sink) as buffers, reporting_to(reporter):
        results = await score_waiting(env, request, waiting)
        return _with_logs({r.rollout_id: r for r in results}, buffers)
