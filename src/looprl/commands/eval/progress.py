"""Live progress of rollouts: a bar on a terminal, plain lines every few seconds when piped.

Results arrive a group at a time (the env server settles a group's rollouts together), so the
count moves by the group's size and the description carries the running mean reward of the scored
rollouts so far: `rollouts · mean reward 0.412 ━━━━━━━━╺━━━ 8/12 0:00:07`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from types import TracebackType
from typing import TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RolloutProgress:
    """`with RolloutProgress(total) as p: p.advance(rewards_of_a_group)`; `None` rewards are failed rollouts."""

    def __init__(self, total: int, stream: TextIO | None = None, interval_s: float = 5.0) -> None:
        self.total, self.done = total, 0
        self._rewards: list[float] = []
        self.stream = stream or sys.stdout
        self.interval_s = interval_s
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn()) if self.stream.isatty() else None
        self._task = self._bar.add_task(self.description(), total=total) if self._bar else None
        self._started = self._last_line = time.monotonic()

    def description(self) -> str:
        rewards = self._rewards
        return "rollouts" + (f" · mean reward {sum(rewards) / len(rewards):.3f}" if rewards else "")

    def advance(self, rewards: Iterable[float | None]) -> None:
        rewards = list(rewards)
        self.done += len(rewards)
        self._rewards += [r for r in rewards if r is not None]
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, description=self.description())
        elif time.monotonic() - self._last_line >= self.interval_s or self.done == self.total:
            self._line()

    def _line(self) -> None:
        self._last_line = time.monotonic()
        print(f"{self.description()}: {self.done}/{self.total} done, {self._last_line - self._started:.0f}s",
              file=self.stream, flush=True)

    def __enter__(self) -> RolloutProgress:
        if self._bar is not None:
            self._bar.start()
        else:
            self._line()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
