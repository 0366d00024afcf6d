"""An env server: one environment and split, served by N worker processes.

The server lives in the orchestrator process (it only moves messages; env code runs in the
workers). It sends each group to the least-loaded worker and settles every group it accepted, so a
bad environment cannot hang or kill the run:

- a worker that dies (killed, segfault, `os._exit` in env code) is respawned; the rollouts it had
  in flight end as `env_worker_died`;
- env code that blocks a worker's event loop past its rollouts' timeout is reported by the worker's
  watchdog (`WorkerBlocked`, with the stack it is stuck in): those rollouts end as `timeout` and the
  worker is killed and respawned;
- a group still running `3 * timeout_s + timeout_grace_s` after it was sent (its rollouts, then
  `compute_group_rewards`, then each `rollout_context` exit get `timeout_s` inside the worker) is
  stuck where the watchdog cannot see (a C call that holds the GIL): its rollouts that are not done
  end as `timeout` and the worker is killed and respawned.

No message between the server and a worker is longer than `env.max_message_bytes` (`looprl.envserver.lines`):
a request too large to send fails its group as `message_too_large` here; a worker fits each group's results
into one message, failing only the rollouts too large to send (`looprl.envserver.fitting`). A line that
still comes in longer is read out and dropped, and the reader goes on with the next: an answer it can name
settles its request (a group's rollouts end as `message_too_large`), a log record or a report is lost, and
a line that names no request gets the worker killed, so that its groups settle as for any death.

What a worker streams while a group runs survives its death: every log record, each rollout that
was already settled (`RolloutSettled`), when each `rollout_context` exit starts and completes
(`ContextExit`), and whether `compute_group_rewards` had started (`GroupHookStarted`). What each
rollout then gets is `looprl.envserver.settlement`'s rule (a fault inside a `rollout_context` exit,
whatever it is, fails that rollout); what the server tracks per worker and request is
`looprl.envserver.worker_slot`. This module dispatches requests and runs, kills and respawns workers.

Logs: `env_server.log` (this server: worker starts, deaths, overdue groups) and, written by each
worker, `env_worker_{id}.log`, both in the env's log directory of the run
(`looprl.paths.env_server_log_path` / `env_worker_log_path`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from looprl.config.env_runtime import EnvRuntimeConfig
from looprl.envs.types import DatasetSplit, Example, GroupRequest, RolloutResult
from looprl.envserver.capture import failure_record
from looprl.envserver.lines import (
    MESSAGE_TOO_LARGE,
    MessageTooLarge,
    Overlong,
    encode_within,
    read_line,
    too_large_error,
)
from looprl.envserver.loading import env_name
from looprl.envserver.protocol import (
    ContextExit,
    CreateDataset,
    DatasetReady,
    GroupDone,
    GroupHookStarted,
    RequestFailed,
    RolloutLog,
    RolloutSettled,
    RunGroup,
    ScoreGroup,
    WorkerBlocked,
    WorkerConfig,
    WorkerFailed,
    WorkerReady,
    decode_from_worker,
)
from looprl.envserver.runtime import failed_results
from looprl.envserver.settlement import (
    blocked_timeouts,
    death_error,
    describe_exit,
    overdue_timeouts,
    salvage,
    scored_elsewhere,
)
from looprl.envserver.worker_slot import PendingRequest, WorkerSlot
from looprl.errors import UserError
from looprl.paths import env_server_log_path, env_worker_log_path
from looprl.utils.logger import make_logger

STOP_TIMEOUT_S = 10.0
STREAMED = frozenset({"log", "rollout", "context_exit", "group_hook_started"})
"""Kinds of worker message streamed while a group runs (a lost one loses a record or a report, not the group)."""
ANSWERS = frozenset({"group_done", "dataset", "request_failed"})
"""Kinds of worker message that answer a request, which they name by `id`."""
WORKER_MAIN = "import sys; from looprl.envserver.worker import main; sys.exit(main(sys.argv))"


class EnvServer:
    def __init__(self, runtime: EnvRuntimeConfig, split: DatasetSplit, run_dir: Path) -> None:
        self.runtime, self.split, self.run_dir = runtime, split, Path(run_dir)
        self.env, self.env_name = runtime.source, env_name(runtime.source)
        self._config = WorkerConfig(worker_id=0, runtime=runtime)
        self._slots: list[WorkerSlot] = []
        self._closing = False
        self._requests = 0
        self._scoring: set[asyncio.Task[None]] = set()
        """Groups whose waiting rollouts are being scored on another worker after theirs died."""
        log_path = env_server_log_path(self.run_dir, split, self.env_name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file: TextIO = log_path.open("a", buffering=1, encoding="utf-8")
        self.log = make_logger(runtime.level, runtime.json_logging, sink=self._log_file, process="env_server")

    def worker_log_path(self, worker_id: int) -> Path:
        return env_worker_log_path(self.run_dir, self.split, self.env_name, worker_id)

    async def start(self) -> None:
        """Start the workers; raise `UserError` if the env cannot be loaded."""
        self.log.info("env server for {} ({} split): starting {} workers", self.env, self.split, self.runtime.workers)
        loop = asyncio.get_running_loop()
        self._slots = [WorkerSlot(i, loop.create_future()) for i in range(self.runtime.workers)]
        for slot in self._slots:
            slot.task = asyncio.create_task(self._run_worker(slot))
        results = await asyncio.gather(*(asyncio.shield(s.ready) for s in self._slots), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.aclose()
            raise UserError(f"env workers for {self.env} failed to start: {errors[0]}")

    async def _run_worker(self, slot: WorkerSlot) -> None:
        """Run one worker process to its end, then respawn it unless the server is closing."""
        config = self._config.model_copy(update={"worker_id": slot.worker_id}).model_dump_json()
        with self.worker_log_path(slot.worker_id).open("ab") as log_file:
            slot.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WORKER_MAIN, config, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=log_file, limit=self.runtime.max_message_bytes)
        self.log.info("worker {} started (pid {})", slot.worker_id, slot.proc.pid)
        assert slot.proc.stdout is not None
        while line := await read_line(slot.proc.stdout):
            if isinstance(line, Overlong):
                self._overlong(slot, line)
                continue
            try:
                message = decode_from_worker(line)
            except ValueError as e:
                self.log.error("worker {}: malformed message: {}", slot.worker_id, e)
                continue
            self._receive(slot, message)
        code = await slot.proc.wait()
        self._on_exit(slot, code)

    def _receive(self, slot: WorkerSlot, message: BaseModel) -> None:
        if isinstance(message, RolloutLog):
            owner = slot.rollouts.get(message.rollout_id)
            if owner is not None:
                owner.logs.setdefault(message.rollout_id, []).append(message.record)
        elif isinstance(message, RolloutSettled):
            if (owner := slot.pending.get(message.id)) is not None:
                owner.settled[message.result.rollout_id] = message
        elif isinstance(message, ContextExit):
            if (owner := slot.pending.get(message.id)) is not None:
                if message.done:
                    owner.exiting.discard(message.rollout_id)
                    owner.exited.add(message.rollout_id)
                else:
                    owner.exiting.add(message.rollout_id)
        elif isinstance(message, GroupHookStarted):
            if (owner := slot.pending.get(message.id)) is not None:
                owner.group_hook_started = True
        elif isinstance(message, WorkerBlocked):
            self._blocked(slot, message)
        elif isinstance(message, WorkerReady):
            self.log.info("worker {} ready (pid {})", slot.worker_id, message.pid)
            if not slot.ready.done():
                slot.ready.set_result(None)
        elif isinstance(message, WorkerFailed):
            self.log.error("worker {} cannot load the env: {}", slot.worker_id, message.error)
            if not slot.ready.done():
                slot.ready.set_exception(UserError(message.error))
        elif isinstance(message, (DatasetReady, RequestFailed, GroupDone)):
            pending = slot.pending.pop(message.id, None)
            if pending is None or pending.future.done():  # already settled (overdue) or abandoned
                return
            if pending.deadline is not None:
                pending.deadline.cancel()
            if isinstance(message, GroupDone):
                pending.future.set_result([r.model_copy(update={"logs": pending.logs.get(r.rollout_id, [])})
                                           for r in message.results])
            elif isinstance(message, DatasetReady):
                pending.future.set_result(message.examples)
            else:
                error_type = UserError if message.user_error else RuntimeError
                pending.future.set_exception(error_type(f"create_dataset({self.split!r}) failed: {message.error}"))

    def _overlong(self, slot: WorkerSlot, line: Overlong) -> None:
        """A line from a worker over the limit, read out and dropped: settle what it answered, if it says."""
        kind, ident = line.names() or ("", "")
        limit = self.runtime.max_message_bytes
        what = f"a {line.size:,}-byte {kind or 'unreadable'} message from env worker {slot.worker_id}"
        self.log.error("{} is over env.max_message_bytes ({:,}); dropped", what, limit)
        if kind in STREAMED:
            return  # a record or a report lost; the group's answer still comes
        if kind not in ANSWERS:  # nothing says which groups it concerned: settle them all as for a death
            self._kill(slot, {}, f"it sent {what}, which names no request")
            return
        pending = slot.pending.pop(ident, None)
        if pending is None:
            return
        if pending.deadline is not None:
            pending.deadline.cancel()
        if pending.future.done():
            return
        error = too_large_error(what, limit)
        if pending.request is None:
            pending.future.set_exception(UserError(f"create_dataset({self.split!r}) failed: {error}"))
            return
        pending.future.set_result([r.model_copy(update={"logs": [*pending.logs.get(r.rollout_id, []),
                                                                 failure_record(r.termination_reason, r.error)]})
                                   for r in failed_results(pending.request, MESSAGE_TOO_LARGE, error, pending.started)])

    def _on_exit(self, slot: WorkerSlot, code: int) -> None:
        was_ready = slot.ready.done() and slot.ready.exception() is None
        if not slot.ready.done():
            slot.ready.set_exception(UserError(
                f"env worker exited during startup ({describe_exit(code)}); "
                f"see {self.worker_log_path(slot.worker_id)}"))
        pending, slot.pending = slot.pending, {}
        if self._closing:
            for p in pending.values():
                p.future.cancel()
            return
        rollouts = sum(len(p.request.rollout_ids) for p in pending.values() if p.request)
        self.log.error("worker {} (pid {}) died: {}; {} groups ({} rollouts) were in flight",
                       slot.worker_id, slot.proc.pid if slot.proc else "?", describe_exit(code), len(pending),
                       rollouts)
        error = death_error(slot, code, self.worker_log_path(slot.worker_id))
        for p in pending.values():
            if p.deadline is not None:
                p.deadline.cancel()
            if p.future.done():
                continue
            if p.request is not None:
                self._settle(slot, p, p.request, error)
            else:
                p.future.set_exception(RuntimeError(error))
        if was_ready and self._slots[slot.worker_id] is slot:  # not already replaced by `_overdue`
            self._respawn(slot)

    def _settle(self, slot: WorkerSlot, p: PendingRequest, request: GroupRequest, error: str) -> None:
        """Settle a dead worker's group: now, or once its waiting rollouts are scored on another worker."""
        results, waiting = salvage(p, request, slot.timed_out, error)
        if not waiting:
            p.future.set_result(results)
            return
        task = asyncio.create_task(self._score_elsewhere(p, request, results, waiting, error))
        self._scoring.add(task)
        task.add_done_callback(self._scoring.discard)

    async def _score_elsewhere(self, p: PendingRequest, request: GroupRequest, results: list[RolloutResult],
                               waiting: list[RolloutResult], error: str) -> None:
        """`compute_group_rewards` on a live worker for `waiting`, then settle the group; without a live
        worker they keep their `results` (`compute_group_rewards could not run`)."""
        ids = [r.rollout_id for r in waiting]
        narrowed = request.model_copy(update={"rollout_ids": ids})
        self.log.bind(rollout=",".join(ids)).warning(
            "group {}: {} rollouts waited for compute_group_rewards; scoring them on a live worker", request.group_id,
            len(ids))
        try:
            scored = await self._request(ScoreGroup(id=f"{request.group_id}:score", request=narrowed, rollouts=waiting),
                                         narrowed)
        except (UserError, MessageTooLarge):  # no worker could start, or the rollouts are too large to send back
            scored = []
        except asyncio.CancelledError:
            p.future.cancel()
            raise
        if not p.future.done():
            p.future.set_result(scored_elsewhere(p, results, scored, error))

    def _blocked(self, slot: WorkerSlot, message: WorkerBlocked) -> None:
        """The worker's watchdog caught env code holding its event loop: end those rollouts, kill it."""
        self._kill(slot, blocked_timeouts(slot, message), f"rollouts {', '.join(message.rollout_ids)} blocked its "
                                                          "event loop")

    def _kill(self, slot: WorkerSlot, timed_out: dict[str, str], why: str) -> None:
        """Kill a worker stuck in env code; `_on_exit` settles its groups, `timed_out` rollouts as `timeout`."""
        self.log.bind(rollout=",".join(timed_out)).error("killing worker {}: {}", slot.worker_id, why)
        slot.timed_out.update(timed_out)
        slot.killed_for = slot.killed_for or why
        if slot.proc is not None and slot.proc.returncode is None:
            slot.proc.kill()
        if self._slots[slot.worker_id] is slot:
            self._respawn(slot)  # now, so that no new group goes to the killed worker

    def _respawn(self, slot: WorkerSlot) -> None:
        self.log.info("respawning worker {}", slot.worker_id)
        fresh = WorkerSlot(slot.worker_id, asyncio.get_running_loop().create_future())
        self._slots[slot.worker_id] = fresh
        fresh.task = asyncio.create_task(self._run_worker(fresh))

    def _pick(self) -> WorkerSlot:
        return min(self._slots, key=lambda s: (s.ready.done() and s.ready.exception() is not None, len(s.pending)))

    async def _request(self, message: CreateDataset | RunGroup | ScoreGroup, request: GroupRequest | None) -> Any:
        """Send a message to a worker and wait for its answer (or for the worker's death); `MessageTooLarge` when
        the message is longer than a worker may read."""
        data = encode_within(message, self.runtime.max_message_bytes)
        slot = self._pick()
        pending = PendingRequest(asyncio.get_running_loop().create_future(), request)
        if isinstance(message, ScoreGroup):  # its rollouts are done, and wait for the group hook here
            pending.rescoring = True
            pending.settled = {r.rollout_id: RolloutSettled(id=message.id, result=r, group_pending=True)
                               for r in message.rollouts}
        slot.pending[message.id] = pending
        slot.rollouts.update(dict.fromkeys(request.rollout_ids if request else (), pending))
        try:
            await asyncio.shield(slot.ready)
        except UserError:
            slot.pending.pop(message.id, None)
            raise
        if request is not None and request.timeout_s is not None:
            pending.deadline = asyncio.get_running_loop().call_later(
                3 * request.timeout_s + self.runtime.timeout_grace_s, self._overdue, slot, message.id)
        assert slot.proc is not None and slot.proc.stdin is not None
        try:
            slot.proc.stdin.write(data)
            await slot.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the worker is dying; `_on_exit` settles this request
        try:
            return await pending.future
        finally:
            slot.pending.pop(message.id, None)
            for rid in request.rollout_ids if request else ():
                slot.rollouts.pop(rid, None)

    def _overdue(self, slot: WorkerSlot, message_id: str) -> None:
        pending = slot.pending.get(message_id)
        if pending is None or pending.request is None or pending.future.done():
            return
        request = pending.request
        self._kill(slot, overdue_timeouts(slot, pending, request),
                   f"group {request.group_id} is past its deadline ({request.timeout_s} s timeout per step) "
                   f"and does not yield")

    async def create_dataset(self, base_dir: Path, max_examples: int | None) -> list[Example]:
        self._requests += 1
        message = CreateDataset(id=f"dataset-{self._requests}", split=self.split, base_dir=base_dir,
                                max_examples=max_examples)
        return await self._request(message, None)

    async def dispatch_group(self, request: GroupRequest) -> list[RolloutResult]:
        """Run a group on the least-loaded worker; every outcome, a worker's death included, is results."""
        try:
            return await self._request(RunGroup(id=request.group_id, request=request), request)
        except UserError as e:  # no worker could start
            return failed_results(request, "env_worker_died", f"no env worker is running: {e}", time.time())
        except MessageTooLarge as e:
            return failed_results(request, MESSAGE_TOO_LARGE, too_large_error(f"the group's request ({e.size:,} bytes)",
                                                                              e.limit), time.time())

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        for slot in self._slots:
            if slot.proc is not None and slot.proc.stdin is not None:
                slot.proc.stdin.close()
        for slot in self._slots:
            if slot.proc is None or slot.task is None:
                continue
            try:
                await asyncio.wait_for(asyncio.shield(slot.task), STOP_TIMEOUT_S)
            except TimeoutError:
                self.log.warning("worker {} did not exit within {} s; killing it", slot.worker_id, STOP_TIMEOUT_S)
                slot.proc.kill()
                await slot.task
        for slot in self._slots:
            if slot.task is not None and not slot.task.done():
                slot.task.cancel()
        for task in list(self._scoring):
            task.cancel()
        self.log.info("env server for {} ({} split) stopped", self.env, self.split)
        self.log.remove()
        self._log_file.close()

