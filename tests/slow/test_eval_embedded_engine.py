"""`looprl eval` on the embedded engine with the bundled SmolLM2: the real path, end to end."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_eval_on_the_bundled_model(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "eval", "examples/calculator/env.py:CalculatorEnv", "-n", "2", "-r", "2",
         "--max-tokens", "48", "--seed", "0", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Termination reasons" in proc.stdout and (out / "logs" / "inference.log").exists()
    rows = [json.loads(line) for line in subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rollouts", str(out), "--json"], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout.splitlines()]
    assert len(rows) == 4
    for row in rows:
        assert row["termination_reason"] in {"finished", "output_exceeded", "max_turns_exceeded",
                                             "tool_budget_exceeded"}
        assert row["messages"][-1]["role"] in ("assistant", "tool") and row["completion_tokens"] > 0
    # the gateway recorded the engine's token ids and logprobs for every call
    from looprl.store.reader import RunStoreReader

    calls = RunStoreReader(out).model_calls(rows[0]["rollout_id"])
    assert calls and all(len(c.completion_token_ids) == len(c.completion_logprobs) > 0 for c in calls)
    assert all(c.prompt_token_ids for c in calls)
