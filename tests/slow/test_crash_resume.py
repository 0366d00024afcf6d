"""SIGKILL each process of a short real run in turn, at a random step, then `--resume`: every step
1..N ends with exactly one metrics row and one set of rollouts (issue 17: a checkpoint without its
step's metrics, and runs that could not resume before their first checkpoint)."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.integration.test_rl_cli import ROOT, config, looprl, store_steps
from tests.support.kills import children, find_process

from looprl.paths import batch_path, progress_path, trainer_report_path

STEPS = 4


@pytest.mark.parametrize("victim", ["looprl.trainer", "looprl.orchestrator", " inference"])
def test_sigkill_then_resume_stores_every_step_once(tmp_path, victim):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    step = random.Random(victim).randint(1, STEPS - 1)
    # The moment to kill: right after the trainer's checkpoint of `step` (the case that lost metrics),
    # while the orchestrator hands over the next batch, or once the trainer reported `step`.
    trigger = {"looprl.trainer": progress_path(run, step), "looprl.orchestrator": batch_path(run, step + 1),
               " inference": trainer_report_path(run, step)}[victim]
    # a kept checkpoint every step: the trigger (step N's progress.json) must not be pruned before it is seen
    args = ["rl", "@", str(cfg), "--max_steps", str(STEPS), "--trainer.checkpoint.resume_every_s", "0",
            "--trainer.checkpoint.interval", "1", "--trainer.checkpoint.keep", str(STEPS),
            "--orchestrator.eval.interval", "0"]
    launcher = subprocess.Popen([sys.executable, "-m", "looprl.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not trigger.exists() and launcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = find_process(launcher.pid, victim)
    if pid is None:
        launcher.kill()
        out, err = launcher.communicate(timeout=60)
        pytest.fail(f"{victim} not running at step {step} (launcher exit {launcher.returncode}, "
                    f"trigger seen: {trigger.exists()}):\n{out[-3000:]}\n{err[-3000:]}")
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 1 and time.monotonic() - killed < 15, err
    assert not children(launcher.pid) if Path(f"/proc/{launcher.pid}").exists() else True

    looprl(*args, "--resume")
    steps, rollouts = store_steps(run)
    assert steps == list(range(1, STEPS + 1))
    assert rollouts == [(n, 8) for n in range(1, STEPS + 1)]
