"""`looprl rl` with two CPU trainer ranks (torchrun, gloo, FSDP2) on a tiny random-weight model:
2 steps, both ranks' logs, a checkpoint every step, then `--resume` to step 3 with no step repeated."""

from pathlib import Path

from tests.integration.test_rl_cli import config, looprl, store_steps


def test_two_cpu_ranks_train_checkpoint_and_resume(tmp_path):
    cfg = config(tmp_path)
    run = tmp_path / "run"
    ranks = ["--trainer.world_size", "2", "--trainer.checkpoint.resume_every_s", "0",
             "--orchestrator.eval.interval", "0"]
    looprl("rl", "@", str(cfg), "--max_steps", "2", *ranks)
    trainer_log = (run / "logs" / "trainer.log").read_text()
    assert "trainer rank 0 of 2" in trainer_log and "trainer rank 1 of 2" not in trainer_log  # rank 0 only
    rank_logs = sorted(Path(run / "logs" / "trainer" / "torchrun").rglob("stdout.log"))
    assert [p.parent.name for p in rank_logs] == ["0", "1"]
    assert "trainer rank 1 of 2" in "".join(p.read_text() + (p.parent / "stderr.log").read_text() for p in rank_logs)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_2"]
    assert (run / "checkpoints" / "step_2" / "optimizer" / ".metadata").is_file()

    looprl("rl", "@", str(cfg), "--max_steps", "3", "--resume", *ranks)
    assert store_steps(run) == ([1, 2, 3], [(1, 8), (2, 8), (3, 8)])
    assert "resumed from checkpoint step 2" in (run / "logs" / "trainer.log").read_text()
