"""The rollout columns are listed once (`schema.ROLLOUT_COLUMNS`): the table, the writer's INSERT and
the reader's row listings all follow that list, and the stored record carries every column."""

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from looprl.store.reader import ROW_COLUMNS
from looprl.store.records import RolloutRecord
from looprl.store.schema import ROLLOUT_COLUMNS, SCHEMA

ROOT = Path(__file__).resolve().parents[3]


def test_table_and_listing_follow_the_column_list():
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    assert [row[1] for row in db.execute("PRAGMA table_info(rollouts)")] == [c.name for c in ROLLOUT_COLUMNS]
    listed = [part.split()[-1].removeprefix("r.") for part in ROW_COLUMNS.split(", ")]
    assert listed == [c.name for c in ROLLOUT_COLUMNS]
    assert all(hasattr(RolloutRecord, c.name) or c.name in RolloutRecord.model_fields for c in ROLLOUT_COLUMNS)


def test_adding_a_column_in_one_place_is_enough(tmp_path):
    """A column added to `ROLLOUT_COLUMNS` alone (here `scored`, a `RolloutRecord` property) is created,
    written and listed: the script edits that one line of schema.py before the store modules load it."""
    script = textwrap.dedent(f"""
        import inspect, sqlite3, sys
        sys.path.insert(0, {str(ROOT)!r})
        import looprl.store.schema as schema
        source = inspect.getsource(schema).replace(
            '    Column("max_log_level"',
            '    Column("scored", "INTEGER NOT NULL DEFAULT 0"),\\n    Column("max_log_level"')
        exec(compile(source, schema.__file__, "exec"), schema.__dict__)
        from looprl.store.reader import ROW_COLUMNS, RunStoreReader
        from looprl.store.writer import RunStoreWriter
        from tests.unit.store.test_store import make_record
        w = RunStoreWriter(sys.argv[1])
        w.write_rollouts([make_record(0), make_record(1, reason="tool_error", reward=None)])
        w.close()
        db = sqlite3.connect(sys.argv[1] + "/looprl.db")
        print(db.execute("SELECT group_concat(scored) FROM rollouts").fetchone()[0], "r.scored" in ROW_COLUMNS,
              len(RunStoreReader(sys.argv[1]).list_rollouts("run", transcripts=False)[0]))
    """)
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1,0", "True", "2"]
