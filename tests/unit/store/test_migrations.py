"""Stores written by schema 1 (`tests/fixtures/stores/v1/`, made by looprl at 6360c10) are migrated
when opened and read back through the store reader, the CLI and the inspector, zero-filled
components included."""

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from looprl.cli import main
from looprl.errors import UserError
from looprl.inspector.app import create_app
from looprl.store.reader import RolloutFilter, RunStoreReader
from looprl.store.schema import SCHEMA_VERSION
from looprl.store.writer import RunStoreWriter

V1 = Path(__file__).resolve().parents[2] / "fixtures/stores/v1"


def copy(name: str, tmp_path: Path) -> Path:
    run = tmp_path / f"fixture-{name}"
    run.mkdir()
    shutil.copy(V1 / name / "looprl.db", run / "looprl.db")
    return run


def version(run: Path) -> int:
    with sqlite3.connect(run / "looprl.db") as db:
        return db.execute("PRAGMA user_version").fetchone()[0]


def test_fixtures_are_schema_1():
    assert SCHEMA_VERSION == 6 and version(V1 / "eval") == 1 and version(V1 / "rl") == 1


def test_reader_migrates_an_eval_store_once(tmp_path):
    run = copy("eval", tmp_path)
    r = RunStoreReader(run)
    assert version(run) == SCHEMA_VERSION
    assert r.run().kind == "eval" and r.run().status == "completed" and r.run().summary["rollouts"] == 8
    rows, total = r.list_rollouts(r.run().run_id, RolloutFilter(limit=100))
    assert total == 8
    marks = {(tuple(sorted(x.rewards)), x.termination_reason): x.zero_filled for x in rows}
    # the whole split is the batch: `bonus` was emitted by some rollouts, so the others count it as 0
    assert marks == {(("bonus", "correct"), "finished"): [], (("correct",), "finished"): ["bonus"],
                     ((), "model_error"): []}
    one = r.rollout(next(x.rollout_id for x in rows if x.zero_filled))
    assert one.messages[-1]["role"] == "assistant" and one.logs and one.model_calls[0].completion_token_ids
    assert all(c.trainer_logprobs is None for c in one.model_calls)  # schema 3's column: none recorded then
    r.close()
    again = RunStoreReader(run)  # already current: opened read-only straight away
    assert again.list_rollouts(rows[0].run_id, transcripts=False)[0][0].zero_filled == rows[0].zero_filled


def test_writer_migrates_too(tmp_path):
    run = copy("rl", tmp_path)
    RunStoreWriter(run).close()
    assert version(run) == SCHEMA_VERSION
    zero_filled = {x.rollout_id: x.zero_filled for x in RunStoreReader(run).list_rollouts("run-1")[0]}
    assert zero_filled["train-0-1"] == ["format"] and zero_filled["eval-2-0"] == ["style"]


def store_at_schema(tmp_path: Path, schema: int, *undo: str) -> Path:
    """A current store taken back to `schema`: the statements in `undo` remove what later schemas added."""
    run = copy("rl", tmp_path)
    RunStoreWriter(run).close()
    with sqlite3.connect(run / "looprl.db") as db:
        for statement in undo:
            db.execute(statement)
        db.execute(f"PRAGMA user_version={schema}")
    return run


POLICY_VERSIONS = "ALTER TABLE model_calls DROP COLUMN completion_policy_versions"  # schema 6's


def test_a_schema_2_store_gains_trainer_logprobs(tmp_path):
    """Schema 2 (this change's first version) lacked `model_calls.trainer_logprobs`: 2 -> 3 adds it."""
    run = store_at_schema(tmp_path, 2, "ALTER TABLE model_calls DROP COLUMN trainer_logprobs", POLICY_VERSIONS)
    writer = RunStoreWriter(run)
    writer.write_trainer_logprobs([("train-0-1", 0, [-0.5, -1.25])])
    writer.close()
    assert version(run) == SCHEMA_VERSION
    calls = RunStoreReader(run).model_calls("train-0-1")
    assert [c.trainer_logprobs for c in calls] == [[-0.5, -1.25], None]


def test_a_schema_4_store_gains_an_empty_ledger(tmp_path, capsys):
    """Schema 4 had no prompt ledger: 4 -> 5 adds the table, empty (`looprl metrics` then shows no epochs)."""
    run = store_at_schema(tmp_path, 4, "DROP TABLE ledger", POLICY_VERSIONS)
    reader = RunStoreReader(run)
    assert version(run) == SCHEMA_VERSION and reader.ledger("run-1") == []
    reader.close()
    assert main(["metrics", str(run)]) == 0
    assert "epoch" not in capsys.readouterr().out


def test_a_schema_5_store_gains_policy_versions(tmp_path):
    """Schema 5 lacked `model_calls.completion_policy_versions`: 5 -> 6 adds it, NULL for the calls made before."""
    run = store_at_schema(tmp_path, 5, POLICY_VERSIONS)
    RunStoreWriter(run).close()
    assert version(run) == SCHEMA_VERSION
    assert [c.completion_policy_versions for c in RunStoreReader(run).model_calls("train-0-1")] == [None, None]


def test_cli_reads_a_migrated_store(tmp_path, capsys):
    run = copy("eval", tmp_path)
    assert main(["rollouts", str(run), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 8 and {r["termination_reason"] for r in rows} == {"finished", "model_error"}
    assert main(["logs", str(run), "--json"]) == 0
    logs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(logs) == 8 and {log["level_name"] for log in logs} == {"INFO", "WARNING"}
    assert version(run) == SCHEMA_VERSION


def test_inspector_reads_a_migrated_rl_store(tmp_path):
    """The inspector tests' fake store as schema 1 wrote it: the marks it derived then are stored now."""
    client = TestClient(create_app([copy("rl", tmp_path)]), base_url="http://127.0.0.1:8765")
    api = "/api/runs/fixture-rl"
    rows = {r["rollout_id"]: r for r in client.get(f"{api}/rollouts", params={"limit": 500}).json()["rows"]}
    assert rows["train-0-1"]["zero_filled"] == ["format"] and rows["train-0-1"]["rewards"] == {"correct": 0.0}
    assert rows["train-0-0"]["zero_filled"] == [] and rows["train-0-2"]["zero_filled"] == []  # failed: not scored
    assert rows["eval-2-0"]["zero_filled"] == ["style"] and rows["eval-2-1"]["zero_filled"] == []
    page = client.get(f"{api}/rollouts", params={"split": "eval"}).json()
    assert page["components"] == ["correct", "style"] and page["total"] == 2
    d = client.get(f"{api}/rollouts/train-0-1").json()
    assert d["zero_filled"] == ["format"] and d["reward"] == 0.0 and d["env_name"] == "toy"
    assert [m["role"] for m in d["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert d["logs"][0]["message"] == "format missing" and len(d["model_calls"]) == 2
    assert d["sibling_ids"] == ["train-0-0", "train-0-1"] and d["siblings"][0]["zero_filled"] == []
    assert "run_id" not in d["siblings"][0] and "messages" not in d["siblings"][0]
    assert client.get("/runs/fixture-rl/rollouts/train-0-1").status_code == 200


def test_inspector_marks_an_eval_store(tmp_path):
    client = TestClient(create_app([copy("eval", tmp_path)]), base_url="http://127.0.0.1:8765")
    page = client.get("/api/runs/fixture-eval/rollouts", params={"limit": 500}).json()
    assert page["components"] == ["bonus", "correct"]
    assert sorted(len(r["zero_filled"]) for r in page["rows"]) == [0] * 6 + [1] * 2


def test_newer_stores_are_refused(tmp_path):
    run = copy("eval", tmp_path)
    with sqlite3.connect(run / "looprl.db") as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="newer looprl"):
        RunStoreReader(run)
    with pytest.raises(UserError, match="newer looprl"):
        RunStoreWriter(run)
