"""An env server: one environment and split, served by N worker processes.

The server lives in the orchestrator process (it only moves messages; env code runs in the
workers). It sends each group to the least-loaded worker and settles every group it accepted, so a
bad environment cannot hang or kill the run:

- a worker that dies (killed, segfault, `os._exit` in env code) is respawned; the groups it had in
  flight end as `env_worker_died`;
- a group still running `2 * timeout_s + timeout_grace_s` after it was sent (its rollouts, then
  `compute_group_rewards`, each get `timeout_s` inside the worker) is stuck in code that ignores
  cancellation, e.g. a blocking call in a sync hook: its rollouts end as `timeout` and the worker is
  killed, so its other groups end as `env_worker_died`, and respawned.

Logs: `env_server.log` (this server: worker starts, deaths, overdue groups) and, written by each
worker, `env_worker_{id}.log`, both in the env's log directory of the run
(`looprl.paths.env_server_log_path` / `env_worker_log_path`).
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel

from looprl.envs.types import DatasetSplit, Example, GroupRequest, RolloutResult
from looprl.envserver.capture import LogLimits
from looprl.envserver.loading import env_name
from looprl.envserver.protocol import (MAX_LINE_BYTES, CreateDataset, DatasetReady, GroupDone, RequestFailed,
                                       RunGroup, WorkerConfig, WorkerFailed, WorkerReady, decode_from_worker, encode)
from looprl.envserver.runtime import failed_results
from looprl.errors import UserError
from looprl.paths import env_server_log_path, env_worker_log_path
from looprl.utils.logger import make_logger

STOP_TIMEOUT_S = 10.0
WORKER_MAIN = "import sys; from looprl.envserver.worker import main; sys.exit(main(sys.argv))"


@dataclass
class _Pending:
    future: asyncio.Future[Any]
    request: GroupRequest | None = None
    deadline: asyncio.TimerHandle | None = None
    started: float = field(default_factory=time.time)


@dataclass
class _Slot:
    """One worker id: the current process behind it and what it has in flight."""

    worker_id: int
    ready: asyncio.Future[None]
    proc: asyncio.subprocess.Process | None = None
    pending: dict[str, _Pending] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class EnvServer:
    def __init__(self, env: str, split: DatasetSplit, run_dir: Path, *, env_args: dict[str, Any] | None = None,
                 workers: int = 1, env_level: str = "INFO", log_limits: LogLimits | None = None,
                 json_logging: bool = False, timeout_grace_s: float = 5.0) -> None:
        if workers < 1:
            raise UserError(f"an env server needs at least one worker, got {workers}")
        self.env, self.split, self.run_dir, self.env_name = env, split, Path(run_dir), env_name(env)
        self.timeout_grace_s = timeout_grace_s
        self._config = WorkerConfig(worker_id=0, env=env, env_args=env_args or {}, env_level=env_level,
                                    log_limits=log_limits or LogLimits(), json_logging=json_logging)
        self._workers = workers
        self._slots: list[_Slot] = []
        self._closing = False
        self._requests = 0
        log_path = env_server_log_path(self.run_dir, split, self.env_name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file: TextIO = log_path.open("a", buffering=1, encoding="utf-8")
        self.log = make_logger(env_level, json_logging, sink=self._log_file, process="env_server")

    def worker_log_path(self, worker_id: int) -> Path:
        return env_worker_log_path(self.run_dir, self.split, self.env_name, worker_id)

    async def start(self) -> None:
        """Start the workers; raise `UserError` if the env cannot be loaded."""
        self.log.info("env server for {} ({} split): starting {} workers", self.env, self.split, self._workers)
        loop = asyncio.get_running_loop()
        self._slots = [_Slot(i, loop.create_future()) for i in range(self._workers)]
        for slot in self._slots:
            slot.task = asyncio.create_task(self._run_worker(slot))
        results = await asyncio.gather(*(asyncio.shield(s.ready) for s in self._slots), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.aclose()
            raise UserError(f"env workers for {self.env} failed to start: {errors[0]}")

    async def _run_worker(self, slot: _Slot) -> None:
        """Run one worker process to its end, then respawn it unless the server is closing."""
        config = self._config.model_copy(update={"worker_id": slot.worker_id}).model_dump_json()
        with self.worker_log_path(slot.worker_id).open("ab") as log_file:
            slot.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", WORKER_MAIN, config, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=log_file, limit=MAX_LINE_BYTES)
        self.log.info("worker {} started (pid {})", slot.worker_id, slot.proc.pid)
        assert slot.proc.stdout is not None
        while line := await slot.proc.stdout.readline():
            try:
                self._receive(slot, decode_from_worker(line))
            except ValueError as e:
                self.log.error("worker {}: malformed message: {}", slot.worker_id, e)
        code = await slot.proc.wait()
        self._on_exit(slot, code)

    def _receive(self, slot: _Slot, message: BaseModel) -> None:
        if isinstance(message, WorkerReady):
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
                pending.future.set_result(message.results)
            elif isinstance(message, DatasetReady):
                pending.future.set_result(message.examples)
            else:
                error_type = UserError if message.user_error else RuntimeError
                pending.future.set_exception(error_type(f"create_dataset({self.split!r}) failed: {message.error}"))

    def _on_exit(self, slot: _Slot, code: int) -> None:
        was_ready = slot.ready.done() and slot.ready.exception() is None
        if not slot.ready.done():
            slot.ready.set_exception(UserError(
                f"env worker exited during startup ({_describe_exit(code)}); see {self.worker_log_path(slot.worker_id)}"))
        pending, slot.pending = slot.pending, {}
        if self._closing:
            for p in pending.values():
                p.future.cancel()
            return
        rollouts = sum(len(p.request.rollout_ids) for p in pending.values() if p.request)
        self.log.error("worker {} (pid {}) died: {}; {} groups ({} rollouts) in flight end as env_worker_died",
                       slot.worker_id, slot.proc.pid if slot.proc else "?", _describe_exit(code), len(pending), rollouts)
        error = (f"env worker {slot.worker_id} died ({_describe_exit(code)}) while the rollout ran; "
                 f"see {self.worker_log_path(slot.worker_id)}")
        for p in pending.values():
            if p.deadline is not None:
                p.deadline.cancel()
            if p.future.done():
                continue
            if p.request is not None:
                p.future.set_result(failed_results(p.request, "env_worker_died", error, p.started))
            else:
                p.future.set_exception(RuntimeError(error))
        if was_ready and self._slots[slot.worker_id] is slot:  # not already replaced by `_overdue`
            self._respawn(slot)

    def _respawn(self, slot: _Slot) -> None:
        self.log.info("respawning worker {}", slot.worker_id)
        fresh = _Slot(slot.worker_id, asyncio.get_running_loop().create_future())
        self._slots[slot.worker_id] = fresh
        fresh.task = asyncio.create_task(self._run_worker(fresh))

    def _pick(self) -> _Slot:
        return min(self._slots, key=lambda s: (s.ready.done() and s.ready.exception() is not None, len(s.pending)))

    async def _request(self, message: CreateDataset | RunGroup, request: GroupRequest | None) -> Any:
        """Send a message to a worker and wait for its answer (or for the worker's death)."""
        slot = self._pick()
        pending = _Pending(asyncio.get_running_loop().create_future(), request)
        slot.pending[message.id] = pending
        try:
            await asyncio.shield(slot.ready)
        except UserError:
            slot.pending.pop(message.id, None)
            raise
        if request is not None and request.timeout_s is not None:
            pending.deadline = asyncio.get_running_loop().call_later(
                2 * request.timeout_s + self.timeout_grace_s, self._overdue, slot, message.id)
        assert slot.proc is not None and slot.proc.stdin is not None
        try:
            slot.proc.stdin.write(encode(message))
            await slot.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the worker is dying; `_on_exit` settles this request
        try:
            return await pending.future
        finally:
            slot.pending.pop(message.id, None)

    def _overdue(self, slot: _Slot, message_id: str) -> None:
        pending = slot.pending.pop(message_id, None)
        if pending is None or pending.request is None or pending.future.done():
            return
        request = pending.request
        self.log.bind(rollout=",".join(request.rollout_ids)).error(
            "group {} on worker {} is past its deadline ({} s timeout per rollout) and does not yield: "
            "its rollouts end as timeout; killing the worker", request.group_id, slot.worker_id, request.timeout_s)
        pending.future.set_result(failed_results(
            request, "timeout", f"rollout exceeded its {request.timeout_s} s timeout and env code did not yield "
                                f"(a blocking call?); env worker {slot.worker_id} was restarted", pending.started))
        if slot.proc is not None and slot.proc.returncode is None:
            slot.proc.kill()
        if self._slots[slot.worker_id] is slot:
            self._respawn(slot)  # now, so that no new group goes to the killed worker

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
        self.log.info("env server for {} ({} split) stopped", self.env, self.split)
        self.log.remove()
        self._log_file.close()

