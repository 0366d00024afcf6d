"""One GPU shared by the engine and the trainer: each caps its allocator, so neither OOMs the other.

No GPU here: `torch.cuda` is mocked where `parallel.setup` reaches it."""

from pathlib import Path
from unittest import mock

import pytest
import torch

from looprl.config import RLConfig, load_config
from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.launch.placement import place
from looprl.trainer import parallel

DEMO = ["@", str(Path(__file__).resolve().parents[3] / "examples/demo/rl.toml")]


def _setup_on_a_mocked_gpu() -> mock.MagicMock:
    with (mock.patch.object(torch.cuda, "is_available", return_value=True),
          mock.patch.object(torch.cuda, "set_device"),
          mock.patch.object(torch.cuda, "set_per_process_memory_fraction") as cap,
          mock.patch.object(parallel.dist, "init_process_group") as group,
          mock.patch.object(parallel.dist, "get_rank", return_value=0)):
        ranks = parallel.setup("auto", "auto")
    assert ranks.device == torch.device("cuda", 0)
    # bf16 on the GPU: one process is a one-rank NCCL group (FSDP2's mixed precision applies the dtype)
    assert ranks.compute_dtype == torch.bfloat16 and ranks.distributed
    assert group.call_args.args == ("nccl",) and group.call_args.kwargs["world_size"] == 1
    return cap


def test_the_trainer_takes_the_rest_of_a_shared_gpu_less_a_margin(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv(MEMORY_FRACTION_ENV, "0.4")
    cap = _setup_on_a_mocked_gpu()
    cap.assert_called_once_with(pytest.approx(0.6 - parallel.SHARED_GPU_MARGIN), torch.device("cuda", 0))
    monkeypatch.delenv(MEMORY_FRACTION_ENV)  # a GPU of its own: no cap
    _setup_on_a_mocked_gpu().assert_not_called()


def test_the_launcher_tells_the_trainer_the_engines_share():
    cfg = load_config(RLConfig, DEMO)
    assert place(cfg, 1).trainer_env[MEMORY_FRACTION_ENV] == "0.4"
    assert MEMORY_FRACTION_ENV not in place(cfg, 2).trainer_env
