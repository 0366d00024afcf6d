"""`orchestrator.max_consecutive_failures` through a real `looprl rl` on the tiny model: an env whose
every rollout fails stops the run at its first step, with an error that names the last failures and
where their tracebacks are; the failed rollouts are in the store and the prompt ledger says `failed`."""

import subprocess
import sys

from tests.integration.test_rl_cli import ROOT, config

from looprl.store.reader import RunStoreReader


def test_a_run_whose_rollouts_keep_failing_stops_and_says_where_to_look(tmp_path):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", str(cfg), "--env.source", "tests/support/rl_env.py:DownEnv",
         "--orchestrator.max_consecutive_failures", "6", "--orchestrator.eval.interval", "0",
         "--orchestrator.eval.num_examples", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "orchestrator.max_consecutive_failures: 8 rollouts in a row failed, so the run stops" in proc.stderr
    assert "sandbox_unavailable: the sandbox service at 10.0.0.7 refused the connection" in proc.stderr
    assert f"looprl logs {run} --rollout " in proc.stderr and "logs/envs/train/DownEnv/" in proc.stderr
    reader = RunStoreReader(run)
    rows, total = reader.list_rollouts("run")
    assert total == 8 and {r.termination_reason for r in rows} == {"sandbox_unavailable"}
    assert reader.run().status == "failed"
    assert {e.outcome for e in reader.ledger("run")} >= {"failed"}
    assert not reader.steps("run")  # no step trained on nothing
