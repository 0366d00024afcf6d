"""FSDP2 on one gloo rank in this process: the model is sharded where it was loaded, never moved whole
first (on GPUs a whole fp32 model on every rank is what stops a 32B one from starting)."""

from unittest import mock

import pytest
import torch
import torch.distributed as dist
from tests.support.tiny_model import tiny_model

from looprl.trainer import parallel
from looprl.trainer.logprobs import token_logprobs


@pytest.fixture
def group(tmp_path):
    """A one-rank gloo process group for the test's duration."""
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_shards_without_moving_the_whole_model_first(group):
    model = tiny_model()
    ids, pos = torch.tensor([5, 9, 3, 7, 2]), torch.arange(5)
    expected, _ = token_logprobs(tiny_model(), ids, pos)
    with mock.patch.object(model, "to", wraps=model.to) as to:
        sharded = parallel.prepare(model, parallel.Ranks(distributed=True))
    to.assert_not_called()
    assert all(type(p).__name__ == "DTensor" for p in sharded.parameters())
    logprobs, _ = token_logprobs(sharded, ids, pos)
    torch.testing.assert_close(logprobs, expected)


def test_layers_compute_in_bfloat16_and_the_logprob_head_in_float32(group):
    model = parallel.prepare(tiny_model(), parallel.Ranks(compute_dtype=torch.bfloat16, distributed=True))
    seen = {}
    model.lm_head.register_forward_pre_hook(lambda module, args: seen.update(head=module.weight.dtype))
    model.model.layers[0].self_attn.q_proj.register_forward_pre_hook(
        lambda module, args: seen.update(layer=module.weight.dtype))
    token_logprobs(model, torch.tensor([5, 9, 3, 7, 2]), torch.arange(5))
    assert seen == {"head": torch.float32, "layer": torch.bfloat16}
