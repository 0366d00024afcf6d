"""Catching env code that blocks an env worker's event loop, and where it is stuck.

A blocking call in a sync hook (`time.sleep`, a busy loop, a socket without a timeout) stops the
worker's event loop, so no `asyncio` timeout can fire. The watchdog thread sees the loop's
heartbeat stop. It then asks the loop's thread which rollouts it is running: a SIGUSR1 handler,
which Python runs between bytecodes of the blocked code, reads the context's rollout ids. Once the
loop has been blocked for longer than those rollouts' timeout, the watchdog reports them with the
thread's Python stack (`on_blocked`); the env server ends them as `timeout` and kills the worker.
Code that never returns to the interpreter (a C call holding the GIL) is left to the server's own
deadline.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from types import FrameType

from looprl.envs.logging import current_rollout_ids

OnBlocked = Callable[[list[str], float, str], None]
"""Called (from the watchdog thread) with the blocked rollouts, how long the loop is blocked, the stack."""

BEAT_S = 0.05
"""How often the loop beats, and the watchdog looks."""
PROBE_AFTER_S = 0.2
"""A loop silent this long is asked which rollouts it runs."""


class Watchdog:
    def __init__(self, timeouts: Mapping[str, float], on_blocked: OnBlocked) -> None:
        self.timeouts, self.on_blocked = timeouts, on_blocked
        self._tick = time.monotonic()
        self._blocked_ids: tuple[str, ...] | None = None
        self._probed = self._reported = False
        self._stop = threading.Event()
        self._main = threading.main_thread().ident

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start beating on `loop` (which runs in the main thread) and watching it."""
        signal.signal(signal.SIGUSR1, self._on_probe)
        self._beat(loop)
        threading.Thread(target=self._watch, name="looprl-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _beat(self, loop: asyncio.AbstractEventLoop) -> None:
        self._tick = time.monotonic()
        loop.call_later(BEAT_S, self._beat, loop)

    def _on_probe(self, signum: int, frame: FrameType | None) -> None:
        self._blocked_ids = current_rollout_ids()

    def _watch(self) -> None:
        assert self._main is not None
        while not self._stop.wait(BEAT_S):
            blocked_s = time.monotonic() - self._tick
            if blocked_s < PROBE_AFTER_S:
                self._blocked_ids, self._probed, self._reported = None, False, False
                continue
            if not self._probed:
                self._probed = True
                signal.pthread_kill(self._main, signal.SIGUSR1)
                continue
            ids = [r for r in self._blocked_ids or () if r in self.timeouts]
            if self._reported or not ids or blocked_s < min(self.timeouts[r] for r in ids):
                continue
            frame = sys._current_frames().get(self._main)
            stack = "".join(traceback.format_stack(frame)) if frame else ""
            self._reported = True
            self.on_blocked(ids, blocked_s, stack)
