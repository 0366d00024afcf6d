"""`print()` and stderr writes from env code, as log records of the rollout that wrote them.

The env worker replaces `sys.stdout` and `sys.stderr` with a `RolloutStream` each. A write made
while a rollout runs (in its hooks, the tasks they spawn, `asyncio.to_thread`) is cut into lines,
and each non-blank line becomes a record of logger `stdout` (INFO) or `stderr` (WARNING), captured for that
rollout like any record and written to the worker log. Writes outside rollouts go to the stream it
replaced (the worker log). The protocol never uses these streams (see `looprl.envserver.protocol`).
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from typing import TextIO

from looprl.envs.logging import current_rollout_ids


class RolloutStream(io.TextIOBase):
    def __init__(self, name: str, level: int, fallback: TextIO) -> None:
        self.name, self.level, self.fallback = name, level, fallback
        self._logger = logging.getLogger(name)
        self._partial: dict[tuple[int, tuple[str, ...]], str] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fallback.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.fallback.encoding

    def write(self, text: str) -> int:
        ids = current_rollout_ids()
        if not ids or getattr(self._local, "busy", False):  # outside rollouts, or logging writing back to us
            return self.fallback.write(text)
        key = (threading.get_ident(), ids)
        with self._lock:
            *lines, rest = (self._partial.pop(key, "") + text).split("\n")
            if rest:
                self._partial[key] = rest
        self._emit(lines)
        return len(text)

    def flush(self) -> None:
        ids = current_rollout_ids()
        if ids:
            with self._lock:
                rest = self._partial.pop((threading.get_ident(), ids), None)
            self._emit([rest] if rest else [])
        self.fallback.flush()

    def _emit(self, lines: list[str]) -> None:
        """Log each non-blank line, naming the caller of `write`/`flush` (the `print`) as its source."""
        self._local.busy = True
        try:
            for line in lines:
                if line.strip():
                    self._logger.log(self.level, line.rstrip("\r"), stacklevel=3)
        finally:
            self._local.busy = False


def capture_std_streams() -> None:
    """Route `print()` and stderr writes made inside rollouts to their logs (the env worker calls this)."""
    sys.stdout = RolloutStream("stdout", logging.INFO, sys.stdout)
    sys.stderr = RolloutStream("stderr", logging.WARNING, sys.stderr)
