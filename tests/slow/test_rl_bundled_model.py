"""`looprl rl` on the bundled SmolLM2 with the demo env: two small steps through the real engine and
trainer, on the embedded engine and on vLLM (the CPU build in `.venv-vllm`)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["embedded", "vllm"])
def test_two_steps_on_the_bundled_model(tmp_path, backend):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "looprl.cli", "rl", "@", "examples/demo/rl.toml", "--output_dir", str(out),
         "--max_steps", "2", "--orchestrator.batch_size", "8", "--orchestrator.group_size", "4",
         "--orchestrator.sampling.max_tokens", "8", "--orchestrator.eval.num_examples", "2",
         "--inference.backend", backend],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in subprocess.run(
        [sys.executable, "-m", "looprl.cli", "metrics", str(out), "--json"], cwd=ROOT, capture_output=True,
        text=True, check=True).stdout.splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert abs(rows[0]["train/mismatch_kl"]) < 1e-3  # on-policy: engine and trainer agree on the same weights
    assert rows[1]["eval/policy_version"] == 2 and "reward/correct" in rows[0]
    if backend == "vllm":  # it was vLLM's server that served the run
        assert "vllm.entrypoints" in (out / "logs" / "inference.log").read_text()
