"""Read-only queries over a run store, shared by the CLI (`looprl rollouts/logs/metrics`) and the inspector.

Opens the database read-only (`mode=ro` URI), so a reader can never block or corrupt the writer and
follows a run while it is written (WAL). A store of an older schema is first migrated, once, through
a short read-write connection (`migrations.upgrade_file`). Every query is parameterised; JSON columns
are decoded and validated into the typed records of `looprl.store.records` on read.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from looprl.envs.types import LogRecordData
from looprl.errors import UserError
from looprl.paths import db_path
from looprl.store.ledger import LedgerEntry
from looprl.store.migrations import check_known, upgrade_file, user_version
from looprl.store.records import ModelCall, RolloutRecord, RunInfo
from looprl.store.schema import ROLLOUT_COLUMNS

SORT_COLUMNS = {
    "step": "step", "reward": "reward", "duration": "duration_s", "turns": "turns",
    "tokens": "completion_tokens", "started": "started_at", "example": "example_id",
    "reason": "termination_reason", "advantage": "advantage",
}
"""Sort keys the rollout list accepts, mapped to columns (never interpolate user text into SQL)."""

ROW_COLUMNS = ", ".join(f"{c.listing} AS {c.name}" if c.listing else f"r.{c.name}" for c in ROLLOUT_COLUMNS)
"""A rollout row without its transcript: what tables of rollouts need, cheap to read."""

_JSON_COLUMNS = [c.name for c in ROLLOUT_COLUMNS if c.json]


@dataclass
class RolloutFilter:
    """Filters for `RunStoreReader.list_rollouts` (and `neighbours`); every field is optional."""

    split: str | None = None
    step: int | None = None
    step_min: int | None = None
    step_max: int | None = None
    termination_reason: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    has_error: bool | None = None
    min_log_level: int | None = None
    """Only rollouts with at least one log record at this stdlib level or above."""
    q: str | None = None
    """Substring search over transcripts and log messages (full-text index; 3+ characters)."""
    group_id: str | None = None
    sort: str = "started"
    order: Literal["asc", "desc"] = "asc"
    limit: int = 100
    offset: int = 0


class RunStoreReader:
    """Read-only access to `{run_dir}/looprl.db`."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        path = db_path(self.run_dir)
        if not path.exists():
            raise UserError(f"{self.run_dir} is not a looprl run directory (no {path.name} in it)")
        upgrade_file(path)
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA busy_timeout=10000")
        check_known(user_version(self._conn), path)

    def close(self) -> None:
        self._conn.close()

    # runs and steps -------------------------------------------------------------------------

    def runs(self) -> list[RunInfo]:
        rows = self._conn.execute("SELECT * FROM runs ORDER BY created_at").fetchall()
        return [RunInfo(**{**dict(r), "config": json.loads(r["config"]), "summary": json.loads(r["summary"])})
                for r in rows]

    def run(self, run_id: str | None = None) -> RunInfo:
        """The run with this id, or the directory's only (latest) run."""
        runs = self.runs()
        for run in reversed(runs):
            if run_id is None or run.run_id == run_id:
                return run
        raise UserError(f"no run {run_id!r} in {self.run_dir}" if run_id else f"{self.run_dir} holds no run yet")

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        """Per-step metrics, each `{"step": N, "time": T, **metrics}`, in step order."""
        rows = self._conn.execute(
            "SELECT step, time, metrics FROM steps WHERE run_id=? ORDER BY step", (run_id,)).fetchall()
        return [{"step": r["step"], "time": r["time"], **json.loads(r["metrics"])} for r in rows]

    def ledger(self, run_id: str) -> list[LedgerEntry]:
        """The prompt ledger's rows of the run (undone ones included), in epoch and position order."""
        rows = self._conn.execute(
            "SELECT group_id, epoch, position, example_id, epoch_size, drawn_at, outcome, step, reason, undone_at "
            "FROM ledger WHERE run_id=? ORDER BY epoch, position, drawn_at", (run_id,)).fetchall()
        return [LedgerEntry(**dict(r)) for r in rows]

    # rollouts --------------------------------------------------------------------------------

    def list_rollouts(self, run_id: str, f: RolloutFilter | None = None, *,
                      transcripts: bool = True) -> tuple[list[RolloutRecord], int]:
        """Rollouts matching `f` (without model calls and logs) and the total count before paging. Without
        `transcripts`, `messages` and `example_args` come back empty and are never read: the inspector's
        rollout table, fast on large stores."""
        f = f or RolloutFilter()
        where, params = self._where(run_id, f)
        column, direction = self._sort(f)
        # a search counts its matches in the same statement, so the full-text lookups run once
        counted = ", COUNT(*) OVER () AS total" if f.q else ""
        rows = self._conn.execute(
            f"SELECT {self._columns(transcripts)}{counted} FROM rollouts r WHERE {where} "
            f"ORDER BY r.{column} {direction}, r.rowid {direction} LIMIT ? OFFSET ?",
            [*params, f.limit, f.offset]).fetchall()
        if f.q and rows:
            total = rows[0]["total"]
        else:
            total = self._conn.execute(f"SELECT COUNT(*) FROM rollouts r WHERE {where}", params).fetchone()[0]
        return [self._rollout(row) for row in rows], total

    def group_chunks(self, run_id: str, f: RolloutFilter, groups: int = 256) -> Iterator[list[RolloutRecord]]:
        """The rollouts `f`'s filters select (not its sort or paging), whole groups at a time, `groups`
        groups per list, in the order they were written: a whole run in bounded memory."""
        where, params = self._where(run_id, f)
        ids = [row[0] for row in self._conn.execute(
            f"SELECT r.group_id FROM rollouts r WHERE {where} GROUP BY r.group_id ORDER BY MIN(r.rowid)", params)]
        for start in range(0, len(ids), groups):
            chunk = ids[start:start + groups]
            rows = self._conn.execute(
                f"SELECT r.* FROM rollouts r WHERE {where} AND r.group_id IN ({','.join('?' * len(chunk))}) "
                "ORDER BY r.rowid", [*params, *chunk]).fetchall()
            yield [self._rollout(row) for row in rows]

    def _where(self, run_id: str, f: RolloutFilter) -> tuple[str, list[Any]]:
        clauses: list[str] = ["r.run_id = ?"]
        params: list[str | int | float] = [run_id]
        simple = [("r.split = ?", f.split), ("r.step = ?", f.step), ("r.step >= ?", f.step_min),
                  ("r.step <= ?", f.step_max), ("r.termination_reason = ?", f.termination_reason),
                  ("r.reward >= ?", f.reward_min), ("r.reward <= ?", f.reward_max),
                  ("r.max_log_level >= ?", f.min_log_level), ("r.group_id = ?", f.group_id)]
        for clause, value in simple:
            if value is not None:
                clauses.append(clause)
                params.append(value)
        if f.has_error is not None:
            clauses.append("r.error IS NOT NULL" if f.has_error else "r.error IS NULL")
        if f.q:
            # one set of rowids, so SQLite can drive the query from the (usually small) match set
            clauses.append(
                "r.rowid IN (SELECT rowid FROM rollouts_fts WHERE rollouts_fts MATCH ? UNION "
                "SELECT m.rowid FROM rollouts m WHERE m.rollout_id IN (SELECT l.rollout_id FROM rollout_logs l "
                "WHERE l.id IN (SELECT rowid FROM rollout_logs_fts WHERE rollout_logs_fts MATCH ?)))")
            if len(f.q) < 3:  # the trigram index needs 3 characters; fall back to a scan
                clauses[-1] = ("(r.messages LIKE ? OR r.rollout_id IN (SELECT rollout_id FROM rollout_logs "
                               "WHERE message LIKE ?))")
                params += [f"%{f.q}%", f"%{f.q}%"]
            else:
                phrase = '"' + f.q.replace('"', '""') + '"'
                params += [phrase, phrase]
        return " AND ".join(clauses), params

    def rollout(self, rollout_id: str) -> RolloutRecord:
        """One rollout with its model calls and log records."""
        row = self._conn.execute("SELECT * FROM rollouts WHERE rollout_id=?", (rollout_id,)).fetchone()
        if row is None:
            raise UserError(f"no rollout {rollout_id!r} in {self.run_dir}")
        record = self._rollout(row)
        record.model_calls = self.model_calls(rollout_id)
        record.logs = self.logs(rollout_id=rollout_id)
        return record

    def siblings(self, group_id: str, *, transcripts: bool = True) -> list[RolloutRecord]:
        """A group's rollouts in the order they were written (without `transcripts`: as `list_rollouts`)."""
        rows = self._conn.execute(
            f"SELECT {self._columns(transcripts)} FROM rollouts r WHERE group_id=? ORDER BY rowid",
            (group_id,)).fetchall()
        return [self._rollout(r) for r in rows]

    def native_traces(self, rollout_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The framework's own records of these rollouts (`RolloutResult.native_trace`), for those that have one."""
        marks = ", ".join("?" * len(rollout_ids))
        try:
            rows = self._conn.execute(f"SELECT rollout_id, trace FROM rollout_traces WHERE rollout_id IN ({marks})",
                                      rollout_ids).fetchall()
        except sqlite3.OperationalError:  # a store no writer has opened since the table was added
            return {}
        return {rollout_id: json.loads(trace) for rollout_id, trace in rows}

    def model_calls(self, rollout_id: str) -> list[ModelCall]:
        rows = self._conn.execute(
            "SELECT * FROM model_calls WHERE rollout_id=? ORDER BY idx", (rollout_id,)).fetchall()
        out = []
        for r in rows:
            d = dict(r)
            for key in ("prompt_token_ids", "completion_token_ids", "completion_logprobs", "trainer_logprobs",
                        "completion_policy_versions"):
                d[key] = None if d[key] is None else json.loads(d[key])
            out.append(ModelCall(**d))
        return out

    def logs(self, *, rollout_id: str | None = None, run_id: str | None = None, min_level: int = 0,
             limit: int | None = None) -> list[LogRecordData]:
        """Log records of one rollout, or of a whole run, in time order."""
        sql = "SELECT * FROM rollout_logs WHERE level >= ?"
        params: list[Any] = [min_level]
        if rollout_id is not None:
            sql += " AND rollout_id = ?"
            params.append(rollout_id)
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        sql += " ORDER BY time, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [LogRecordData(**dict(r)) for r in self._conn.execute(sql, params)]

    def logs_with_rollout(self, run_id: str, min_level: int = 0) -> list[tuple[str, LogRecordData]]:
        """Every log record of a run with the id of its rollout, in time order."""
        rows = self._conn.execute(
            "SELECT * FROM rollout_logs WHERE run_id=? AND level>=? ORDER BY time, id", (run_id, min_level))
        return [(r["rollout_id"], LogRecordData(**dict(r))) for r in rows]

    # queries for the inspector ---------------------------------------------------------------

    def neighbours(self, run_id: str, rollout_id: str, f: RolloutFilter) -> tuple[str | None, str | None]:
        """The ids before and after `rollout_id` in the list `f` selects (its filters and sort), or None."""
        column, direction = self._sort(f)
        current = self._conn.execute(
            f"SELECT rowid, {column} FROM rollouts WHERE rollout_id=?", (rollout_id,)).fetchone()
        if current is None:
            return None, None
        rowid, value = current[0], current[1]
        where, params = self._where(run_id, f)
        # (value, rowid) keys in ascending order, NULLs first as SQLite sorts them; each side is a list of
        # conditions tried in turn (row values keep each one a single index range)
        key = f"(r.{column}, r.rowid)"
        if value is None:
            after = [(f"r.{column} IS NULL AND r.rowid > ?", [rowid]), (f"r.{column} IS NOT NULL", [])]
            before = [(f"r.{column} IS NULL AND r.rowid < ?", [rowid])]
        else:
            after = [(f"{key} > (?, ?)", [value, rowid])]
            before = [(f"{key} < (?, ?)", [value, rowid]), (f"r.{column} IS NULL", [])]

        def first(side: list[tuple[str, list[Any]]], order: str) -> str | None:
            for condition, values in side:
                row = self._conn.execute(
                    f"SELECT r.rollout_id FROM rollouts r WHERE {where} AND {condition} "
                    f"ORDER BY r.{column} {order}, r.rowid {order} LIMIT 1", [*params, *values]).fetchone()
                if row is not None:
                    return row[0]
            return None

        if direction == "ASC":
            return first(before, "DESC"), first(after, "ASC")
        return first(after, "ASC"), first(before, "DESC")

    def termination_reasons(self, run_id: str, split: str) -> dict[str, int]:
        """How many rollouts of the split ended with each termination reason."""
        rows = self._conn.execute(
            "SELECT termination_reason, COUNT(*) FROM rollouts WHERE run_id=? AND split=? "
            "GROUP BY termination_reason ORDER BY 2 DESC", (run_id, split)).fetchall()
        return {reason: count for reason, count in rows}

    def rollout_counts(self, run_id: str) -> dict[str, int]:
        """Number of rollouts per split."""
        rows = self._conn.execute(
            "SELECT split, COUNT(*) FROM rollouts WHERE run_id=? GROUP BY split", (run_id,)).fetchall()
        return {split: count for split, count in rows}

    def last_step(self, run_id: str) -> tuple[int | None, dict[str, Any]]:
        """The last recorded training step and its metrics, or `(None, {})`."""
        row = self._conn.execute(
            "SELECT step, metrics FROM steps WHERE run_id=? ORDER BY step DESC LIMIT 1", (run_id,)).fetchone()
        return (None, {}) if row is None else (row[0], json.loads(row[1]))

    def mean_reward(self, run_id: str, split: str, step: int | None = None) -> float | None:
        """Mean aggregated reward of the split's scored rollouts (of one step, when given)."""
        sql = "SELECT AVG(reward) FROM rollouts WHERE run_id=? AND split=?"
        params: list[str | int] = [run_id, split]
        if step is not None:
            sql += " AND step=?"
            params.append(step)
        return self._conn.execute(sql, params).fetchone()[0]

    def reward_range(self, run_id: str, split: str, up_to_step: int) -> tuple[float, float] | None:
        """The lowest and highest aggregated reward of the split's scored rollouts up to a step, leaving out groups
        dropped as stale (no step counted them); None: none."""
        low, high = self._conn.execute(
            "SELECT MIN(reward), MAX(reward) FROM rollouts WHERE run_id=? AND split=? AND step<=? AND group_id NOT IN "
            "(SELECT group_id FROM ledger WHERE run_id=? AND outcome='stale')",
            (run_id, split, up_to_step, run_id)).fetchone()
        return None if low is None else (low, high)

    def max_step(self, run_id: str, split: str) -> int | None:
        """The highest step any rollout of the split was recorded at."""
        return self._conn.execute(
            "SELECT MAX(step) FROM rollouts WHERE run_id=? AND split=?", (run_id, split)).fetchone()[0]

    def step_rewards(self, run_id: str, split: str) -> list[dict[str, Any]]:
        """Per step of a split: rollout count, failures, mean aggregated reward and mean of each reward
        component (zero-filled components count as 0), computed from the rollouts themselves."""
        totals = self._conn.execute(
            "SELECT step, COUNT(*), SUM(reward IS NULL), AVG(reward), COUNT(reward) FROM rollouts "
            "WHERE run_id=? AND split=? GROUP BY step ORDER BY step", (run_id, split)).fetchall()
        sums = self._conn.execute(
            "SELECT r.step, j.key, SUM(j.value) FROM rollouts r, json_each(r.rewards) j "
            "WHERE r.run_id=? AND r.split=? AND r.reward IS NOT NULL GROUP BY r.step, j.key",
            (run_id, split)).fetchall()
        components: dict[int, dict[str, float]] = {}
        for step, key, total in sums:
            components.setdefault(step, {})[key] = total
        return [{"step": step, "rollouts": n, "failed": failed, "reward": mean,
                 **{f"reward/{k}": v / scored for k, v in components.get(step, {}).items() if scored}}
                for step, n, failed, mean, scored in totals]

    def _sort(self, f: RolloutFilter) -> tuple[str, str]:
        column = SORT_COLUMNS.get(f.sort)
        if column is None:
            raise UserError(f"unknown sort key {f.sort!r}; expected one of {', '.join(SORT_COLUMNS)}")
        return column, "DESC" if f.order == "desc" else "ASC"

    @staticmethod
    def _columns(transcripts: bool) -> str:
        return "r.*" if transcripts else ROW_COLUMNS

    def _rollout(self, row: sqlite3.Row) -> RolloutRecord:
        d = dict(row)
        for key in _JSON_COLUMNS:
            d[key] = json.loads(d[key])
        return RolloutRecord(**d)
