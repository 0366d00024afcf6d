"""Process logging: one isolated loguru logger per process, configured once at the entry point.

    from looprl.utils.logger import setup_logger, get_logger

    logger = setup_logger("info")                      # at the process entry point
    get_logger().info("step {} done", step)            # anywhere else

The logger is a private `loguru.Logger` instance, not the global `loguru.logger`, so third-party
code that calls `loguru.logger.remove()` or adds sinks cannot change our output. `get_logger()`
initialises a default (INFO, text) logger when `setup_logger` has not run; `setup_logger` may be
called again to reconfigure; `reset_logger()` drops the logger (subprocesses, tests).

Text lines (coloured when the sink is a terminal):

    2025-01-01 12:00:00.123 | INFO     | looprl.commands.eval.run:97 | rollout=ab12cd | message

With `json_logging=True` every line is one JSON object with the fields in `JSON_FIELDS`.

Stdlib `logging` records (env code outside rollouts, httpx, transformers, uvicorn) are routed into
the logger at their own levels by a handler on the root logger; the root level follows `log_level`.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Callable
from datetime import UTC
from typing import Any, TextIO

from loguru._logger import Core, Logger

Record = dict[str, Any]
Patcher = Callable[[Record], None]

JSON_FIELDS = ("time", "level", "message", "logger", "function", "line", "process", "pid", "thread",
               "rollout", "exception", "extra")
"""Fields of a JSON log line. `time`: ISO 8601 UTC; `level`: DEBUG, INFO, ...; `logger`: the module
(or stdlib logger name); `process`: the process name (`setup_logger(process=...)`); `rollout`: the
rollout id(s) a record belongs to, comma-separated, or null; `exception`: the formatted traceback or
null; `extra`: any other values bound with `logger.bind(...)`."""

TEXT_FORMAT = ("<green>{time:YYYY-MM-DD HH:mm:ss.SSS}</green> | <level>{level: <8}</level> | "
               "<cyan>{extra[logger]}</cyan>:<cyan>{line}</cyan> | {extra[rollout_tag]}<level>{message}</level>")

QUIET_LOGGERS = ("httpx", "httpcore")
"""Stdlib loggers that log every HTTP request at INFO; kept at WARNING unless the level is DEBUG."""

_LOGGER: Logger | None = None


def _new_logger() -> Logger:
    return Logger(core=Core(), exception=None, depth=0, record=False, lazy=False, colors=False, raw=False,
                  capture=True, patchers=[], extra={})


def _prepare(process: str | None, patcher: Patcher | None) -> Patcher:
    def patch(record: Record) -> None:
        if patcher is not None:
            patcher(record)
        extra = record["extra"]
        extra.setdefault("logger", record["name"])
        extra.setdefault("process", process)
        rollout = extra.get("rollout")
        extra["rollout_tag"] = f"rollout={rollout} | " if rollout else ""
    return patch


def json_line(record: Record) -> str:
    """One record as a JSON object (the fields of `JSON_FIELDS`)."""
    extra = dict(record["extra"])
    exception = record["exception"]
    payload = {
        "time": record["time"].astimezone(UTC).isoformat(),
        "level": record["level"].name,
        "message": record["message"],
        "logger": extra.pop("logger", record["name"]),
        "function": record["function"],
        "line": record["line"],
        "process": extra.pop("process", None),
        "pid": record["process"].id,
        "thread": record["thread"].name,
        "rollout": extra.pop("rollout", None) or None,
        "exception": "".join(_format_exception(exception)) if exception else None,
    }
    extra.pop("rollout_tag", None)
    payload["extra"] = {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v)
                        for k, v in extra.items()}
    return json.dumps(payload, ensure_ascii=False)


def _format_exception(exception: Any) -> list[str]:
    return traceback.format_exception(exception.type, exception.value, exception.traceback)


def _json_sink(stream: TextIO) -> Callable[[Any], None]:
    def write(message: Any) -> None:
        stream.write(json_line(message.record) + "\n")
        stream.flush()
    return write


def make_logger(log_level: str | int = "INFO", json_logging: bool = False, *, sink: TextIO | None = None,
                process: str | None = None, patcher: Patcher | None = None) -> Logger:
    """A new isolated logger writing to `sink` (default: stdout). `setup_logger` installs one globally."""
    stream = sink if sink is not None else sys.stdout
    level = log_level.upper() if isinstance(log_level, str) else log_level
    logger = _new_logger()
    logger.configure(patcher=_prepare(process, patcher))
    if json_logging:
        logger.add(_json_sink(stream), level=level, format="{message}", backtrace=False, diagnose=False)
    else:
        colorize = bool(getattr(stream, "isatty", lambda: False)())
        logger.add(stream, level=level, format=TEXT_FORMAT, colorize=colorize, backtrace=False, diagnose=False)
    return logger


def record_message(record: logging.LogRecord) -> str:
    """`record.getMessage()`; when the arguments do not fit the format (`logger.info("%d", "x")`), the
    format and arguments as they are, with the error: a logging call never raises into the code that made it."""
    try:
        return record.getMessage()
    except Exception as e:
        return f"{record.msg!r} % {record.args!r} (logging error: {type(e).__name__}: {e})"


class InterceptHandler(logging.Handler):
    """Routes stdlib `logging` records into the process logger at their own level."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = get_logger()
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        try:
            logger.patch(lambda r: r.update(function=record.funcName, line=record.lineno)) \
                .bind(logger=record.name) \
                .opt(exception=record.exc_info or None) \
                .log(level, record_message(record))
        except Exception:  # like every stdlib handler: report on stderr, never raise into the logging call
            self.handleError(record)


def _route_stdlib(log_level: str | int) -> None:
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, InterceptHandler)]
    root.addHandler(InterceptHandler(level=logging.NOTSET))
    logging.captureWarnings(True)  # `warnings.warn` (FutureWarning, ...) as log records, not raw stderr
    level = logging.getLevelName(log_level.upper()) if isinstance(log_level, str) else log_level
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level <= logging.DEBUG else logging.WARNING)


def setup_logger(log_level: str | int = "INFO", json_logging: bool = False, *, sink: TextIO | None = None,
                 process: str | None = None, patcher: Patcher | None = None) -> Logger:
    """Configure (or reconfigure) this process's logger and route stdlib `logging` into it.

    `sink`: the stream to write (default stdout; the launcher redirects it to `logs/<process>.log`).
    `process`: the process name put on JSON lines. `patcher(record)` may add `record["extra"]`
    values to every record (env workers add the `rollout` id).
    """
    global _LOGGER
    if _LOGGER is not None:
        _LOGGER.remove()
    _LOGGER = make_logger(log_level, json_logging, sink=sink, process=process, patcher=patcher)
    _route_stdlib(log_level)
    return _LOGGER


def get_logger() -> Logger:
    """The process logger; a default INFO text logger on stdout when `setup_logger` has not run."""
    if _LOGGER is None:
        return setup_logger()
    return _LOGGER


def reset_logger() -> None:
    """Forget the process logger (its sinks are removed); the next `get_logger()` builds a default."""
    global _LOGGER
    if _LOGGER is not None:
        _LOGGER.remove()
    _LOGGER = None
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, InterceptHandler)]


__all__ = ["JSON_FIELDS", "get_logger", "json_line", "make_logger", "reset_logger", "setup_logger"]
