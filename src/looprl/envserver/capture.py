"""Per-rollout log capture: stdlib `logging` records kept with the rollout that emitted them.

The runtime opens a buffer per running rollout (`open_capture`) and installs `RolloutLogHandler` on
the root logger; the handler copies each record into the buffers of the rollouts the record is
attributed to (`looprl.envs.logging`, the context variables env code's helpers narrow).

Capture is bounded per rollout (`looprl.config.LogLimits`): records past `max_records` are dropped and counted,
messages longer than `max_message_chars` are cut and counted. Appending to a buffer never blocks.
A buffer with a `sink` (the env worker's) hands each kept record on as it is emitted instead of
keeping it, so the records of a rollout outlive a worker that dies mid-rollout.

`failure_record` is the ERROR record (logger `looprl.failure`) that every operational failure adds
to the logs of the rollouts it ended, with the error text (traceback, stuck stack) as its exception.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from looprl.config.env_runtime import LogLimits
from looprl.envs.logging import current_rollout_ids
from looprl.envs.types import LogRecordData
from looprl.utils.logger import record_message

NOISY_LOGGERS = ("httpx", "httpcore", "httpx2", "httpcore2", "aiohttp", "openai", "urllib3", "asyncio", "filelock",
                 "hpack", "multipart", "transformers", "datasets", "fsspec", "uvicorn", "aiosqlite", "PIL",
                 "matplotlib")
"""Third-party loggers kept at WARNING in env processes unless the user asks for them."""


RecordSink = Callable[[str, LogRecordData], None]
"""Takes `(rollout_id, record)` for each record a buffer keeps."""

FAILURE_LOGGER = "looprl.failure"


def failure_record(reason: str, error: str | None, level: int = logging.ERROR) -> LogRecordData:
    """The record of an operational failure: its reason and first line; the rest of the error (a traceback,
    a stuck stack) as exception. Without a reason (a failure that did not end the rollout), just the error."""
    first, _, rest = (error or "").partition("\n")
    message = first if not reason else f"rollout ended {reason}: {first}" if first else f"rollout ended {reason}"
    return LogRecordData(time=time.time(), level=level, level_name=logging.getLevelName(level),
                         logger=FAILURE_LOGGER, message=message, exception=rest.strip() or None)


@dataclass
class LogBuffer:
    """The records captured for one rollout so far, with what the limits cut."""

    rollout_id: str
    limits: LogLimits = field(default_factory=LogLimits)
    sink: RecordSink | None = None
    records: list[LogRecordData] = field(default_factory=list)
    kept: int = 0
    dropped: int = 0
    truncated: int = 0

    def add(self, record: LogRecordData, *, bounded: bool = True) -> None:
        """Keep `record` within the limits (`bounded=False`: past `max_records` too, for failure records)."""
        if bounded and self.kept >= self.limits.max_records:
            self.dropped += 1
            return
        cut = False
        if len(record.message) > self.limits.max_message_chars:
            message = record.message[: self.limits.max_message_chars] + " …[truncated]"
            record = record.model_copy(update={"message": message})
            cut = True
        if record.exception and len(record.exception) > self.limits.max_exception_chars:
            exception = "…[truncated]\n" + record.exception[-self.limits.max_exception_chars:]
            record = record.model_copy(update={"exception": exception})
            cut = True
        self.truncated += cut
        self.kept += 1
        if self.sink is not None:
            self.sink(self.rollout_id, record)
        else:
            self.records.append(record)


_live: dict[str, LogBuffer] = {}
_live_lock = threading.Lock()


def open_capture(rollout_id: str, limits: LogLimits | None = None, sink: RecordSink | None = None) -> LogBuffer:
    """Register a buffer for a starting rollout."""
    buffer = LogBuffer(rollout_id, limits or LogLimits(), sink)
    with _live_lock:
        _live[rollout_id] = buffer
    return buffer


def close_capture(rollout_id: str) -> None:
    with _live_lock:
        _live.pop(rollout_id, None)


class RolloutLogHandler(logging.Handler):
    """Copies each record emitted inside an attribution context into those rollouts' buffers."""

    _formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        rollout_ids = current_rollout_ids()
        if not rollout_ids:
            return
        with _live_lock:
            targets = [_live[r] for r in rollout_ids if r in _live]
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
                message=record_message(record), pathname=record.pathname, lineno=record.lineno,
                func=record.funcName, exception=exception,
            )
        except Exception:  # never raise into the logging call
            self.handleError(record)
            return
        for buffer in targets:
            buffer.add(data)


_handler: RolloutLogHandler | None = None


def install_capture(level: str | int = "INFO") -> RolloutLogHandler:
    """Install the capture handler on the root logger (once) and set env log verbosity.

    `level` applies to env code (the root logger); the third-party loggers in `NOISY_LOGGERS` stay at
    WARNING.
    """
    global _handler
    root = logging.getLogger()
    if _handler is None:
        _handler = RolloutLogHandler(level=logging.NOTSET)
    if _handler not in root.handlers:
        root.addHandler(_handler)
    root.setLevel(level if isinstance(level, int) else level.upper())
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return _handler
