"""Debugging a rollout as a user does, through the real CLI on runs written by `looprl eval`:
`logs --rollout`, `rescore` with an edited reward, `replay` (as recorded, edited, and under `--pdb`)."""

import json
import re
import sys
from pathlib import Path

import pexpect
import pytest
from tests.integration.test_eval_cli import calculate, solve
from tests.support.cli import ROOT, looprl
from tests.support.scripted_server import ScriptedServer

ARITHMETIC = "examples/arithmetic/env.py:ArithmeticEnv"
CALCULATOR = "examples/calculator/env.py:CalculatorEnv"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An arithmetic run (right on additions, wrong on subtractions) and a calculator run."""
    base = tmp_path_factory.mktemp("runs")
    with ScriptedServer(solve) as server:
        looprl("eval", ARITHMETIC, "--base-url", server.base_url, "-n", "4", "-r", "2", "-o", str(base / "arith"))
    with ScriptedServer(calculate) as server:
        looprl("eval", CALCULATOR, "--base-url", server.base_url, "-n", "2", "-r", "2", "-o", str(base / "calc"))
    return base / "arith", base / "calc"


def rollouts(run: Path) -> list[dict]:
    return [json.loads(line) for line in looprl("rollouts", str(run), "--json").stdout.splitlines()]


def edited(tmp_path: Path, spec: str, old: str, new: str) -> str:
    """A copy of an example env with one edit, as `FILE:Class`."""
    path, cls = spec.split(":")
    source = (ROOT / path).read_text()
    assert old in source
    target = tmp_path / Path(path).parent.name / "env.py"
    target.parent.mkdir(parents=True)
    target.write_text(source.replace(old, new))
    return f"{target}:{cls}"


def test_logs_of_a_rollout_open_with_its_summary(runs):
    arith, _ = runs
    row = rollouts(arith)[0]
    out = looprl("logs", str(arith), "--rollout", row["rollout_id"]).stdout
    assert out.index(f"rollout {row['rollout_id']}") < out.index("finished") < out.index("expected ")
    assert "last message (assistant, 3 in all): <answer>" in out


def test_rescore_with_an_edited_reward(runs, tmp_path):
    arith, _ = runs
    env = edited(tmp_path, ARITHMETIC, '"format": float(answer is not None)}',
                 '"format": 0.5 * float(answer is not None)}')
    table = looprl("rescore", str(arith), "--env", env).stdout
    assert re.search(r"format\s+│\s+1\s+│\s+1\.000\s+│\s+0\.500\s+│\s+-0\.500", table)
    assert re.search(r"correct\s+│\s+1\s+│\s+(\d\.\d+)\s+│\s+\1\s+│\s+\+0\.000", table)
    assert "rollouts whose total changed: 8 of 8" in table and "expected " in table  # a changed one's records
    rows = [json.loads(line) for line in looprl("rescore", str(arith), "--env", env, "--json").stdout.splitlines()]
    assert len(rows) == 8 and all(r["changed"] and r["after"]["rewards"]["format"] == 0.5 for r in rows)
    assert all(r["after"]["reward"] == r["before"]["reward"] - 0.5 for r in rows)
    assert all(r["logs"][0]["logger"] == "env" and r["logs"][0]["func"] == "compute_reward" for r in rows)
    one = looprl("rescore", str(arith), "--env", env, "--rollout", rows[0]["rollout_id"], "--json").stdout.splitlines()
    assert [json.loads(line)["rollout_id"] for line in one] == [rows[0]["rollout_id"]]
    unchanged = looprl("rescore", str(arith), "--split", "eval").stdout
    assert "rollouts whose total changed: 0 of 8" in unchanged


def test_replay_as_recorded_and_with_an_edited_tool(runs, tmp_path):
    _, calc = runs
    rid = rollouts(calc)[0]["rollout_id"]
    same = looprl("replay", str(calc), rid).stdout
    assert "transcript: the same as the stored one (5 messages)" in same
    assert "followed the recording: 2 model calls" in same and "result: " in same
    env = edited(tmp_path, CALCULATOR, "return str(int(result) if float(result).is_integer() else result)",
                 "return 'the calculator is broken'")
    changed = looprl("replay", str(calc), rid, "--env", env).stdout
    assert "+    the calculator is broken" in changed
    assert "diverged from the recording at turn 2: the request's message 3 differs" in changed


def test_replay_pdb_stops_in_the_reward_code(runs, tmp_path):
    _, calc = runs
    rid = rollouts(calc)[0]["rollout_id"]
    env = edited(tmp_path, CALCULATOR, 'used_tool = any(m["role"] == "tool" for m in rollout.messages)',
                 'used_tool = 1 / len([m for m in rollout.messages if m["role"] == "image"])')
    child = pexpect.spawn(sys.executable, ["-m", "looprl.cli", "replay", str(calc), rid, "--env", env, "--pdb"],
                          cwd=str(ROOT), encoding="utf-8", timeout=120, dimensions=(50, 200))
    try:
        child.expect(r"\(Pdb\) ")
        assert "ZeroDivisionError" in child.before and "compute_reward()" in child.before
        child.sendline("p rollout.example_args['answer'], answer")
        child.expect(r"\('\d+', '\d+'\)")
        child.expect(r"\(Pdb\) ")
        child.sendline("c")
        child.expect(pexpect.EOF)
        after = re.sub(r"\x1b\[[0-9;]*m", "", child.before)  # a terminal gets rich's colours
        assert "ended: finished → reward_error" in after and "error: ZeroDivisionError" in after
    finally:
        child.close()
    assert child.exitstatus == 0
