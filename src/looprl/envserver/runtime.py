"""Running one group of an environment with its log records captured per rollout.

`run_group_captured` is what every env host runs (the in-process thread host of `looprl eval`, the
env worker processes of `looprl rl`): it opens a log buffer per rollout, attributes records emitted
during `env.run_group` to the whole group (BaseEnv narrows to each rollout itself), attaches each
rollout's records to its result, adds a `failure_record` to each rollout that ended as an
operational failure, and turns an environment that breaks its own contract (raises out of
`run_group`, returns the wrong rollouts) into `env_error` results instead of an exception.

The env worker also passes a record `sink` (records stream out as they are emitted, and results
carry only the counts) and a `reporter` (`BaseEnv` reports each rollout as soon as it is settled).
"""

from __future__ import annotations

import time
import traceback

from looprl.envs._progress import Reporter, reporting_to
from looprl.envs.environment import Environment
from looprl.envs.logging import attribute_group
from looprl.envs.types import GroupRequest, RolloutResult
from looprl.envserver.capture import LogLimits, RecordSink, close_capture, failure_record, open_capture


def failed_results(request: GroupRequest, reason: str, error: str, started_at: float) -> list[RolloutResult]:
    """One failed result per rollout of the request (the prompt as transcript, no rewards)."""
    now = time.time()
    return [RolloutResult(rollout_id=rid, group_id=request.group_id, example_id=request.example.id,
                          split=request.split, messages=list(request.example.prompt_messages),
                          example_args=request.example.example_args, termination_reason=reason, error=error,
                          started_at=started_at, finished_at=now)
            for rid in request.rollout_ids]


async def run_group_captured(env: Environment, request: GroupRequest, limits: LogLimits | None = None, *,
                             sink: RecordSink | None = None, reporter: Reporter | None = None) -> list[RolloutResult]:
    """Run `env.run_group(request)` with per-rollout log capture; never raises for env faults."""
    started = time.time()
    buffers = [open_capture(rid, limits, sink) for rid in request.rollout_ids]
    try:
        with attribute_group(request.rollout_ids), reporting_to(reporter):
            try:
                results = await env.run_group(request)
            except Exception as e:
                error = f"run_group raised {type(e).__name__}: {e}\n" + "".join(traceback.format_exception(e)[-6:])
                results = failed_results(request, "env_error", error, started)
        by_id = {r.rollout_id: r for r in results if isinstance(r, RolloutResult)}
        missing = [rid for rid in request.rollout_ids if rid not in by_id]
        if missing:
            error = f"{type(env).__name__}.run_group returned no result for rollouts {missing}"
            for r in failed_results(request, "env_error", error, started):
                by_id.setdefault(r.rollout_id, r)
        out = []
        for rid, buffer in zip(request.rollout_ids, buffers):
            if not by_id[rid].scored:
                buffer.add(failure_record(by_id[rid].termination_reason, by_id[rid].error), bounded=False)
            out.append(by_id[rid].model_copy(update={
                "logs": buffer.records, "logs_dropped": buffer.dropped, "logs_truncated": buffer.truncated}))
        return out
    finally:
        for rid in request.rollout_ids:
            close_capture(rid)
