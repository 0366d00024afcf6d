"""Schema migrations: a store written by an older looprl is brought to `SCHEMA_VERSION` when opened.

`MIGRATIONS[v]` takes a store from version v to v + 1; `upgrade` applies the missing ones in one
transaction and then creates whatever the current `SCHEMA` adds (tables and indexes are
`IF NOT EXISTS`). The writer upgrades on open. Readers open read-only, so `upgrade_file` opens an
older store read-write once, just for the migration; a reader then finds it current. A migration is
frozen history: it spells out its own SQL and logic instead of calling code that may change later.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from looprl.errors import UserError
from looprl.store.schema import SCHEMA, SCHEMA_VERSION


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Add `rollouts.zero_filled` and fill it the way the inspector derived it from schema 1: a scored
    rollout (non-NULL reward) lacks the components any rollout of its scope emitted, the scope being
    the run, split and step in an `rl` run (one batch) and the run and split in an `eval` run."""
    conn.execute("ALTER TABLE rollouts ADD COLUMN zero_filled TEXT NOT NULL DEFAULT '[]'")
    kinds = dict(conn.execute("SELECT run_id, kind FROM runs").fetchall())
    rows = [(rollout_id, (run_id, split, 0 if kinds.get(run_id) == "eval" else step), set(json.loads(rewards)), reward)
            for rollout_id, run_id, split, step, rewards, reward
            in conn.execute("SELECT rollout_id, run_id, split, step, rewards, reward FROM rollouts").fetchall()]
    names: dict[tuple[str, str, int], set[str]] = {}
    for _, scope, emitted, _ in rows:
        names.setdefault(scope, set()).update(emitted)
    conn.executemany("UPDATE rollouts SET zero_filled=? WHERE rollout_id=?",
                     [(json.dumps(sorted(names[scope] - emitted)), rollout_id)
                      for rollout_id, scope, emitted, reward in rows if reward is not None and names[scope] - emitted])


def _v2_to_v3(conn: sqlite3.Connection) -> None:
    """Add `model_calls.trainer_logprobs` (NULL: not recorded, as for every call trained before)."""
    conn.execute("ALTER TABLE model_calls ADD COLUMN trainer_logprobs TEXT")


def _v3_to_v4(conn: sqlite3.Connection) -> None:
    """Keep the full-text indexes in sync on delete and update (schema 3 had insert triggers only), and
    rebuild both from their tables: a resumed run's deleted rollouts and log records were left in them."""
    for statement in (
        """CREATE TRIGGER IF NOT EXISTS rollouts_fts_delete AFTER DELETE ON rollouts BEGIN
            INSERT INTO rollouts_fts(rollouts_fts, rowid, messages) VALUES ('delete', old.rowid, old.messages);
        END""",
        """CREATE TRIGGER IF NOT EXISTS rollouts_fts_update AFTER UPDATE OF messages ON rollouts BEGIN
            INSERT INTO rollouts_fts(rollouts_fts, rowid, messages) VALUES ('delete', old.rowid, old.messages);
            INSERT INTO rollouts_fts(rowid, messages) VALUES (new.rowid, new.messages);
        END""",
        """CREATE TRIGGER IF NOT EXISTS rollout_logs_fts_delete AFTER DELETE ON rollout_logs BEGIN
            INSERT INTO rollout_logs_fts(rollout_logs_fts, rowid, message, exception)
                VALUES ('delete', old.id, old.message, old.exception);
        END""",
        """CREATE TRIGGER IF NOT EXISTS rollout_logs_fts_update AFTER UPDATE OF message, exception ON rollout_logs
        BEGIN
            INSERT INTO rollout_logs_fts(rollout_logs_fts, rowid, message, exception)
                VALUES ('delete', old.id, old.message, old.exception);
            INSERT INTO rollout_logs_fts(rowid, message, exception) VALUES (new.id, new.message, new.exception);
        END""",
        "INSERT INTO rollouts_fts(rollouts_fts) VALUES ('rebuild')",
        "INSERT INTO rollout_logs_fts(rollout_logs_fts) VALUES ('rebuild')",
    ):  # one by one: `executescript` would commit the migration's transaction first
        conn.execute(statement)


def _v4_to_v5(conn: sqlite3.Connection) -> None:
    """Add the prompt ledger (`ledger`), empty: runs before it recorded no draws (a resume of one goes on
    from its checkpoint's example position, as it did)."""
    conn.execute("""CREATE TABLE IF NOT EXISTS ledger (
        run_id TEXT NOT NULL, group_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL, position INTEGER NOT NULL,
        example_id TEXT NOT NULL, epoch_size INTEGER NOT NULL, drawn_at REAL NOT NULL, outcome TEXT NOT NULL,
        step INTEGER, reason TEXT, undone_at INTEGER)""")
    conn.execute("CREATE INDEX IF NOT EXISTS ledger_by_position ON ledger (run_id, epoch, position)")


def _add_policy_versions(conn: sqlite3.Connection) -> None:
    """Add `model_calls.completion_policy_versions` (NULL: not recorded, as for every call made before)."""
    conn.execute("ALTER TABLE model_calls ADD COLUMN completion_policy_versions TEXT")


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5, 5: _add_policy_versions}
"""From-version -> migration to the next version."""


def user_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def check_known(version: int, path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise UserError(f"{path} was written by a newer looprl (schema {version} > {SCHEMA_VERSION}); upgrade looprl")


def upgrade(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the store on `conn` (autocommit mode) to `SCHEMA_VERSION`, creating it when new."""
    if user_version(conn) == 0:
        conn.executescript(SCHEMA)  # a new store: its version is set once its tables exist
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = user_version(conn)  # read again under the lock: another process may have migrated
        check_known(version, path)
        for v in range(version or SCHEMA_VERSION, SCHEMA_VERSION):
            MIGRATIONS[v](conn)
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    conn.executescript(SCHEMA)  # what a migrated store lacks of the current schema (all IF NOT EXISTS)


def upgrade_file(path: Path) -> None:
    """Migrate the store at `path` if it is older than `SCHEMA_VERSION` (a reader's open path)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        version = user_version(conn)
    check_known(version, path)
    if version in (0, SCHEMA_VERSION):  # 0: the writer is creating it
        return
    try:
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            conn.execute("PRAGMA busy_timeout=10000")
            upgrade(conn, path)
    except sqlite3.OperationalError as e:
        raise UserError(f"{path} has schema {version} and needs migrating to {SCHEMA_VERSION}, "
                        f"which needs write access: {e}") from e
