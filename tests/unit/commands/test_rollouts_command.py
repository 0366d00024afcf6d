"""`looprl rollouts --rollout ID`: the rollout's transcript, not a table row; `--json` unchanged."""

import json

import pytest
from tests.unit.inspector.fake_store import build_store

from looprl.cli import main


@pytest.fixture
def run_dir(tmp_path):
    return build_store(tmp_path / "toy-run")


def rollouts(capsys, *args: str) -> str:
    assert main(["rollouts", *args]) == 0
    return capsys.readouterr().out


def test_one_rollout_prints_its_transcript_in_order(run_dir, capsys):
    out = rollouts(capsys, str(run_dir), "--rollout", "train-0-0")
    lines = out.splitlines()
    assert lines[0] == "rollout train-0-0 · train · step 0 · example ex0 · group train-0-g0"
    body = [line for line in lines[2:] if line]
    assert body[:6] == ["system", "  Be brief.", "user", "  What is 2+2?", "assistant",
                        '  → tool call add({"a": 2, "b": 2})  call_1']
    assert body[6:10] == ["tool add ← call_1", "  4", "assistant", "  The answer is 4."]
    assert body[10:] == ["finished · reward 1.500 · advantage +0.500", "  correct          1",
                         "  format           0.5"]
    assert "┃" not in out and "│" not in out  # not a table


def test_a_failed_rollout_shows_its_reason_and_error(run_dir, capsys):
    out = rollouts(capsys, str(run_dir), "--rollout", "train-0-2")
    assert out.splitlines()[-2:] == ["tool_error", "error: tool_error: it broke"]


def test_json_of_one_rollout_is_unchanged(run_dir, capsys):
    [line] = rollouts(capsys, str(run_dir), "--rollout", "train-0-0", "--json").splitlines()
    row = json.loads(line)
    assert row["rollout_id"] == "train-0-0" and row["rewards"] == {"correct": 1.0, "format": 0.5}
    assert len(row["messages"]) == 5


def test_json_carries_the_policy_version_of_each_token(run_dir, capsys):
    import sqlite3

    with sqlite3.connect(run_dir / "looprl.db") as db:
        db.execute("UPDATE model_calls SET completion_policy_versions='[12, 12, 13]' WHERE rollout_id='train-0-0' "
                   "AND idx=0")
    for args in (("--rollout", "train-0-0"), ("--step", "0", "--split", "train")):
        lines = [json.loads(line) for line in rollouts(capsys, str(run_dir), *args, "--json").splitlines()]
        row = next(r for r in lines if r["rollout_id"] == "train-0-0")
        assert row["policy_versions"] == [[12, 12, 13], None]
