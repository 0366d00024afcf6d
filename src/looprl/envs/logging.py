"""Per-rollout log capture: stdlib `logging` records attributed to the rollout that emitted them.

Env code logs with plain `logging.getLogger(__name__)`. While a rollout runs, the runtime sets a
context variable naming the rollout's log buffer; a handler on the root logger copies each record
into the buffers named by the current context. Context variables follow `asyncio` tasks and
`asyncio.to_thread`, so records from spawned tasks and worker threads land on the right rollout,
and hundreds of interleaved rollouts never leak into each other.

Inside `compute_group_rewards` the context names every rollout of the group; narrow it with
`rollout_context(rollout_id)` (a log-attribution helper, not the `BaseEnv.rollout_context` hook):

    from looprl.envs.logging import rollout_context

    with rollout_context(r.rollout_id):
        logger.info("scoring individual rollout")   # attributed to this rollout only

Capture is bounded per rollout (`LogLimits`): records past `max_records` are dropped and counted,
messages longer than `max_message_chars` are cut and counted. Appending to a buffer never blocks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from looprl.envs.types import LogRecordData

NOISY_LOGGERS = ("httpx", "httpcore", "openai", "urllib3", "asyncio", "filelock", "hpack", "multipart",
                 "transformers", "datasets", "fsspec", "uvicorn", "aiosqlite", "PIL", "matplotlib")
"""Third-party loggers kept at WARNING in env processes unless the user asks for them."""


@dataclass(frozen=True)
class LogLimits:
    """Per-rollout bounds on captured logs."""

    max_records: int = 1000
    max_message_chars: int = 4000
    max_exception_chars: int = 20000


@dataclass
class LogBuffer:
    """The records captured for one rollout so far, with what the limits cut."""

    rollout_id: str
    limits: LogLimits = field(default_factory=LogLimits)
    records: list[LogRecordData] = field(default_factory=list)
    dropped: int = 0
    truncated: int = 0

    def add(self, record: LogRecordData) -> None:
        if len(self.records) >= self.limits.max_records:
            self.dropped += 1
            return
        cut = False
        if len(record.message) > self.limits.max_message_chars:
            record = record.model_copy(update={"message": record.message[: self.limits.max_message_chars] + " …[truncated]"})
            cut = True
        if record.exception and len(record.exception) > self.limits.max_exception_chars:
            record = record.model_copy(update={"exception": "…[truncated]\n" + record.exception[-self.limits.max_exception_chars:]})
            cut = True
        self.truncated += cut
        self.records.append(record)


_targets: ContextVar[tuple[LogBuffer, ...]] = ContextVar("looprl_log_targets", default=())
_live: dict[str, LogBuffer] = {}
_live_lock = threading.Lock()


def open_capture(rollout_id: str, limits: LogLimits | None = None) -> LogBuffer:
    """Register a buffer for a starting rollout (the runtime calls this; env code never does)."""
    buffer = LogBuffer(rollout_id, limits or LogLimits())
    with _live_lock:
        _live[rollout_id] = buffer
    return buffer


def close_capture(rollout_id: str) -> None:
    with _live_lock:
        _live.pop(rollout_id, None)


@contextmanager
def attribute_to(buffers: Sequence[LogBuffer]) -> Iterator[None]:
    """Attribute records emitted inside the block (and tasks/threads it starts) to these buffers."""
    token = _targets.set(tuple(buffers))
    try:
        yield
    finally:
        _targets.reset(token)


def _live_buffer(rollout_id: str) -> LogBuffer:
    with _live_lock:
        buffer = _live.get(rollout_id)
    if buffer is None:
        raise ValueError(f"rollout_context({rollout_id!r}): no rollout with this id is running in this process")
    return buffer


def live_buffers(rollout_ids: Sequence[str]) -> dict[str, LogBuffer]:
    """The capture buffers of those rollouts that are running in this process."""
    with _live_lock:
        return {r: _live[r] for r in rollout_ids if r in _live}


def current_rollout_ids() -> tuple[str, ...]:
    """The rollouts that a record emitted here would be attributed to (empty outside rollouts)."""
    return tuple(buffer.rollout_id for buffer in _targets.get())


@contextmanager
def rollout_context(rollout_id: str) -> Iterator[None]:
    """Attribute records inside the block to this one rollout only (e.g. in `compute_group_rewards`)."""
    with attribute_to([_live_buffer(rollout_id)]):
        yield


@contextmanager
def group_context(rollout_ids: Sequence[str]) -> Iterator[None]:
    """Attribute records inside the block to each of these rollouts."""
    with attribute_to([_live_buffer(r) for r in rollout_ids]):
        yield


class RolloutLogHandler(logging.Handler):
    """Copies each record emitted inside a capture context into that context's rollout buffers."""

    _formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        targets = _targets.get()
        if not targets:
            return
        try:
            exception = None
            if record.exc_info:
                exception = self._formatter.formatException(record.exc_info)
            elif record.exc_text:
                exception = record.exc_text
            if record.stack_info:
                exception = (exception + "\n" if exception else "") + record.stack_info
            data = LogRecordData.model_construct(
                time=record.created, level=record.levelno, level_name=record.levelname, logger=record.name,
                message=record.getMessage(), pathname=record.pathname, lineno=record.lineno,
                func=record.funcName, exception=exception,
            )
        except Exception:  # a bad format string in user code must not break the rollout
            self.handleError(record)
            return
        for buffer in targets:
            buffer.add(data)


_handler: RolloutLogHandler | None = None


def install_capture(level: str | int = "INFO", verbose_loggers: Sequence[str] = ()) -> RolloutLogHandler:
    """Install the capture handler on the root logger (once) and set env log verbosity.

    `level` applies to env code (the root logger); the third-party loggers in `NOISY_LOGGERS` stay at
    WARNING unless named in `verbose_loggers`.
    """
    global _handler
    root = logging.getLogger()
    if _handler is None:
        _handler = RolloutLogHandler(level=logging.NOTSET)
    if _handler not in root.handlers:
        root.addHandler(_handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    for name in NOISY_LOGGERS:
        if name not in verbose_loggers:
            logging.getLogger(name).setLevel(logging.WARNING)
    return _handler
