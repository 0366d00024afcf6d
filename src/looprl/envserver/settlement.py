"""How an env server settles the rollouts of a worker that died or got stuck: functions from what the
server knows of a request (`PendingRequest`, `WorkerSlot`) to results.

Every rollout of an accepted group ends with a result, its transcript and every log record the
worker streamed before it died, and each failure adds a `failure_record` saying what ended it:

- a rollout settled before the death (`RolloutSettled`) keeps that result, unless it was inside its
  `rollout_context` exit (below) or still waited for `compute_group_rewards`;
- one that waited for `compute_group_rewards` is scored by it on a live worker when the hook had not
  started (`salvage` returns it as waiting), else ends as `env_worker_died` (`timeout` when it blocked):
  the hook may be what killed the worker, so it is not run again;
- one that was not settled ends as `env_worker_died`, or as `timeout` when its code held the worker
  past its timeout (`blocked_timeouts`, `overdue_timeouts`).

`rollout_context` exit: a rollout is done only once its exit has completed. A fault there — the exit
raises, hangs (async or blocking) or the worker dies inside it (`os._exit`, SIGKILL) — fails that
rollout, whatever it had scored: `env_error` and `timeout` in the worker (`BaseEnv`), and here
`timeout` for a blocking hang and `env_worker_died` for a death while the exit ran. The worker says
when each exit starts and completes (`ContextExit`), so only the rollout whose exit was running fails;
siblings whose exits had completed, or not yet started, keep their results.
"""

from __future__ import annotations

import logging
import signal
import time
from pathlib import Path

from looprl.envs.types import GroupRequest, RolloutResult
from looprl.envserver.capture import failure_record
from looprl.envserver.protocol import WorkerBlocked
from looprl.envserver.runtime import failed_results
from looprl.envserver.worker_slot import PendingRequest, WorkerSlot


def describe_exit(code: int) -> str:
    """A process's exit code in words: `exit status 3`, `killed by SIGKILL`."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def death_error(slot: WorkerSlot, code: int, log_path: Path) -> str:
    """The error of the rollouts a dead worker had in flight: how it ended, and why when the server killed it."""
    cause = f" because {slot.killed_for}" if slot.killed_for else " while the rollout ran"
    return f"env worker {slot.worker_id} died ({describe_exit(code)}){cause}; see {log_path}"


def salvage(p: PendingRequest, request: GroupRequest, timed_out: dict[str, str],
            error: str) -> tuple[list[RolloutResult], list[RolloutResult]]:
    """A dead worker's group: a result per rollout (what it had settled, its streamed records, what ended
    it); and the reports of those that waited for `compute_group_rewards`, when another worker may run it."""
    out, waiting = [], []
    for result in failed_results(request, "env_worker_died", error, p.started):
        rid, report = result.rollout_id, p.settled.get(result.rollout_id)
        logs = p.logs.get(rid, [])
        if rid in p.exiting:  # the rollout_context exit rule: a fault inside the exit fails the rollout
            reason = "timeout" if rid in timed_out else "env_worker_died"
            why = timed_out.get(rid) or f"{error}, inside this rollout's rollout_context exit"
            result = (report.result if report else result).model_copy(update={
                "termination_reason": reason, "rewards": {}, "error": why})
        elif rid in timed_out:
            result = (report.result if report else result).model_copy(update={
                "termination_reason": "timeout", "rewards": {}, "error": timed_out[rid]})
        elif report is not None and not report.group_pending:
            when = ("after this rollout's rollout_context had exited" if rid in p.exited
                    else "before this rollout's rollout_context exit started (it never exited)")
            out.append(report.result.model_copy(update={"logs": [*logs, failure_record(
                "", f"{error} ({when}: it keeps its result)", level=logging.WARNING)]}))
            continue
        elif report is not None:
            if not (p.group_hook_started or p.rescoring):
                waiting.append(report.result)
            why = (f"compute_group_rewards was running when {error}; it is not run again" if p.group_hook_started
                   else f"compute_group_rewards could not run: {error}")
            result = report.result.model_copy(update={"termination_reason": "env_worker_died", "rewards": {},
                                                      "error": why})
        out.append(result.model_copy(update={"logs": [*logs, failure_record(result.termination_reason, result.error)]}))
    return out, waiting


def scored_elsewhere(p: PendingRequest, results: list[RolloutResult], scored: list[RolloutResult],
                     error: str) -> list[RolloutResult]:
    """The group's `results` with the rollouts another worker scored replaced by those scores (their earlier
    records, a notice, then the records of the scoring); rollouts it did not score keep their result."""
    notice = failure_record("", f"{error}, before compute_group_rewards started: it ran on a live env worker "
                                "(this rollout's rollout_context never exited)", level=logging.WARNING)
    by_id = {r.rollout_id: r for r in scored}
    return [by_id[r.rollout_id].model_copy(update={"logs": [*p.logs.get(r.rollout_id, []), notice,
                                                            *by_id[r.rollout_id].logs]})
            if r.rollout_id in by_id else r for r in results]


def blocked_timeouts(slot: WorkerSlot, message: WorkerBlocked) -> dict[str, str]:
    """The rollouts to end as `timeout` when the watchdog caught env code holding the worker's event loop:
    the blocked ones, and those stuck behind them past their own timeout; with each one's error."""
    timeouts = {p.request.timeout_s for rid in message.rollout_ids  # the watchdog watches only timed rollouts
                if (p := slot.rollouts.get(rid)) is not None and p.request is not None
                and p.request.timeout_s is not None}
    error = (f"rollout exceeded its {', '.join(map(str, sorted(timeouts)))} s timeout in blocking code: env code "
             f"held env worker {slot.worker_id}'s event loop for {message.blocked_s:.1f} s, and the worker was "
             f"restarted. Stuck at (most recent call last):\n{message.stack}")
    timed_out = dict.fromkeys(message.rollout_ids, error)
    now = time.time()
    for p in slot.pending.values():
        request = p.request
        if request is None or request.timeout_s is None or now < p.started + request.timeout_s:
            continue
        for rid in request.rollout_ids:
            if rid not in timed_out and rid not in p.settled:
                timed_out[rid] = (f"rollout exceeded its {request.timeout_s} s timeout while rollouts "
                                  f"{', '.join(message.rollout_ids)} blocked env worker {slot.worker_id}'s "
                                  f"event loop (see their errors); the worker was restarted")
    return timed_out


def overdue_timeouts(slot: WorkerSlot, p: PendingRequest, request: GroupRequest) -> dict[str, str]:
    """The rollouts of a group past its deadline that are not done: unsettled, in a group hook that started,
    or inside their `rollout_context` exit; with each one's error."""
    unsettled = [rid for rid in request.rollout_ids if rid not in p.settled or rid in p.exiting
                 or (p.settled[rid].group_pending and p.group_hook_started)]
    error = (f"rollout exceeded its {request.timeout_s} s timeout and env code did not yield "
             f"(a blocking call?); env worker {slot.worker_id} was restarted")
    return dict.fromkeys(unsettled, error)
