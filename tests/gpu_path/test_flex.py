"""flex_attention on the trainer's real block masks, in bfloat16 on the CPU, forward only (torch has no
flex_attention backward on the CPU; the reference's and the logprob passes need none).

- Against sdpa: the same packed micro-batches (prompt trees from `orchestrator.packing`) give the same
  logprobs through a `BlockMask` and flex_attention as through the dense tree mask and sdpa, within
  bfloat16's rounding.
- GPU defect 2, recompiles: torch recompiles a compiled function at most 8 times (`recompile_limit`), then
  falls back to eager or raises. transformers' flex_attention compiled with static shapes first (the second
  row length recompiled) and anew whenever a module's `training` flag flipped; and the block mask's
  construction was compiled once per grad mode. Over 10 micro-batches of lengths from 33 to 700 tokens the
  kernel and the mask now compile at most twice per grad mode (rows of one block of 128 tokens, and longer:
  torch specialises a dimension of size 1), and a second pass over them compiles nothing. The grad variant
  is covered as far as the CPU can trace it: grad mode on, inputs that need no gradient.
"""

import pytest
import torch
from tests.support.tiny_model import tiny_model
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._dynamo.utils import counters
from torch.nn.attention import flex_attention as flex_module

from looprl import device
from looprl.handoff import MicroBatch
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer import attention, logprobs, parallel
from looprl.trainer.model import as_reference

LENGTHS = [40, 300, 77, 129, 500, 64, 256, 33, 700, 100]


def _micro_batch(length: int, seed: int) -> MicroBatch:
    """A packed row of `length` tokens: a group of three siblings sharing a prompt, and a lone sample."""
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(2, 64, (length // 3,), generator=g).tolist()
    samples = []
    for i, n in enumerate((length // 6, length // 6, length // 12)):
        ids = prompt + torch.randint(2, 64, (max(n, 1),), generator=g).tolist()
        samples.append(TrainingSample(rollout_id=f"r{i}", token_ids=ids,
                                      loss_mask=[k >= len(prompt) for k in range(len(ids))], advantage=1.0,
                                      inference_logprobs=[0.0] * len(ids)))
    rest = length - len(prompt) - sum(len(s.token_ids) - len(prompt) for s in samples)
    lone = torch.randint(2, 64, (max(rest, 2),), generator=g).tolist()
    samples.append(TrainingSample(rollout_id="lone", token_ids=lone, loss_mask=[k > 0 for k in range(len(lone))],
                                  advantage=1.0, inference_logprobs=[0.0] * len(lone)))
    (mb,) = pack(samples, 10_000)
    return mb


def _logprobs(model, mb: MicroBatch) -> torch.Tensor:
    ids, pos = torch.tensor(mb.token_ids), torch.tensor(mb.position_ids)
    return logprobs.token_logprobs(model, ids, pos, torch.tensor(mb.loss_mask), mb.trees)[0]


@pytest.fixture
def bf16(one_process):
    return parallel.setup("cpu", "bfloat16")


def _model(kernel, ranks):
    return parallel.prepare(as_reference(attention.use(tiny_model(), kernel)), ranks)


def test_flex_forward_on_block_masks_matches_sdpa_in_bfloat16(bf16):
    flex, sdpa = _model("flex_attention", bf16), _model("sdpa", bf16)
    for i, length in enumerate((90, 300)):
        mb = _micro_batch(length, i)
        assert len(mb.trees) == 2 and any(t.branches for t in mb.trees)  # a prompt tree and a lone sample
        with torch.no_grad(), device.kernel_contract(torch.bfloat16) as calls:
            got, expected = _logprobs(flex, mb), _logprobs(sdpa, mb)
        assert calls == {"flex_attention": 2, "sdpa": 2}  # one call per layer each: flex really ran
        mask = torch.tensor(mb.loss_mask)
        assert bool(torch.isfinite(got).all()) and bool((got[mask] < 0).all())
        # bfloat16 keeps 8 bits of mantissa: two kernels summing in other orders differ by ~1e-2 in a logprob
        torch.testing.assert_close(got[mask], expected[mask], atol=5e-2, rtol=2e-2)


def _entries(fn) -> int:
    return len(_debug_get_cache_entry_list(fn.__code__))


def test_flex_compiles_at_most_twice_per_grad_mode_and_never_again(bf16):
    model = _model("flex_attention", bf16)
    batches = [_micro_batch(n, i) for i, n in enumerate(LENGTHS)]

    def run_pass() -> int:
        before = counters["stats"]["unique_graphs"]
        for mb in batches:
            with torch.no_grad():  # the reference's passes (and the CPU's logprob passes)
                _logprobs(model, mb)
            mask = logprobs.tree_block_mask(mb.trees, bf16.device)
            length = len(mb.token_ids)
            qkv = [torch.randn(1, h, length, 8, dtype=torch.bfloat16) for h in (4, 2, 2)]
            with torch.enable_grad():  # the policy's: grad mode on (inputs needing none: the CPU has no backward)
                device.flex_attention(*qkv, mask, None, True)
        return counters["stats"]["unique_graphs"] - before

    first = run_pass()
    assert _entries(flex_module.flex_attention) <= 4, "flex_attention: at most 2 graphs per grad mode"
    assert _entries(logprobs._block_mask) <= 2, "the block mask: one graph for one-block rows, one for longer"
    assert first <= 6
    assert run_pass() == 0
