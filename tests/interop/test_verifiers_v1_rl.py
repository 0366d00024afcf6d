"""`looprl rl` on a verifiers 0.4 env package (`vf:add-tool-v1`), unchanged: two steps through the trainer and
the embedded engine (and vLLM's CPU build, slow), every rollout's model calls stored with token ids, the
taskset's reward weights as the run's (its metric monitor-only) and each total their weighted sum."""

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from tests.support.verifiers_line import require_v1

require_v1()
from tests.slow.test_rl_bundled_model import check_on_policy_steps  # noqa: E402 (imports torch, which 3.12 lacks)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).parent / "envs" / "verifiers_v1" / "add_tool_v1"
WEIGHTS = {"correct": 1.0, "used_tool": 0.5, "reply_chars": 0.0}


def run_rl(tmp_path: Path, model: str, backend: str = "embedded") -> Path:
    site = tmp_path / "site"  # the env package installed as its README says
    subprocess.run([str(Path(sys.executable).parent / "uv"), "pip", "install", "--quiet", "--no-deps", "--target",
                    str(site), str(PACKAGE)], check=True, timeout=600,
                   env={**os.environ, "VIRTUAL_ENV": str(Path(sys.executable).parent.parent)})
    out = tmp_path / "run"
    (tmp_path / "rl.toml").write_text('[env]\nsource = "vf:add-tool-v1"\nargs = {agent = {max_turns = 2}}\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", str(tmp_path / "rl.toml"), "--output_dir", str(out),
         "--model.name", model, "--inference.backend", backend, "--max_steps", "2", "--orchestrator.batch_size", "4",
         "--orchestrator.group_size", "2", "--orchestrator.sampling.max_tokens", "8",
         "--orchestrator.eval.num_examples", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=1500, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def check_run(out: Path) -> None:
    config = (out / "config.toml").read_text()
    assert "reply_chars = 0.0" in config and "used_tool = 0.5" in config  # the taskset's weights, its metric at 0
    with closing(sqlite3.connect(out / "looprl.db")) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM steps ORDER BY step")]
        rows = list(db.execute("SELECT rollout_id, termination_reason, rewards, reward FROM rollouts "
                               "WHERE split = 'train'"))
        calls = db.execute("SELECT rollout_id, completion_token_ids FROM model_calls WHERE status = 200").fetchall()
    assert steps == [1, 2] and len(rows) == 8
    assert {rid for rid, _ in calls} >= {rid for rid, *_ in rows} and all(ids for _, ids in calls)
    for _, reason, rewards, reward in rows:
        assert reason in ("finished", "output_exceeded", "max_turns_exceeded"), reason
        rewards = json.loads(rewards)
        assert set(rewards) == set(WEIGHTS)
        assert reward == pytest.approx(sum(WEIGHTS[k] * v for k, v in rewards.items()))


def test_rl_two_steps_on_a_v1_env(tmp_path):
    from tests.unit.inference.conftest import build_tiny_model

    check_run(run_rl(tmp_path, str(build_tiny_model(tmp_path / "tiny"))))


@pytest.mark.slow
def test_rl_two_steps_on_a_v1_env_with_the_bundled_model_on_vllm(tmp_path):
    """The real model through vLLM's CPU build (the embedded engine runs the same env in the test above, and
    the bundled model on the demo env in tests/slow/test_rl_bundled_model.py, whose checks of the steps hold
    here too): `looprl rl`'s one run on vLLM."""
    out = run_rl(tmp_path, "smollm2-135m-instruct", "vllm")
    check_run(out)
    check_on_policy_steps(out)
    assert "vllm.entrypoints" in (out / "logs" / "inference.log").read_text()  # vLLM's server served the run
