"""`looprl rl` on a benchmax tool env, unchanged, with its constructor arguments from `--env-args`."""

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MATH = f"{Path(__file__).parent}/envs/benchmax_math/env.py:MathToolEnv"


def run_rl(tmp_path: Path, model: str, *extra: str) -> Path:
    out = tmp_path / "run"
    (tmp_path / "rl.toml").write_text(f'[env]\nsource = "{MATH}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", str(tmp_path / "rl.toml"), "--output_dir", str(out),
         "--model.name", model, "--env-args", json.dumps({"max_turns": 2, "max_tool_calls": 1}), "--max_steps", "2",
         "--orchestrator.batch_size", "4", "--orchestrator.group_size", "2", "--orchestrator.sampling.max_tokens", "8",
         "--orchestrator.eval.num_examples", "2", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def check_run(out: Path) -> None:
    config = (out / "config.toml").read_text()
    assert "max_turns = 2" in config and "max_tool_calls = 1" in config  # --env-args became env.args
    with closing(sqlite3.connect(out / "looprl.db")) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM steps ORDER BY step")]
        rows = list(db.execute("SELECT split, termination_reason, rewards FROM rollouts"))
        calls = db.execute("SELECT COUNT(*) FROM model_calls WHERE status = 200").fetchone()[0]
    assert steps == [1, 2] and calls >= len(rows) > 0
    assert {split for split, _, _ in rows} == {"train", "eval"}
    assert all("correct" in json.loads(rewards) for _, reason, rewards in rows if reason == "finished")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the trainer needs torch, which the 3.12 venv leaves out")
def test_rl_two_steps_on_a_benchmax_tool_env(tmp_path):
    from tests.unit.inference.conftest import build_tiny_model

    check_run(run_rl(tmp_path, str(build_tiny_model(tmp_path / "tiny"))))


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the trainer needs torch, which the 3.12 venv leaves out")
def test_rl_two_steps_on_a_benchmax_tool_env_with_the_bundled_model(tmp_path):
    check_run(run_rl(tmp_path, "smollm2-135m-instruct"))
