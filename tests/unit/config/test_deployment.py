"""`[deployment]` placement on 0, 1 and 4 GPUs, the torchrun command, and the shipped scaling configs."""

from pathlib import Path

import pytest

from looprl.config import RLConfig, load_config
from looprl.errors import UserError
from looprl.launch.placement import MEMORY_FRACTION_ENV, place, trainer_command, visible_gpus

ROOT = Path(__file__).resolve().parents[3]
DEMO = ["@", str(ROOT / "examples/demo/rl.toml")]


@pytest.mark.parametrize("path", sorted(ROOT.glob("examples/scaling/*.toml")), ids=lambda p: p.name)
def test_scaling_configs_merge_with_the_demo(path):
    cfg = load_config(RLConfig, [*DEMO, "@", str(path)])
    assert cfg.deployment.trainer_gpus or cfg.slurm is not None


def test_placement(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cfg = load_config(RLConfig, [*DEMO, "--trainer.world_size", "2"])
    assert place(cfg, 0).trainer_ranks == 2 and not place(cfg, 0).trainer_env  # CPU: gloo ranks
    one = place(cfg, 1)  # engine and trainer share the GPU
    assert one.trainer_ranks == 1 and one.engine_env == {"CUDA_VISIBLE_DEVICES": "0", MEMORY_FRACTION_ENV: "0.4"}
    four = place(cfg, 4)
    assert four.trainer_ranks == 3 and four.trainer_env == {"CUDA_VISIBLE_DEVICES": "1,2,3"}
    assert four.engine_env == {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(UserError):
        place(load_config(RLConfig, [*DEMO, "--deployment.trainer_gpus", "[5]"]), 4)


def test_several_ranks_run_under_torchrun(tmp_path):
    assert trainer_command("py", tmp_path, 1, []) == ["py", "-m", "looprl.trainer", str(tmp_path)]
    cmd = trainer_command("py", tmp_path, 2, ["--resume-step", "3"])
    assert cmd[:3] == ["py", "-m", "torch.distributed.run"] and "--nproc-per-node=2" in cmd
    assert f"--log-dir={tmp_path / 'logs' / 'trainer' / 'torchrun'}" in cmd and cmd[-2:] == ["--resume-step", "3"]


def test_placement_maps_the_deployment_through_the_parents_visible_gpus(monkeypatch):
    """Under a scheduler's allocation (`CUDA_VISIBLE_DEVICES=4,5,6,7`) `[deployment]` index 0 is GPU 4:
    the children must not land on physical GPUs 0-3, which belong to another job."""
    cfg = load_config(RLConfig, DEMO)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    four = place(cfg, 4)
    assert four.engine_env == {"CUDA_VISIBLE_DEVICES": "4"} and four.trainer_env == {"CUDA_VISIBLE_DEVICES": "5,6,7"}
    uuids = place(cfg, 2, visible_gpus(2, "GPU-aa, GPU-bb"))
    assert (uuids.engine_env["CUDA_VISIBLE_DEVICES"], uuids.trainer_env["CUDA_VISIBLE_DEVICES"]) == ("GPU-aa", "GPU-bb")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpus(3) == ["0", "1", "2"]
