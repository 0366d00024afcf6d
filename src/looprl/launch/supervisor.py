"""Child processes of `looprl rl`: started with their output in `logs/<name>.log`, watched together.

`watch` returns when every child has exited cleanly, or as soon as one fails, and reports which one
failed (calling `tick`, e.g. the progress display, every poll meanwhile), so the launcher can stop the
others (`stop_all`: SIGTERM, then SIGKILL) and print the tail of its log. Children also get SIGTERM
when the launcher itself dies (Linux `PR_SET_PDEATHSIG`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from looprl.utils.terminal import printable

POLL_S = 0.5


@dataclass
class Child:
    name: str
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Child:
        """Start `argv` with this environment plus `env` (e.g. its `CUDA_VISIBLE_DEVICES`)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (the child writes to it until stop() closes it)
        # Progress bars (tqdm, as transformers draws them) are noise in a log file and would break
        # the one-JSON-object-per-line promise of `log.json_logging`.
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
               **(env or {})}
        self.process = subprocess.Popen(list(argv), stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent)
        return self

    def stop(self, grace_s: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


class Watched(Protocol):
    """What `watch` reads: a `Child`, or a process some other object owns (the inference engine)."""

    name: str
    log_path: Path

    @property
    def process(self) -> subprocess.Popen[bytes] | None: ...


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if the launcher dies without cleaning up (e.g. SIGKILL)."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def watch(children: Sequence[Watched], until_done: Sequence[Watched],
          tick: Callable[[], None] = lambda: None) -> Watched | None:
    """Wait until every child in `until_done` exits with status 0 (returns None), or any child fails
    or exits early (returns it). The caller stops the others."""
    while True:
        tick()
        for child in children:
            assert child.process is not None
            status = child.process.poll()
            if status is not None and (status != 0 or child not in until_done):
                return child
        if all(c.process is not None and c.process.poll() == 0 for c in until_done):
            return None
        time.sleep(POLL_S)


def stop_all(children: Sequence[Child]) -> None:
    for child in reversed(children):
        child.stop()


def tail(path: Path, lines: int = 30) -> str:
    """A log's last lines, for the terminal: control characters escaped (an env's output may be among them)."""
    try:
        return printable("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
    except OSError:
        return "(no log)"
