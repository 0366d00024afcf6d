"""#34 item 9, the CLI: `looprl rollouts --limit -1` (SQLite's "no limit") is refused, `looprl rescore`
refuses a concurrency that would deadlock, and re-scores a run a bounded number of groups at a time
instead of loading every rollout first."""

import json
import time
from pathlib import Path

import pytest

from looprl.cli import main
from looprl.commands.rescore import command as rescore_command
from looprl.commands.rescore import rescoring
from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter

ROOT = Path(__file__).resolve().parents[2]
ENV = "examples/arithmetic/env.py:ArithmeticEnv"


@pytest.fixture
def run_dir(tmp_path):
    """An eval run of the arithmetic example: 10 groups of 2, every answer right."""
    examples = [json.loads(line) for line in (ROOT / "examples/arithmetic/data/train.jsonl").read_text().splitlines()]
    run = tmp_path / "arith"
    writer = RunStoreWriter(run)
    writer.start_run(RunInfo(run_id="run", kind="eval", env=str(ROOT / ENV), env_name="ArithmeticEnv", model="m",
                             created_at=time.time()))
    now = time.time()
    writer.write_rollouts([RolloutRecord(
        rollout_id=f"r{i:02d}", group_id=f"g{i // 2}", example_id=f"e{i // 2}", split="eval", run_id="run",
        env_name="ArithmeticEnv", termination_reason="finished", started_at=now, finished_at=now + 1,
        messages=[*examples[i // 2]["prompt_messages"],
                  {"role": "assistant", "content": f"<answer>{examples[i // 2]['answer']}</answer>"}],
        example_args={"answer": examples[i // 2]["answer"]}, rewards={"correct": 1.0, "format": 1.0}, reward=2.0)
        for i in range(20)])
    writer.finish_run("run", "completed", {})
    writer.close()
    return run


@pytest.mark.parametrize("limit", ["-1", "0"])
def test_rollouts_refuses_a_limit_below_one(run_dir, capsys, limit):
    assert main(["rollouts", str(run_dir), "--limit", limit, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"looprl rollouts: error: --limit must be at least 1, not {limit}\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flag, value, least", [("--concurrency", "0", 1), ("--examples", "-1", 0)])
def test_rescore_refuses_what_would_hang_or_mean_nothing(run_dir, capsys, flag, value, least):
    assert main(["rescore", str(run_dir), flag, value]) == 2
    assert f"{flag} must be at least {least}" in capsys.readouterr().err


def test_rescore_reads_the_run_a_few_groups_at_a_time(run_dir, capsys, monkeypatch):
    calls: list[int] = []
    whole = rescoring.rescore

    async def counted(env, records, settings, **kw):
        calls.append(len(records))
        return await whole(env, records, settings, **kw)

    monkeypatch.setattr(rescore_command, "GROUPS_PER_CHUNK", 3)
    monkeypatch.setattr(rescoring, "rescore", counted)
    assert main(["rescore", str(run_dir)]) == 0
    assert calls == [6, 6, 6, 2]  # 3 groups of 2 at a time, never the whole run
    out = capsys.readouterr().out
    assert "re-scored 20 of 20 rollouts (10 groups)" in out and "rollouts whose total changed: 0 of 20" in out
    assert main(["rescore", str(run_dir), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["rollout_id"] for r in rows] == [f"r{i:02d}" for i in range(20)]  # every one, in stored order
    assert main(["rescore", str(run_dir), "--rollout", "r05", "--json"]) == 0
    assert [json.loads(line)["rollout_id"] for line in capsys.readouterr().out.splitlines()] == ["r05"]
