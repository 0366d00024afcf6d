"""`looprl rl` on the bundled SmolLM2 with the demo env: two small steps through the real engine and
trainer. On vLLM (the CPU build in `.venv-vllm`) the same checks run on a verifiers 0.4 env, whose replies
also stream through the gateway: tests/interop/test_verifiers_v1_rl.py."""

import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.test_rl_cli import metric_rows

ROOT = Path(__file__).resolve().parents[2]


def check_on_policy_steps(out: Path) -> list[dict]:
    """Two stored steps, the first on-policy (engine and trainer agree on the same weights), the final eval on
    the last step's weights; the steps' metrics."""
    rows = metric_rows(out)
    assert [r["step"] for r in rows] == [1, 2]
    assert abs(rows[0]["train/mismatch_kl"]) < 1e-3
    assert rows[1]["eval/policy_version"] == 2
    return rows


@pytest.mark.slow
def test_two_steps_on_the_bundled_model(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", "examples/demo/rl.toml", "--output_dir", str(out),
         "--max_steps", "2", "--orchestrator.batch_size", "8", "--orchestrator.group_size", "4",
         "--orchestrator.sampling.max_tokens", "8", "--orchestrator.eval.num_examples", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "reward/correct" in check_on_policy_steps(out)[0]
