"""`orchestrator.max_consecutive_failures`: halt a run whose rollouts keep failing.

When the env's infrastructure is down (a sandbox service, a database, a tool server) every rollout
ends in an operational failure, and a run that goes on trains on nothing while it hammers the broken
service. The orchestrator feeds each step's rollouts (train and eval) to a `FailureStreak` in the
order they finished, once they are stored; a scored rollout ends the streak. When the streak reaches
the limit the run stops with `TooManyFailures`, whose message names the last failures and where their
errors and tracebacks are (the run store: `looprl logs`, the inspector; the env workers' log files).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from looprl.envs.types import RolloutResult
from looprl.paths import env_log_dir

NAMED = 3
"""Failures the halting message names."""


class TooManyFailures(RuntimeError):
    """The run stopped: `max_consecutive_failures` rollouts in a row failed."""


class FailureStreak:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.streak: list[RolloutResult] = []
        """The failures since the last scored rollout (the last `NAMED` of them kept)."""
        self.count = 0

    def observe(self, results: Iterable[RolloutResult]) -> bool:
        """Count `results` (in the order they finished); whether the streak reached the limit."""
        for r in sorted(results, key=lambda r: r.finished_at):
            if r.scored:
                self.streak, self.count = [], 0
            else:
                self.streak, self.count = [*self.streak[-(NAMED - 1):], r], self.count + 1
        return self.limit is not None and self.count >= self.limit

    def check(self, results: Iterable[RolloutResult], run_dir: Path, env_name: str) -> None:
        """Count `results`; raise `TooManyFailures` once the streak reaches the limit."""
        if self.observe(results):
            raise self.error(run_dir, env_name)

    def error(self, run_dir: Path, env_name: str) -> TooManyFailures:
        last = "; ".join(f"{r.rollout_id} ({r.split}, example {r.example_id}) {r.termination_reason}: "
                         f"{last_line(r.error)}" for r in reversed(self.streak))
        newest = self.streak[-1].rollout_id
        return TooManyFailures(
            f"orchestrator.max_consecutive_failures: {self.count} rollouts in a row failed, so the run stops. The "
            f"last: {last}. Their errors and tracebacks are in the run store: `looprl rollouts {run_dir} --rollout "
            f"{newest}` (the error), `looprl logs {run_dir} --rollout {newest}` (its log records), or the inspector "
            f"(`looprl inspect {run_dir}`, filter by termination reason); the env workers' own logs are in "
            f"{env_log_dir(run_dir, 'train', env_name)}/ (and eval/). Fix the cause, then `looprl rl ... --resume` "
            "(or raise the limit, null: never halt).")


def last_line(error: str | None, width: int = 200) -> str:
    """The last line of an error text (a traceback's ends with the exception), cut to `width`."""
    lines = (error or "").strip().splitlines()
    return lines[-1][:width] if lines else "no error text"
