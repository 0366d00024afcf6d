"""`make gpu-path`: the code a GPU runs, run on the CPU in bfloat16 with flex_attention (docs/scaling.md).

Every test here is marked `gpu_path`: `make gpu-path` runs them, and `make test` runs that target instead
of collecting them a second time."""

from pathlib import Path

import pytest
import torch.distributed as dist

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu_path)


@pytest.fixture
def one_process():
    """The trainer's one-process group (`parallel.setup` opens it in bfloat16), closed after the test."""
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
