"""The run store's SQLite schema: one database per run directory (`{output_dir}/looprl.db`).

One writer (the orchestrator, or `looprl eval`) appends; the inspector and the CLI open it read-only.
WAL mode lets readers follow a run while it is written. `SCHEMA_VERSION` is kept in
`PRAGMA user_version`; a store of an older version is migrated when it is opened
(`looprl.store.migrations`), a newer one is refused.

Tables
- `runs`: one row per run (kind `eval` | `rl`, env, model, resolved config, status, summary).
- `steps`: per-step training metrics of `looprl rl` (a JSON object per step).
- `rollouts`: one row per rollout, its columns listed once in `ROLLOUT_COLUMNS` (the writer's INSERT
  and the reader's row listings are built from it). `rewards` holds the components exactly as the
  env emitted them, `zero_filled` the names the batch's other rollouts emitted and this one did not
  (they counted as 0), `reward` the aggregated total.
- `model_calls`: every model call a rollout made through the gateway, with token ids and logprobs;
  `trainer_logprobs` is set once the trainer has trained on the call (its report for the step);
  `completion_policy_versions` names the weights version that sampled each completion token (schema 6).
- `rollout_logs`: the stdlib `logging` records attributed to each rollout.
- `rollout_traces`: an adapted framework's own record of a rollout (`RolloutResult.native_trace`: a
  `verifiers.v1` trace), for `looprl rescore`; only rollouts that have one. A store written before it
  existed gains the (empty) table when a writer opens it; readers treat its absence as no traces.
- `rollouts_fts`, `rollout_logs_fts`: full-text indexes (FTS5, trigram tokenizer, so any substring
  matches) over transcripts and log messages. They are external-content tables (the text lives once, in
  `rollouts` and `rollout_logs`), so triggers on insert, delete and update keep them in sync: without the
  delete trigger a resumed run's deleted rollouts stayed in the index, and a new row that reused their
  rowid matched their text (schema 4 added it).
- `ledger`: the prompt ledger (schema 5): one row per training example drawn (a group), with its epoch,
  its position in the epoch's order and what became of it; rows a resume undid stay, marked
  (`looprl.store.ledger`).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 6


@dataclass(frozen=True)
class Column:
    """One column of `rollouts`; a `RolloutRecord` attribute of the same name holds its value."""

    name: str
    decl: str
    """SQL type and constraints."""
    doc: str = ""
    json: bool = False
    """Stored as JSON text, decoded on read."""
    listing: str | None = None
    """SQL literal that row listings read instead of this (large) column; None: the column itself."""


ROLLOUT_COLUMNS: tuple[Column, ...] = (
    Column("rollout_id", "TEXT PRIMARY KEY"),
    Column("run_id", "TEXT NOT NULL"),
    Column("step", "INTEGER NOT NULL"),
    Column("split", "TEXT NOT NULL", "'train' | 'eval'"),
    Column("env_name", "TEXT NOT NULL"),
    Column("example_id", "TEXT NOT NULL"),
    Column("group_id", "TEXT NOT NULL"),
    Column("termination_reason", "TEXT NOT NULL"),
    Column("error", "TEXT"),
    Column("rewards", "TEXT NOT NULL DEFAULT '{}'", "JSON: components as emitted", json=True),
    Column("zero_filled", "TEXT NOT NULL DEFAULT '[]'", "JSON: components it lacked, counted as 0 in its batch",
           json=True),
    Column("reward", "REAL", "aggregated total; NULL for failed rollouts"),
    Column("advantage", "REAL", "NULL when out of the loss (failed, skipped or dropped group, eval)"),
    Column("turns", "INTEGER NOT NULL DEFAULT 0"),
    Column("tool_calls", "INTEGER NOT NULL DEFAULT 0"),
    Column("prompt_tokens", "INTEGER NOT NULL DEFAULT 0", "sums over its model calls"),
    Column("completion_tokens", "INTEGER NOT NULL DEFAULT 0"),
    Column("started_at", "REAL NOT NULL"),
    Column("finished_at", "REAL NOT NULL"),
    Column("duration_s", "REAL NOT NULL", "finished_at - started_at"),
    Column("messages", "TEXT NOT NULL", "JSON: the full transcript (OpenAI chat messages)", json=True,
           listing="'[]'"),
    Column("example_args", "TEXT NOT NULL DEFAULT '{}'", "JSON: the example's fields but its prompt", json=True,
           listing="'{}'"),
    Column("log_count", "INTEGER NOT NULL DEFAULT 0", "log records stored in rollout_logs"),
    Column("logs_dropped", "INTEGER NOT NULL DEFAULT 0", "log records over the per-rollout limit"),
    Column("logs_truncated", "INTEGER NOT NULL DEFAULT 0", "log records whose message or traceback was cut"),
    Column("max_log_level", "INTEGER NOT NULL DEFAULT 0", "highest stdlib level among its records"),
)
"""The `rollouts` table, in order. A store's table may order them differently (migrations append)."""


def _table(name: str, columns: tuple[Column, ...]) -> str:
    lines = [f"    {c.name:<19} {c.decl}{',' if i < len(columns) - 1 else ''}{f'  -- {c.doc}' if c.doc else ''}"
             for i, c in enumerate(columns)]
    return f"CREATE TABLE IF NOT EXISTS {name} (\n" + "\n".join(lines) + "\n);"


SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id       TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,              -- 'eval' | 'rl'
    env          TEXT NOT NULL,              -- environment source, 'path.py:Class' or 'module:Class'
    env_name     TEXT NOT NULL,
    model        TEXT NOT NULL,
    config       TEXT NOT NULL DEFAULT '{}', -- JSON: resolved configuration
    status       TEXT NOT NULL,              -- 'running' | 'completed' | 'failed' | 'interrupted'
    created_at   REAL NOT NULL,
    finished_at  REAL,
    summary      TEXT NOT NULL DEFAULT '{}'  -- JSON: end-of-run summary
);

CREATE TABLE IF NOT EXISTS steps (
    run_id   TEXT NOT NULL,
    step     INTEGER NOT NULL,
    time     REAL NOT NULL,
    metrics  TEXT NOT NULL,                  -- JSON object of metric name -> number
    PRIMARY KEY (run_id, step)
);

{rollouts_table}
CREATE INDEX IF NOT EXISTS rollouts_by_step ON rollouts (run_id, split, step);
CREATE INDEX IF NOT EXISTS rollouts_by_group ON rollouts (group_id);
CREATE INDEX IF NOT EXISTS rollouts_by_reason ON rollouts (run_id, termination_reason);
CREATE INDEX IF NOT EXISTS rollouts_by_reward ON rollouts (run_id, reward);
CREATE INDEX IF NOT EXISTS rollouts_by_example ON rollouts (run_id, example_id);
-- the inspector's list, counts and filters on large stores
CREATE INDEX IF NOT EXISTS rollouts_by_run_step ON rollouts (run_id, step);
CREATE INDEX IF NOT EXISTS rollouts_by_split_reason ON rollouts (run_id, split, termination_reason);
CREATE INDEX IF NOT EXISTS rollouts_by_split_reward ON rollouts (run_id, split, reward);
CREATE INDEX IF NOT EXISTS rollouts_by_split_log_level ON rollouts (run_id, split, max_log_level);

CREATE TABLE IF NOT EXISTS model_calls (
    id                    INTEGER PRIMARY KEY,
    run_id                TEXT NOT NULL,
    rollout_id            TEXT NOT NULL,
    idx                   INTEGER NOT NULL,  -- order within the rollout
    started_at            REAL NOT NULL,
    latency_s             REAL NOT NULL,
    status                INTEGER NOT NULL,  -- HTTP status the env saw
    finish_reason         TEXT,
    prompt_tokens         INTEGER NOT NULL DEFAULT 0,
    completion_tokens     INTEGER NOT NULL DEFAULT 0,
    prompt_token_ids      TEXT,              -- JSON list, NULL when the upstream returned none
    completion_token_ids  TEXT,
    completion_logprobs   TEXT,
    error                 TEXT,
    trainer_logprobs      TEXT,              -- JSON list: the trainer's logprob of each completion token
    completion_policy_versions TEXT          -- JSON list: the weights version that sampled each completion token
);
CREATE INDEX IF NOT EXISTS model_calls_by_rollout ON model_calls (rollout_id, idx);

CREATE TABLE IF NOT EXISTS rollout_logs (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL,
    rollout_id  TEXT NOT NULL,
    time        REAL NOT NULL,               -- unix seconds
    level       INTEGER NOT NULL,            -- stdlib level number
    level_name  TEXT NOT NULL,
    logger      TEXT NOT NULL,
    message     TEXT NOT NULL,
    pathname    TEXT,
    lineno      INTEGER,
    func        TEXT,
    exception   TEXT                         -- formatted traceback, if any
);
CREATE INDEX IF NOT EXISTS rollout_logs_by_rollout ON rollout_logs (rollout_id, time);
CREATE INDEX IF NOT EXISTS rollout_logs_by_level ON rollout_logs (run_id, level);

CREATE TABLE IF NOT EXISTS ledger (
    run_id      TEXT NOT NULL,
    group_id    TEXT PRIMARY KEY,            -- the draw: its rollouts' group_id
    epoch       INTEGER NOT NULL,            -- 1 = the first pass over the train split
    position    INTEGER NOT NULL,            -- index in the epoch's shuffled order
    example_id  TEXT NOT NULL,
    epoch_size  INTEGER NOT NULL,            -- examples in the split
    drawn_at    REAL NOT NULL,
    outcome     TEXT NOT NULL,               -- in_flight | trained | skipped | filtered | stale | failed | cancelled
    step        INTEGER,                     -- the step that settled it
    reason      TEXT,                        -- why it did not train
    undone_at   INTEGER                      -- K: a resume from checkpoint K undid it
);
CREATE INDEX IF NOT EXISTS ledger_by_position ON ledger (run_id, epoch, position);
CREATE TABLE IF NOT EXISTS rollout_traces (
    rollout_id  TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    trace       TEXT NOT NULL                -- JSON: the framework's record of the rollout
);

CREATE VIRTUAL TABLE IF NOT EXISTS rollouts_fts USING fts5(
    messages, content='rollouts', content_rowid='rowid', tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS rollouts_fts_insert AFTER INSERT ON rollouts BEGIN
    INSERT INTO rollouts_fts(rowid, messages) VALUES (new.rowid, new.messages);
END;
CREATE TRIGGER IF NOT EXISTS rollouts_fts_delete AFTER DELETE ON rollouts BEGIN
    INSERT INTO rollouts_fts(rollouts_fts, rowid, messages) VALUES ('delete', old.rowid, old.messages);
END;
CREATE TRIGGER IF NOT EXISTS rollouts_fts_update AFTER UPDATE OF messages ON rollouts BEGIN
    INSERT INTO rollouts_fts(rollouts_fts, rowid, messages) VALUES ('delete', old.rowid, old.messages);
    INSERT INTO rollouts_fts(rowid, messages) VALUES (new.rowid, new.messages);
END;
CREATE VIRTUAL TABLE IF NOT EXISTS rollout_logs_fts USING fts5(
    message, exception, content='rollout_logs', content_rowid='id', tokenize='trigram');
CREATE TRIGGER IF NOT EXISTS rollout_logs_fts_insert AFTER INSERT ON rollout_logs BEGIN
    INSERT INTO rollout_logs_fts(rowid, message, exception) VALUES (new.id, new.message, new.exception);
END;
CREATE TRIGGER IF NOT EXISTS rollout_logs_fts_delete AFTER DELETE ON rollout_logs BEGIN
    INSERT INTO rollout_logs_fts(rollout_logs_fts, rowid, message, exception)
        VALUES ('delete', old.id, old.message, old.exception);
END;
CREATE TRIGGER IF NOT EXISTS rollout_logs_fts_update AFTER UPDATE OF message, exception ON rollout_logs BEGIN
    INSERT INTO rollout_logs_fts(rollout_logs_fts, rowid, message, exception)
        VALUES ('delete', old.id, old.message, old.exception);
    INSERT INTO rollout_logs_fts(rowid, message, exception) VALUES (new.id, new.message, new.exception);
END;
""".replace("{rollouts_table}", _table("rollouts", ROLLOUT_COLUMNS))
