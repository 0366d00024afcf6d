"""What `looprl rl` prints while a run goes: the engine coming up, a line per step, warnings, a summary.

    step 3/16 | reward 0.412 | eval 0.500 | 11.8s/step | gen 250 tok/s train 900 tok/s | ETA 2m21s
    warning: orchestrator.reward_weights names 'typo', but no scored rollout of step 1 emitted it ...
    looprl rl: done in 3m12s, 16 steps: final reward 0.812, eval reward 0.750

Read-only, and no channel of its own: each `poll()` (the supervisor's watch loop calls it) opens the
run store read-only, reads the `steps` rows written since the launch, and closes it again (a reader
left open would keep the store's `-wal`/`-shm` files alive, see `store.writer`); then it reads what
`logs/orchestrator.log` gained since the last poll and passes on each WARNING record once. On a
terminal a progress bar with the ETA stays under the lines; piped, only the lines are printed. A
warning's control characters are shown escaped (`looprl.utils.terminal`): it may quote env text.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from looprl.errors import UserError
from looprl.paths import log_path
from looprl.store.reader import RunStoreReader
from looprl.utils.terminal import printable


class RunProgress:
    def __init__(self, run_dir: Path, max_steps: int, first_step: int = 1, out: TextIO | None = None) -> None:
        self.run_dir, self.max_steps, self.first_step = Path(run_dir), max_steps, first_step
        self.console = Console(file=out or sys.stdout, highlight=False, soft_wrap=True)
        self.started = time.time()
        self.last: dict[str, Any] = {}
        self.step_times: list[float] = []
        self.previous_at = self.started
        self.warned: set[str] = set()
        self.log = log_path(self.run_dir, "orchestrator")
        self.log_offset = self.log.stat().st_size if self.log.exists() else 0  # a resumed run appends
        self.bar: Progress | None = None

    def say(self, line: str) -> None:
        self.console.print(line, markup=False)

    def follow(self) -> None:
        """Start following the steps (from now on: the engine is up, the processes start)."""
        self.previous_at = time.time()
        if self.console.is_terminal:
            self.bar = Progress(TextColumn("step"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("ETA {task.fields[eta]}"), console=self.console, transient=True)
            self.bar.add_task("steps", total=self.max_steps, completed=self.first_step - 1, eta="-")
            self.bar.start()

    def poll(self) -> None:
        for row in self._new_steps():
            self.step_times.append(row["time"] - self.previous_at)
            self.previous_at, self.last = row["time"], row
            self.say(self.step_line(row))
            if self.bar is not None:
                self.bar.update(self.bar.task_ids[0], completed=row["step"], eta=self.eta())
        for message in self._new_warnings():
            if message not in self.warned:
                self.warned.add(message)
                self.say(f"warning: {printable(message)}")  # it may quote an env's error or output

    def mean_step_s(self) -> float:
        """Seconds per step so far. Step rows are stored as the trainer's reports arrive, sometimes two at
        once (groups carried over from the previous step), so the gap before one row says little."""
        return sum(self.step_times) / len(self.step_times)

    def eta(self) -> str:
        remaining = self.max_steps - self.last.get("step", self.first_step - 1)
        return duration(remaining * self.mean_step_s()) if self.step_times else "-"

    def step_line(self, m: dict[str, Any]) -> str:
        parts = [f"step {m['step']}/{self.max_steps}", f"reward {m.get('reward', float('nan')):.3f}"]
        if "eval/reward" in m:
            parts.append(f"eval {m['eval/reward']:.3f}")
        parts.append(f"{self.mean_step_s():.1f}s/step")
        parts.append(f"gen {m.get('gen_tokens_per_s', 0):.0f} tok/s "
                     f"train {m.get('train/train_tokens_per_s', 0):.0f} tok/s")
        parts.append(f"ETA {self.eta()}")
        return " | ".join(parts)

    def close(self, completed: bool) -> None:
        """Read the last steps, stop the bar; for a completed run print the summary line."""
        self.poll()
        if self.bar is not None:
            self.bar.stop()
        if completed:
            m = self.last
            summary = [f"final reward {m['reward']:.3f}"] if "reward" in m else []
            summary += [f"eval reward {m['eval/reward']:.3f}"] if "eval/reward" in m else []
            self.say(f"looprl rl: done in {duration(time.time() - self.started)}, {m.get('step', 0)} steps"
                     + (": " + ", ".join(summary) if summary else ""))

    def _new_steps(self) -> list[dict[str, Any]]:
        """Step rows written since the launch (earlier rows, e.g. of a resumed run, are not news)."""
        seen = self.last.get("step", self.first_step - 1)
        try:
            reader = RunStoreReader(self.run_dir)
        except UserError:  # the orchestrator has not created the store yet
            return []
        try:
            rows = reader.steps(reader.run().run_id)
        except (UserError, sqlite3.Error):  # no run row or tables yet
            return []
        finally:
            reader.close()
        return [r for r in rows if r["step"] > seen and r["time"] >= self.started]

    def _new_warnings(self) -> list[str]:
        if not self.log.exists():
            return []
        with open(self.log, "rb") as f:
            f.seek(self.log_offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next poll
        self.log_offset += len(complete)
        return [m for line in complete.decode(errors="replace").splitlines() if (m := warning_message(line))]


def warning_message(line: str) -> str | None:
    """The message of a WARNING record in a process log line (text or JSON), else None."""
    if line.startswith("{"):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            return None
        return record.get("message") if record.get("level") == "WARNING" else None
    parts = line.split(" | ", 3)  # time | level | logger:line | message
    return parts[3] if len(parts) == 4 and parts[1].strip() == "WARNING" else None


def duration(seconds: float) -> str:
    """`42s`, `3m12s`, `1h05m`."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
