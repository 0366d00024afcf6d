"""GPU defect 1: one trainer process in bfloat16 sends the attention kernel q, k and v in one dtype.

Before the fix the process kept float32 weights under bfloat16 autocast: transformers' rotary embedding
multiplied autocast's bfloat16 q and k by float32 cos/sin, so sdpa got q and k in float32 next to a
bfloat16 v (autocast hid it), and flex_attention, no autocast op, failed on CUDA. Now `parallel.setup`
opens a one-rank group and `prepare` shards with FSDP2's mixed-precision policy, as for torchrun's ranks;
`kernel_contract` checks every sdpa and flex_attention call. A step with the KL reference, LoRA and
prompt trees trains with a finite loss: the policy's grad passes run sdpa (no flex backward on the CPU),
the reference's passes flex_attention, exactly as on a GPU."""

import math

import pytest
import torch
from tests.support.tiny_model import tiny_model

from looprl.config.trainer import LoraConfig
from looprl.device import kernel_contract
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample
from looprl.trainer import attention, parallel
from looprl.trainer.lora import add_lora
from looprl.trainer.loss import clipped
from looprl.trainer.model import as_reference
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.step import train_step


def _samples() -> list[TrainingSample]:
    """Two groups of siblings sharing their prompts (prompt trees), of several lengths."""
    out = []
    for prompt, lengths in (([5, 9, 3, 7, 11, 12], (4, 9, 2)), ([8] * 40, (30, 7))):
        for i, n in enumerate(lengths):
            ids = prompt + [(13 + i + j) % 60 + 2 for j in range(n)]
            out.append(TrainingSample(rollout_id=f"r{len(out)}", token_ids=ids,
                                      loss_mask=[k >= len(prompt) for k in range(len(ids))],
                                      advantage=1.0 - i, inference_logprobs=[-1.0] * len(ids)))
    return out


@pytest.mark.parametrize("lora", [False, True])
def test_a_bfloat16_step_sends_one_dtype_to_the_kernels(one_process, lora):
    ranks = parallel.setup("cpu", "bfloat16")
    assert ranks.compute_dtype == torch.bfloat16 and ranks.world_size == 1
    policy = attention.use(tiny_model(), "flex_attention")
    if lora:
        policy = add_lora(policy, LoraConfig(rank=4, alpha=8))
    policy = parallel.prepare(policy, ranks)
    reference = parallel.prepare(as_reference(attention.use(tiny_model(), "flex_attention")), ranks)
    optimizer = build_optimizer(policy, lr=1e-3)
    micro_batches = pack(_samples(), 64)
    assert any(len(mb.trees) > 1 or mb.trees[0].branches for mb in micro_batches)
    with kernel_contract(torch.bfloat16) as calls:
        metrics = train_step(policy, optimizer, build_scheduler(optimizer), micro_batches, clipped.token_loss,
                             ref_model=reference, kl_coef=0.1, ranks=ranks)
    assert math.isfinite(metrics["loss"]) and metrics["grad_norm"] > 0
    assert calls["sdpa"] == calls["flex_attention"] == 2 * len(micro_batches)  # 2 layers, policy / reference
    assert all(p.dtype == torch.float32 for p in policy.parameters())  # float32 master weights
