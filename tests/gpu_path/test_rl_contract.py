"""`looprl rl` on the GPU's code path, on the CPU: trainer and embedded engine in bfloat16, the trainer's
attention flex_attention, every attention call under the kernel contract (`LOOPRL_KERNEL_CONTRACT=1`:
q, k and v in bfloat16, or the process fails). Prompt trees in every run (groups of 4 siblings share their
prompt), the KL reference model, then a resume of that run, then LoRA; each trains with finite losses.

Before the fix for GPU defect 1 the trainer's first policy pass failed the contract (q and k float32, v
bfloat16: float32 weights under autocast)."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from tests.support.rl_env import write_data, write_rl_config
from tests.unit.inference.conftest import build_tiny_model

from looprl.device import KERNEL_CONTRACT_ENV

ROOT = Path(__file__).resolve().parents[2]


def looprl(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "looprl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, KERNEL_CONTRACT_ENV: "1"})
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def config(tmp_path: Path) -> Path:
    return write_rl_config(tmp_path / "rl.toml", model=build_tiny_model(tmp_path / "tiny"),
                           data=write_data(tmp_path / "data"), run=tmp_path / "run", max_steps=2, overrides={
                               "inference": {"dtype": "bfloat16"},
                               "trainer": {"dtype": "bfloat16", "attention": "flex_attention"}})


def checked(run: Path, steps: list[int], runs: int = 1) -> None:
    """Both processes of each of `runs` runs logged their kernels' first checked calls, and every step's loss
    is finite."""
    trainer = (run / "logs" / "trainer.log").read_text()
    for kernel in ("sdpa", "flex_attention"):  # policy passes (CPU: sdpa), reference passes (flex)
        assert trainer.count(f"kernel contract: trainer {kernel} got q, k, v in torch.bfloat16") == runs
    engine = (run / "logs" / "inference.log").read_text()
    assert engine.count("kernel contract: inference sdpa got q, k, v in torch.bfloat16") == runs
    for step in steps:
        report = json.loads((run / "steps" / f"step_{step}" / "trainer.json").read_text())
        assert math.isfinite(report["metrics"]["loss"]) and report["metrics"]["tokens"] > 0


def test_kl_reference_prompt_trees_and_resume(tmp_path):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    looprl("rl", "@", str(cfg), "--trainer.loss.kl_coef", "0.05")
    checked(run, [1, 2])
    looprl("rl", "@", str(cfg), "--trainer.loss.kl_coef", "0.05", "--max_steps", "3", "--resume")
    assert "resumed from checkpoint step 2" in (run / "logs" / "trainer.log").read_text()
    checked(run, [3], runs=2)


def test_lora(tmp_path):
    cfg = config(tmp_path)
    looprl("rl", "@", str(cfg), "--trainer.lora.rank", "4", "--trainer.loss.kl_coef", "0.05")
    checked(tmp_path / "run", [1, 2])
