"""`looprl rl` with two trainer ranks in bfloat16 (FSDP2 mixed precision over gloo, the KL reference model
on; full fine-tuning, then LoRA): rank 1 builds both models on the meta device, every step's loss is finite,
and resuming from checkpoint 2 trains step 3 exactly as the uninterrupted run did (the same loss, the same
weights or adapters, bit for bit).

The resumed step runs the trainer alone (torchrun, as `looprl rl` starts it) on a copy of the run directory
without step 3's results, so it trains on the very batch the uninterrupted run trained on: the orchestrator's
sampling does not enter the comparison."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file
from tests.integration.test_rl_cli import ROOT, config, looprl

from looprl.launch.placement import trainer_command
from looprl.paths import broadcast_dir, checkpoint_dir, trainer_report_path
from looprl.trainer.weight_files import ADAPTER_FILE, MODEL_FILE

STEPS = 3


def _report(run: Path, step: int) -> dict:
    return json.loads(trainer_report_path(run, step).read_text())


@pytest.mark.timeout(900)
@pytest.mark.parametrize("lora", [False, True])
def test_two_bf16_ranks_train_from_meta_init_and_resume_exactly(tmp_path, lora):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    looprl("rl", "@", str(cfg), "--max_steps", str(STEPS), "--trainer.world_size", "2", "--trainer.dtype",
           "bfloat16", "--trainer.loss.kl_coef", "0.05", "--trainer.checkpoint.interval", "1",
           "--trainer.checkpoint.keep", str(STEPS), "--orchestrator.eval.interval", "0",
           *(["--trainer.lora.rank", "4"] if lora else []))
    losses = [_report(run, step)["metrics"]["loss"] for step in range(1, STEPS + 1)]
    assert all(math.isfinite(loss) for loss in losses), losses
    rank_logs = "".join(p.read_text() for p in (run / "logs" / "trainer" / "torchrun").rglob("std*.log"))
    assert "trainer rank 1 of 2 on cpu (torch.bfloat16, sdpa)" in rank_logs
    assert "rank 1 builds its models on the meta device" in rank_logs

    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    shutil.rmtree(checkpoint_dir(resumed, STEPS))
    shutil.rmtree(broadcast_dir(resumed, STEPS), ignore_errors=True)
    trainer_report_path(resumed, STEPS).unlink()
    proc = subprocess.run(trainer_command(sys.executable, resumed, 2, ["--resume-step", str(STEPS - 1)]), cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    assert _report(resumed, STEPS)["metrics"]["loss"] == losses[-1]
    name = ADAPTER_FILE if lora else MODEL_FILE  # a LoRA checkpoint keeps the adapters alone
    weights = load_file(checkpoint_dir(run, STEPS) / name)
    again = load_file(checkpoint_dir(resumed, STEPS) / name)
    assert weights.keys() == again.keys()
    assert all(weights[name].equal(again[name]) for name in weights)
