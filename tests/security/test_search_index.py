"""#34 item 5: a resumed run's search finds each live rollout once, and none it deleted.

Resume deletes the rollouts and log records after the resumed step (`delete_steps_after`) and writes
the steps again; the new rows reuse the deleted rows' rowids. Without delete triggers the external-content
full-text indexes kept the deleted text: a search found deleted rollouts, or a live one twice.
"""

import sqlite3
import time

from looprl.envs.types import LogRecordData, RolloutResult
from looprl.store.reader import RolloutFilter, RunStoreReader
from looprl.store.records import RolloutRecord
from looprl.store.schema import SCHEMA_VERSION
from looprl.store.writer import RunStoreWriter


def rollout(rollout_id: str, step: int, text: str, log: str) -> RolloutRecord:
    now = time.time()
    result = RolloutResult(rollout_id=rollout_id, group_id=f"g{step}", example_id="e", split="train",
                           messages=[{"role": "assistant", "content": text}], termination_reason="finished",
                           rewards={"correct": 1.0}, started_at=now, finished_at=now + 1,
                           logs=[LogRecordData(time=now, level=20, level_name="INFO", logger="env", message=log)])
    return RolloutRecord.from_result(result, run_id="run", env_name="env", step=step, reward=1.0, advantage=None,
                                     model_calls=[])


def write_then_resume(run_dir) -> None:
    """Steps 1-3 written, resumed from step 1, steps 2-3 written again (other replies, same ids)."""
    w = RunStoreWriter(run_dir)
    w.write_rollouts([rollout(f"s{s}", s, f"first try {s} zebra", f"log first {s} walrus") for s in (1, 2, 3)])
    w.delete_steps_after("run", 1)
    w.write_rollouts([rollout(f"s{s}", s, f"second try {s} zebra", f"log second {s} walrus") for s in (2, 3)])
    w.close()


def search(reader: RunStoreReader, q: str) -> list[str]:
    rows, total = reader.list_rollouts("run", RolloutFilter(q=q, limit=100), transcripts=False)
    assert total == len(rows)
    return sorted(r.rollout_id for r in rows)


def assert_consistent(run_dir) -> None:
    r = RunStoreReader(run_dir)
    assert search(r, "first try") == ["s1"]  # s2, s3's first replies were deleted
    assert search(r, "second try") == ["s2", "s3"]
    assert search(r, "zebra") == ["s1", "s2", "s3"]  # each once
    assert search(r, "log first") == ["s1"] and search(r, "walrus") == ["s1", "s2", "s3"]
    r.close()
    with sqlite3.connect(run_dir / "looprl.db") as db:  # FTS5's own check against the content tables
        for table in ("rollouts_fts", "rollout_logs_fts"):
            db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


def test_search_after_a_resume_finds_only_live_rollouts_once(tmp_path):
    write_then_resume(tmp_path)
    assert_consistent(tmp_path)


def test_a_store_with_a_stale_index_is_migrated_and_rebuilt(tmp_path):
    """A schema 3 store (insert triggers only) resumed once: opening it brings the triggers and a clean index."""
    w = RunStoreWriter(tmp_path)
    w.write_rollouts([rollout(f"s{s}", s, f"first try {s} zebra", f"log first {s} walrus") for s in (1, 2, 3)])
    w.close()
    with sqlite3.connect(tmp_path / "looprl.db") as db:  # schema 3 as it was, and its resume's deletes
        for trigger in ("rollouts_fts_delete", "rollouts_fts_update", "rollout_logs_fts_delete",
                        "rollout_logs_fts_update"):
            db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        db.execute("ALTER TABLE model_calls DROP COLUMN completion_policy_versions")  # schema 6's
        db.execute("PRAGMA user_version=3")
        for table in ("rollout_logs", "rollouts"):
            db.execute(f"DELETE FROM {table} WHERE rollout_id IN ('s2', 's3')")
    w = RunStoreWriter(tmp_path)  # opening migrates
    w.write_rollouts([rollout(f"s{s}", s, f"second try {s} zebra", f"log second {s} walrus") for s in (2, 3)])
    w.close()
    with sqlite3.connect(tmp_path / "looprl.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert_consistent(tmp_path)
