"""The run store's only writer.

Creates `looprl.db` (WAL, `busy_timeout`) or migrates an older one (`migrations.upgrade`), and
appends runs, steps, rollouts with their model calls and log records (and, once the trainer reports
a step, its logprobs on the calls it trained), and keeps the prompt ledger (`looprl.store.ledger`);
a rollout's columns are
`schema.ROLLOUT_COLUMNS`, read from the `RolloutRecord` attributes of the same names. Each
`write_rollouts` call is one transaction, so readers never see a rollout without its logs. Calls are
synchronous and short; async callers run them with `asyncio.to_thread` (the internal lock makes that
safe from any thread).

`close()` leaves `looprl.db` alone on disk: it checkpoints the WAL into the database and switches it
back to rollback-journal mode, which deletes `-wal` and `-shm`. That matters because read-only readers
(`looprl metrics`, the inspector, `looprl rl`'s progress) can never delete those files, and on a
WAL-mode database they create them. The switch needs every other connection closed; a reader open
through the whole close (an inspector) leaves the files, empty, until a writer next closes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from looprl.paths import db_path
from looprl.store.ledger import LedgerEntry
from looprl.store.migrations import upgrade
from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.schema import ROLLOUT_COLUMNS

_INSERT_ROLLOUT = (f"INSERT INTO rollouts ({', '.join(c.name for c in ROLLOUT_COLUMNS)}) "
                   f"VALUES ({', '.join('?' * len(ROLLOUT_COLUMNS))})")

SETTLE_S = 2.0
"""How long `close()` retries leaving WAL mode while a reader has the database open."""


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _json_or_null(value: Any) -> str | None:
    return None if value is None else _json(value)


class RunStoreWriter:
    """Appends to `{run_dir}/looprl.db`, creating it (and the directory) when missing."""

    def __init__(self, run_dir: Path) -> None:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = db_path(run_dir)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        upgrade(self._conn, self.path)

    def start_run(self, run: RunInfo) -> None:
        """Insert the run row, or mark an existing one (a resumed run) as running again."""
        with self._lock:
            self._conn.execute(
                "INSERT INTO runs (run_id, kind, env, env_name, model, config, status, created_at, summary) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(run_id) DO UPDATE SET status='running', finished_at=NULL, config=excluded.config",
                (run.run_id, run.kind, run.env, run.env_name, run.model, _json(run.config), "running",
                 run.created_at, _json(run.summary)),
            )

    def finish_run(self, run_id: str, status: str, summary: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE runs SET status=?, finished_at=?, summary=? WHERE run_id=?",
                (status, time.time(), _json(summary), run_id),
            )

    def write_step(self, run_id: str, step: int, metrics: dict[str, Any]) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO steps (run_id, step, time, metrics) VALUES (?, ?, ?, ?)",
                (run_id, step, time.time(), _json(metrics)),
            )

    def delete_steps_after(self, run_id: str, step: int) -> None:
        """Forget everything recorded after `step` (used on resume, so no step is duplicated), and mark
        the ledger's draws settled after it or never settled as undone by this resume (they stay)."""
        with self._lock, self._transaction():
            self._conn.execute("UPDATE ledger SET undone_at=? WHERE run_id=? AND undone_at IS NULL "
                               "AND (step IS NULL OR step>?)", (step, run_id, step))
            ids = [r[0] for r in self._conn.execute(
                "SELECT rollout_id FROM rollouts WHERE run_id=? AND step>?", (run_id, step))]
            for table in ("model_calls", "rollout_logs", "rollout_traces"):
                self._conn.executemany(f"DELETE FROM {table} WHERE rollout_id=?", [(i,) for i in ids])
            self._conn.execute("DELETE FROM rollouts WHERE run_id=? AND step>?", (run_id, step))
            self._conn.execute("DELETE FROM steps WHERE run_id=? AND step>?", (run_id, step))

    def write_rollouts(self, rollouts: Iterable[RolloutRecord]) -> None:
        """Append finished rollouts with their model calls and log records, in one transaction."""
        with self._lock, self._transaction():
            for r in rollouts:
                self._insert_rollout(r)

    def mark_zero_filled(self, rollouts: Iterable[RolloutRecord]) -> None:
        """Store the `zero_filled` names of rollouts already written (a batch known only once complete)."""
        with self._lock, self._transaction():
            self._conn.executemany("UPDATE rollouts SET zero_filled=? WHERE rollout_id=?",
                                   [(_json(r.zero_filled), r.rollout_id) for r in rollouts])

    def write_trainer_logprobs(self, calls: Iterable[tuple[str, int, list[float]]]) -> None:
        """Store `(rollout_id, call idx, logprobs)`: the trainer's logprob of each of the call's completion
        tokens (its report for a step), in one transaction."""
        with self._lock, self._transaction():
            self._conn.executemany("UPDATE model_calls SET trainer_logprobs=? WHERE rollout_id=? AND idx=?",
                                   [(_json(values), rollout_id, idx) for rollout_id, idx, values in calls])

    def record_draws(self, run_id: str, entries: Iterable[LedgerEntry]) -> None:
        """Add draws to the ledger (as they start: `in_flight`)."""
        with self._lock, self._transaction():
            self._conn.executemany(
                "INSERT INTO ledger (run_id, group_id, epoch, position, example_id, epoch_size, drawn_at, outcome, "
                "step, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, e.group_id, e.epoch, e.position, e.example_id, e.epoch_size, e.drawn_at, e.outcome,
                  e.step, e.reason) for e in entries])

    def settle_draws(self, run_id: str, outcomes: Iterable[tuple[str, str, int | None, str | None]]) -> None:
        """Record `(group_id, outcome, step, reason)` for draws of the ledger, in one transaction that is on
        disk when this returns: the WAL is synced at its commit (`synchronous=FULL` for it alone), and with it
        every earlier commit, so a checkpoint written after it never outlives the outcomes it implies, even
        across a power loss (the other commits, `synchronous=NORMAL`, survive a crash of the process only)."""
        with self._lock:
            self._conn.execute("PRAGMA synchronous=FULL")
            try:
                with self._transaction():
                    self._conn.executemany(
                        "UPDATE ledger SET outcome=?, step=?, reason=? WHERE run_id=? AND group_id=?",
                        [(outcome, step, reason, run_id, group_id) for group_id, outcome, step, reason in outcomes])
            finally:
                self._conn.execute("PRAGMA synchronous=NORMAL")

    def cancel_draws(self, run_id: str, reason: str) -> None:
        """Mark the draws still in flight as `cancelled` (the run ended or stopped while they generated)."""
        with self._lock, self._transaction():
            self._conn.execute("UPDATE ledger SET outcome='cancelled', reason=? WHERE run_id=? AND "
                               "outcome='in_flight' AND undone_at IS NULL", (reason, run_id))

    def _insert_rollout(self, r: RolloutRecord) -> None:
        self._conn.execute(_INSERT_ROLLOUT, [_json(getattr(r, c.name)) if c.json else getattr(r, c.name)
                                             for c in ROLLOUT_COLUMNS])
        self._conn.executemany(
            "INSERT INTO model_calls (run_id, rollout_id, idx, started_at, latency_s, status, finish_reason, "
            "prompt_tokens, completion_tokens, prompt_token_ids, completion_token_ids, completion_logprobs, error, "
            "trainer_logprobs, completion_policy_versions) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r.run_id, r.rollout_id, c.idx, c.started_at, c.latency_s, c.status, c.finish_reason,
              c.prompt_tokens, c.completion_tokens, _json_or_null(c.prompt_token_ids),
              _json_or_null(c.completion_token_ids), _json_or_null(c.completion_logprobs), c.error,
              _json_or_null(c.trainer_logprobs), _json_or_null(c.completion_policy_versions))
             for c in r.model_calls],
        )
        self._conn.executemany(
            "INSERT INTO rollout_logs (run_id, rollout_id, time, level, level_name, logger, message, "
            "pathname, lineno, func, exception) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(r.run_id, r.rollout_id, rec.time, rec.level, rec.level_name, rec.logger, rec.message,
              rec.pathname, rec.lineno, rec.func, rec.exception) for rec in r.logs],
        )
        if r.native_trace is not None:
            self._conn.execute("INSERT INTO rollout_traces (rollout_id, run_id, trace) VALUES (?, ?, ?)",
                               (r.rollout_id, r.run_id, _json(r.native_trace)))

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def close(self) -> None:
        with self._lock:
            deadline = time.monotonic() + SETTLE_S
            while True:
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    self._conn.execute("PRAGMA journal_mode=DELETE")  # "database is locked" while a reader is open
                    break
                except sqlite3.OperationalError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
            self._conn.close()


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on error (the connection runs in autocommit mode).

    The error the caller sees is always the one that broke the transaction. On a full disk the COMMIT
    fails ("database or disk is full") and SQLite may already have rolled back, so the ROLLBACK fails
    too ("no transaction is active"); that second error is attached to the first as a note instead of
    replacing it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            try:
                self._conn.execute("COMMIT")
                return
            except sqlite3.Error as commit_error:
                self._rollback(commit_error)
                raise
        self._rollback(exc)  # returning None re-raises `exc`

    def _rollback(self, cause: BaseException) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error as e:
            cause.add_note(f"(the rollback after it failed too: {type(e).__name__}: {e})")
