"""`looprl rl` on a single-turn verifiers env (`vf:ENV_ID`), unchanged: steps, stored rollouts and calls, and
the rubric's weights as the run's reward weights (zero-weight metrics monitor-only)."""

import json
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from tests.support.verifiers_line import require_classic

require_classic()
pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="the trainer needs torch (not in the 3.12 venv)")
ROOT = Path(__file__).resolve().parents[2]
ENVS = Path(__file__).parent / "envs" / "verifiers"


def run_rl(tmp_path: Path, model: str) -> Path:
    out = tmp_path / "run"
    (tmp_path / "rl.toml").write_text('[env]\nsource = "vf:vf-reverse-words"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ENVS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", str(tmp_path / "rl.toml"), "--output_dir", str(out),
         "--model.name", model, "--env-args", json.dumps({"num_words": 4}), "--max_steps", "2",
         "--orchestrator.batch_size", "4", "--orchestrator.group_size", "2", "--orchestrator.sampling.max_tokens", "8",
         "--orchestrator.eval.num_examples", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def check_run(out: Path) -> None:
    config = (out / "config.toml").read_text()
    assert "answer_chars = 0.0" in config and "overlap = 0.5" in config  # the rubric's weights, monitor-only at 0
    with closing(sqlite3.connect(out / "looprl.db")) as db:
        steps = [r[0] for r in db.execute("SELECT step FROM steps ORDER BY step")]
        rows = list(db.execute("SELECT termination_reason, rewards, reward FROM rollouts WHERE split = 'train'"))
        calls = db.execute("SELECT COUNT(*) FROM model_calls WHERE status = 200").fetchone()[0]
    assert steps == [1, 2] and calls >= len(rows) == 8
    weights = {"exact": 1.0, "overlap": 0.5, "answer_chars": 0.0, "picky": 0.25, "num_turns": 0.0}
    for reason, rewards, reward in rows:
        assert reason in ("finished", "output_exceeded")
        assert reward == pytest.approx(sum(weights[k] * v for k, v in json.loads(rewards).items()))


def test_rl_two_steps_on_a_verifiers_env(tmp_path):
    from tests.unit.inference.conftest import build_tiny_model

    check_run(run_rl(tmp_path, str(build_tiny_model(tmp_path / "tiny"))))


@pytest.mark.slow
def test_rl_two_steps_on_a_verifiers_env_with_the_bundled_model(tmp_path):
    check_run(run_rl(tmp_path, "smollm2-135m-instruct"))
