"""An env worker process: loads one environment and runs the groups its env server sends it.

    python -m looprl.envserver.worker '<WorkerConfig JSON>'

(`EnvServer` runs `main` through `python -c`, so log lines name this module, not `__main__`.)

`EnvServer` starts it with pipes on stdin/stdout and stderr on `env_worker_{id}.log`. The worker
keeps private copies of the two pipes for the protocol (`looprl.envserver.protocol`) and points
its own stdin at /dev/null and its stdout at the log, so a crash dump from C code ends up in the
worker log, never in the protocol; `print()` and stderr writes from Python become records of the
rollout that made them (`looprl.envserver.streams`). Every log line emitted while a rollout runs
names the rollout: `rollout=ID` (several ids, comma-separated, for group-level records).

Groups run concurrently on the worker's event loop; each one through `run_group_captured` (or, for
a `ScoreGroup`, `score_waiting_captured`), which never raises for env faults. Messages go out
through one `Channel`, written synchronously under a lock, so a record is in the pipe before the
next line of env code runs (a worker killed right after keeps it) and records, reports and results
stay in order, from any thread. A `Watchdog` reports rollouts whose code blocks the event loop past
their timeout. When stdin closes the worker closes the env and exits.

No message goes out longer than `env.max_message_bytes` (`looprl.envserver.lines`): a group's results
that do not fit in one line are fitted (`looprl.envserver.fitting`: a result too large or not serialisable
fails its own rollout), a report or a log record that does not fit is dropped (the group's results still
come), a dataset that does not fit fails `create_dataset` with a message that says so. Whatever goes
wrong while a group's results are made and sent, the group is answered: its rollouts end as `env_error`
with the cause.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from looprl.envs.base_env import BaseEnv
from looprl.envs.environment import Environment
from looprl.envs.logging import current_rollout_ids
from looprl.envs.runtime_api import aclose_pool, warm_up
from looprl.envs.types import GroupRequest, LogRecordData, RolloutResult
from looprl.envserver.capture import install_capture
from looprl.envserver.fitting import fit_results
from looprl.envserver.lines import UNSENDABLE, MessageTooLarge, Overlong, encode_within, read_line, too_large_error
from looprl.envserver.loading import instantiate, load_env_class
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
    decode_to_worker,
    encode,
)
from looprl.envserver.runtime import caps_of, failed_results, run_group_captured, score_waiting_captured
from looprl.envserver.streams import capture_std_streams
from looprl.envserver.watchdog import Watchdog
from looprl.errors import UserError
from looprl.utils.logger import get_logger, setup_logger


def _tag_rollout(record: dict[str, Any]) -> None:
    if not record["extra"].get("rollout"):
        ids = current_rollout_ids()
        if ids:
            record["extra"]["rollout"] = ",".join(ids)


def _take_protocol_pipes() -> tuple[int, int]:
    """Keep the protocol pipes on private fds; fd 0 becomes /dev/null, fd 1 the log (like fd 2)."""
    in_fd, out_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return in_fd, out_fd


class Channel:
    """The protocol's outgoing pipe: each message written whole, at once, from any thread; `send` refuses one
    longer than `limit` bytes (`MessageTooLarge`)."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self._lock = threading.Lock()

    def send(self, message: BaseModel) -> None:
        self.write(encode_within(message, self.limit))

    def write(self, line: bytes) -> None:
        """Write one encoded message, whatever its length."""
        data = memoryview(line)
        with self._lock:
            while data:
                data = data[os.write(self.fd, data):]


@dataclass
class GroupReporter:
    """What `BaseEnv` reports while group `group_id` runs, sent to the server as it happens."""

    channel: Channel
    group_id: str

    def settled(self, result: RolloutResult, group_pending: bool) -> None:
        try:
            self.channel.send(RolloutSettled(id=self.group_id, result=result, group_pending=group_pending))
        except UNSENDABLE as e:  # the group's results (fitted) say what became of it
            get_logger().bind(rollout=result.rollout_id).warning("rollout report not sent: {}", e)

    def context_exit(self, rollout_id: str, done: bool) -> None:
        self.channel.send(ContextExit(id=self.group_id, rollout_id=rollout_id, done=done))

    def group_hook_started(self) -> None:
        self.channel.send(GroupHookStarted(id=self.group_id))


class Worker:
    def __init__(self, cfg: WorkerConfig, env: Environment, channel: Channel) -> None:
        self.cfg, self.env, self.channel = cfg, env, channel
        self.log = get_logger()
        self.timeouts: dict[str, float] = {}
        """The timeout of each running rollout that has one (what the watchdog holds blocking code to)."""

    def send(self, message: BaseModel) -> None:
        self.channel.send(message)

    def send_record(self, rollout_id: str, record: LogRecordData) -> None:
        """Stream one of a rollout's records; one that cannot be sent is dropped (this runs inside `logging`)."""
        try:
            self.send(RolloutLog(rollout_id=rollout_id, record=record))
        except UNSENDABLE as e:
            self.log.bind(rollout=rollout_id).warning("log record not sent: {}", e)

    def send_blocked(self, rollout_ids: list[str], blocked_s: float, stack: str) -> None:
        self.log.bind(rollout=",".join(rollout_ids)).error(
            "env code has blocked the event loop for {:.1f} s, past the rollout timeout; stuck at:\n{}",
            blocked_s, stack)
        stack = stack[-self.channel.limit // 2:]  # the innermost frames: a deep stack must not outgrow the line
        self.send(WorkerBlocked(rollout_ids=rollout_ids, blocked_s=blocked_s, stack=stack))

    async def handle(self, message: CreateDataset | RunGroup | ScoreGroup) -> None:
        if isinstance(message, RunGroup):
            await self.run(message.id, message.request, "group", lambda: run_group_captured(
                self.env, message.request, self.cfg.runtime.log_limits, sink=self.send_record,
                reporter=GroupReporter(self.channel, message.id), caps=caps_of(self.cfg.runtime)))
        elif isinstance(message, ScoreGroup):
            env = self.env
            assert isinstance(env, BaseEnv)  # only BaseEnv reports rollouts waiting for its group hook
            await self.run(message.id, message.request, "re-scoring of group", lambda: score_waiting_captured(
                env, message.request, message.rollouts, self.cfg.runtime.log_limits, sink=self.send_record,
                reporter=GroupReporter(self.channel, message.id)))
        else:
            await self.create_dataset(message)

    async def run(self, message_id: str, request: GroupRequest, what: str,
                  call: Callable[[], Awaitable[list[RolloutResult]]]) -> None:
        """Run a group's env code (`call`), its rollouts watched for blocking, and send its results: always an
        answer, each rollout that cannot be sent failed alone, or the whole group as `env_error` when making
        or sending its answer raised."""
        log = self.log.bind(rollout=",".join(request.rollout_ids))
        log.info("{} {} started: {} rollouts of example {}", what, request.group_id, len(request.rollout_ids),
                 request.example.id)
        started = time.time()
        if request.timeout_s is not None:
            self.timeouts.update(dict.fromkeys(request.rollout_ids, request.timeout_s))
        try:
            try:
                results = await call()
            finally:
                for rid in request.rollout_ids:
                    self.timeouts.pop(rid, None)
            try:
                line = encode_within(GroupDone(id=message_id, results=results), self.channel.limit)
            except UNSENDABLE:
                results, failures = fit_results(message_id, request, results, self.channel.limit)
                for rid, record in failures:
                    self.send_record(rid, record)
                # still too long when even the prompts are: the server reads it out and fails the group
                line = encode(GroupDone(id=message_id, results=results))
            for r in results:
                if not r.scored:
                    self.log.bind(rollout=r.rollout_id).warning("rollout ended {}: {}", r.termination_reason,
                                                                (r.error or "").partition("\n")[0])
            log.info("{} {} done: {}", what, request.group_id, dict(Counter(r.termination_reason for r in results)))
            self.channel.write(line)
        except Exception as e:
            log.opt(exception=e).error("{} {}: its results could not be sent", what, request.group_id)
            error = f"the env worker could not send this group's results: {type(e).__name__}: {e}"
            self.channel.write(encode(GroupDone(id=message_id, results=failed_results(request, "env_error", error,
                                                                                      started))))

    async def create_dataset(self, message: CreateDataset) -> None:
        try:
            dataset = await self.env.create_dataset(message.split, message.base_dir, max_examples=message.max_examples)
            self.send(DatasetReady(id=message.id, examples=list(dataset)))
            return
        except MessageTooLarge as e:
            self.log.error("create_dataset({!r}): the dataset cannot be sent: {}", message.split, e)
            what = f"the {message.split} dataset ({e.size:,} bytes)"
            reply = RequestFailed(id=message.id, error=f"{too_large_error(what, e.limit)}; or load fewer examples",
                                  user_error=True)
        except UNSENDABLE as e:
            self.log.error("create_dataset({!r}): the dataset cannot be sent: {}", message.split, e)
            reply = RequestFailed(id=message.id, error=f"the dataset cannot be sent: {e}", user_error=True)
        except Exception as e:
            self.log.opt(exception=e).error("create_dataset({!r}) raised", message.split)
            reply = RequestFailed(id=message.id, error=f"{type(e).__name__}: {e}", user_error=isinstance(e, UserError))
        self.send(reply)


async def _reader(in_fd: int, limit: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=limit)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                       os.fdopen(in_fd, "rb", buffering=0))
    return reader


async def serve(cfg: WorkerConfig, in_fd: int, out_fd: int) -> int:
    limit = cfg.runtime.max_message_bytes
    reader, channel = await _reader(in_fd, limit), Channel(out_fd, limit)
    log = get_logger()
    try:
        env = instantiate(load_env_class(cfg.runtime.source), cfg.runtime.args)
    except Exception as e:
        error = str(e) if isinstance(e, UserError) else "".join(traceback.format_exception(e))
        log.error("cannot load {}: {}", cfg.runtime.source, error)
        channel.send(WorkerFailed(error=error))
        return 1
    await warm_up()
    worker = Worker(cfg, env, channel)
    watchdog = Watchdog(worker.timeouts, worker.send_blocked)
    watchdog.start(asyncio.get_running_loop())
    worker.send(WorkerReady(pid=os.getpid()))
    log.info("env worker {} ready: {} (pid {})", cfg.worker_id, cfg.runtime.source, os.getpid())
    tasks: set[asyncio.Task[None]] = set()
    while line := await read_line(reader):
        if isinstance(line, Overlong):  # the server checks what it sends: this is not one of its requests
            log.error("ignoring a message of {:,} bytes, over env.max_message_bytes ({:,})", line.size, limit)
            continue
        try:
            message = decode_to_worker(line)
        except ValueError as e:
            log.error("ignoring a malformed message: {}", e)
            continue
        task = asyncio.create_task(worker.handle(message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    log.info("env worker {} shutting down ({} groups in flight)", cfg.worker_id, len(tasks))
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    watchdog.stop()
    try:
        await env.aclose()
    finally:
        await aclose_pool()
    return 0


def main(argv: list[str]) -> int:
    cfg = WorkerConfig.model_validate_json(argv[1])
    in_fd, out_fd = _take_protocol_pipes()
    setup_logger(cfg.runtime.level, cfg.runtime.json_logging, sink=sys.stderr, process=f"env_worker_{cfg.worker_id}",
                 patcher=_tag_rollout)
    install_capture(cfg.runtime.level)
    capture_std_streams()
    return asyncio.run(serve(cfg, in_fd, out_fd))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
