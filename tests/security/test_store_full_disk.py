"""A full disk during a store write: the caller sees the disk error, not the rollback's (issue #34, item 12).

When SQLite's COMMIT fails with "database or disk is full" it may already have rolled the transaction
back, so the writer's own ROLLBACK fails too ("no transaction is active"). That second error used to
replace the first one, hiding why the run stopped.
"""

import sqlite3
import time

import pytest

from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter


class FullDisk:
    """A connection whose COMMIT fails as on a full disk and whose ROLLBACK fails too; the rest is real."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.statements = conn, []

    def execute(self, sql, *args):
        self.statements.append(sql)
        if sql == "COMMIT":
            self.conn.execute("ROLLBACK")  # what SQLite does on SQLITE_FULL
            raise sqlite3.OperationalError("database or disk is full")
        if sql == "ROLLBACK":
            raise sqlite3.OperationalError("cannot rollback - no transaction is active")
        return self.conn.execute(sql, *args)

    def executemany(self, sql, rows):
        return self.conn.executemany(sql, rows)


def rollout(run_id: str) -> RolloutRecord:
    return RolloutRecord(rollout_id="r1", run_id=run_id, step=0, split="train", example_id="e1", group_id="g1",
                         env_name="Env", termination_reason="completed", messages=[], rewards={"correct": 1.0},
                         reward=1.0, started_at=time.time(), finished_at=time.time())


@pytest.fixture
def writer(tmp_path):
    w = RunStoreWriter(tmp_path)
    w.start_run(RunInfo(run_id="run", kind="eval", env="e.py:Env", env_name="Env", model="m", config={},
                        created_at=time.time()))
    real = w._conn
    w._conn = FullDisk(real)
    yield w
    w._conn = real
    w.close()


def test_a_failed_commit_surfaces_the_disk_error(writer):
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full") as raised:
        writer.write_rollouts([rollout("run")])
    assert writer._conn.statements[-2:] == ["COMMIT", "ROLLBACK"]  # it did try to roll back
    assert any("no transaction is active" in note for note in raised.value.__notes__)


def test_an_error_inside_the_transaction_surfaces_over_a_failed_rollback(writer):
    def broken():
        yield rollout("run")
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError, match="database or disk is full") as raised:
        writer.write_rollouts(broken())
    assert any("no transaction is active" in note for note in raised.value.__notes__)
