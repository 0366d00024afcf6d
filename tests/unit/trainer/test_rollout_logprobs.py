"""The trainer's per-rollout logprobs: from the step's own passes, they equal a separate forward pass
over each model call's prompt + completion, split back onto the calls, whatever the packing."""

import torch

from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import build_samples, loss_calls, per_call
from looprl.store.records import ModelCall
from looprl.trainer.logprobs import token_logprobs
from looprl.trainer.loss import clipped
from looprl.trainer.optim import build_optimizer, build_scheduler
from looprl.trainer.parallel import Ranks
from looprl.trainer.rollout_logprobs import RolloutLogprobs
from looprl.trainer.step import train_step


def _call(rollout_id: str, idx: int, prompt: list[int], completion: list[int], status: int = 200) -> ModelCall:
    return ModelCall(rollout_id=rollout_id, idx=idx, started_at=0.0, latency_s=0.0, status=status,
                     prompt_token_ids=prompt, completion_token_ids=completion,
                     completion_logprobs=[-1.0] * len(completion))


def _rollouts() -> dict[str, list[ModelCall]]:
    prompt = [5, 9, 3, 7, 11]
    rollouts = {  # a group of siblings sharing a prompt: over the budget, its tree is split across rows
        f"g{i}": [_call(f"g{i}", 0, prompt, [20 + i, 21 + i, 22 + i, 23 + i])] for i in range(4)}
    turn_one = [2, 3, 4, 30, 31, 32]  # a multi-turn rollout: turn 2 extends turn 1 (one sample), then
    rollouts["multi"] = [  # a failed call, then a rewritten history: a second sample, longer, packed first
        _call("multi", 0, [2, 3, 4], [30, 31, 32]),
        _call("multi", 1, turn_one + [6, 8], [40, 41]),
        _call("multi", 2, [2, 3], [], status=500),
        _call("multi", 3, [2, 50, 51, 52, 53, 54, 55, 56], [57, 58, 59, 60, 61]),
    ]
    return rollouts


def _separate_pass(model, call: ModelCall) -> list[float]:
    ids = call.prompt_token_ids + call.completion_token_ids
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, torch.tensor(ids), torch.arange(len(ids)))
    return logprobs[len(call.prompt_token_ids):].tolist()


def test_reported_logprobs_equal_a_separate_pass_per_call(model):
    rollouts = _rollouts()
    expected = {(r, c.idx): _separate_pass(model, c) for r, calls in rollouts.items() for c in calls if c.trainable}
    samples = [s for r, calls in rollouts.items() for s in build_samples(r, calls, advantage=1.0)]
    assert [s.index for s in samples if s.rollout_id == "multi"] == [0, 1]
    micro_batches = pack(samples, 16)
    trees = [t for mb in micro_batches for t in mb.trees]
    assert sum("g0" in t.rollout_ids or "g3" in t.rollout_ids for t in trees) == 2  # the group split in two
    rows = [i for i, mb in enumerate(micro_batches) for t in mb.trees if "multi" in t.rollout_ids]
    assert len(rows) == 2 and rows[0] != rows[1]
    assert micro_batches[rows[0]].trees[0].samples == [1]  # the second sample comes first

    collected = RolloutLogprobs()
    optimizer = build_optimizer(model, lr=1e-2)
    train_step(model, optimizer, build_scheduler(optimizer), micro_batches, clipped.token_loss,
               rollout_logprobs=collected)
    reported = collected.gather(Ranks())
    assert reported is not None and set(reported) == set(rollouts)
    got = {}
    for rollout_id, values in reported.items():
        split = per_call(loss_calls(rollouts[rollout_id]), values)
        assert split is not None
        got.update({(rollout_id, idx): v for idx, v in split})
    assert set(got) == set(expected) and [i for r, i in got if r == "multi"] == [0, 1, 3]
    for key, values in expected.items():
        torch.testing.assert_close(torch.tensor(got[key]), torch.tensor(values), atol=1e-5, rtol=0, msg=str(key))


def test_counts_that_disagree_are_not_split():
    assert per_call([(0, 2), (3, 1)], [-1.0, -2.0, -3.0]) == [(0, [-1.0, -2.0]), (3, [-3.0])]
    assert per_call([(0, 2)], [-1.0]) is None
