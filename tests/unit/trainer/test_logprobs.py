"""Trainer logprobs: packing is exact, and with identical weights they match the inference engine's."""

import asyncio
import copy

import pytest
import torch

from looprl.handoff import Tree
from looprl.inference.engine import Engine
from looprl.inference.token_sampling import SamplingParams
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample, build_samples
from looprl.store.records import ModelCall
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import clipped
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.step import train_step


def test_packed_row_equals_separate_passes(model):
    a, b = [5, 9, 3, 7, 2], [4, 8, 6]
    packed, _ = token_logprobs(model, torch.tensor(a + b), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2]),
                               trees=[Tree(prefix=5), Tree(prefix=3)])
    alone_a, _ = token_logprobs(model, torch.tensor(a), torch.arange(5))
    alone_b, _ = token_logprobs(model, torch.tensor(b), torch.arange(3))
    assert packed[:5].tolist() == pytest.approx(alone_a.tolist(), abs=1e-5)
    assert packed[6:].tolist() == pytest.approx(alone_b[1:].tolist(), abs=1e-5)


def test_shared_prompt_tree_equals_separate_passes(model):
    """Siblings packed as one prompt + branches get exactly their separate-sequence logprobs."""
    prompt, completions = [5, 9, 3, 7], [[2, 11], [4, 8, 6], [12]]
    samples = [TrainingSample(rollout_id="r", token_ids=prompt + c, loss_mask=[False] * 4 + [True] * len(c),
                              inference_logprobs=[0.0] * (4 + len(c)), advantage=1.0) for c in completions]
    lone = TrainingSample(rollout_id="x", token_ids=[1, 2, 3], loss_mask=[False, True, True],
                          inference_logprobs=[0.0] * 3, advantage=1.0)
    (mb,) = pack(samples + [lone], token_budget=64)
    assert [t.branches for t in mb.trees] == [[2, 3, 1], []]
    packed, _ = token_logprobs(model, torch.tensor(mb.token_ids), torch.tensor(mb.position_ids),
                               torch.tensor(mb.loss_mask), mb.trees)
    expected = []
    for c in completions:
        alone, _ = token_logprobs(model, torch.tensor(prompt + c), torch.arange(4 + len(c)))
        expected += alone[4:].tolist()
    alone, _ = token_logprobs(model, torch.tensor(lone.token_ids), torch.arange(3))
    expected += alone[1:].tolist()
    assert packed[torch.tensor(mb.loss_mask)].tolist() == pytest.approx(expected, abs=1e-5)


async def _engine_calls(model, tokenizer) -> list[ModelCall]:
    engine = Engine(model, tokenizer)
    engine.start()
    try:
        prompts = [[5, 9, 3, 7], [4, 8, 6, 2, 11, 12]]
        params = SamplingParams(temperature=1.0, max_tokens=12, seed=3)
        results = await asyncio.gather(*(engine.generate(p, params, n=2) for p in prompts))
    finally:
        engine.stop()
    return [
        ModelCall(rollout_id=f"r{i}{j}", idx=0, started_at=0.0, latency_s=0.0, prompt_token_ids=p,
                  completion_token_ids=c.token_ids, completion_logprobs=c.logprobs)
        for i, (p, completions) in enumerate(zip(prompts, results)) for j, c in enumerate(completions)
    ]


def test_on_policy_trainer_matches_engine(model, tokenizer):
    calls = asyncio.run(_engine_calls(copy.deepcopy(model).eval(), tokenizer))
    samples = [s for c in calls for s in build_samples(c.rollout_id, [c], advantage=1.0)]
    assert sum(s.loss_tokens for s in samples) > 8
    for mb in pack(samples, token_budget=40):
        mask = torch.tensor(mb.loss_mask)
        logprobs, _ = token_logprobs(model, torch.tensor(mb.token_ids), torch.tensor(mb.position_ids), mask, mb.trees)
        assert logprobs[mask].tolist() == pytest.approx(torch.tensor(mb.inference_logprobs)[mask].tolist(), abs=1e-4)
    optimizer = build_optimizer(model, lr=1e-3)
    metrics = train_step(model, optimizer, build_scheduler(optimizer), pack(samples, 40), clipped.token_loss)
    assert metrics["mismatch_kl"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["clipped_frac"] == 0.0
