"""Training samples from recorded model calls (multi-turn merge, masks, logprobs)."""

from looprl.orchestrator.training_samples import build_samples
from looprl.store.records import ModelCall


def _call(idx: int, prompt: list[int], completion: list[int], logprobs: list[float] | None = None,
          status: int = 200) -> ModelCall:
    return ModelCall(rollout_id="r", idx=idx, started_at=0.0, latency_s=0.1, status=status,
                     prompt_token_ids=prompt, completion_token_ids=completion,
                     completion_logprobs=logprobs if logprobs is not None else [-0.5] * len(completion))


def test_single_call():
    [s] = build_samples("r", [_call(0, [1, 2, 3], [4, 5], [-0.1, -0.2])], advantage=0.5)
    assert s.token_ids == [1, 2, 3, 4, 5]
    assert s.loss_mask == [False, False, False, True, True]
    assert s.inference_logprobs == [0.0, 0.0, 0.0, -0.1, -0.2]
    assert s.advantage == 0.5 and s.loss_tokens == 2


def test_multi_turn_calls_that_extend_merge():
    calls = [
        _call(0, [1, 2], [3, 4], [-0.3, -0.4]),
        _call(1, [1, 2, 3, 4, 9, 9], [5], [-0.5]),  # previous prompt + completion + a tool result
        _call(2, [1, 2, 3, 4, 9, 9, 5, 8], [6, 7], [-0.6, -0.7]),
    ]
    [s] = build_samples("r", calls, advantage=-1.0)
    assert s.token_ids == [1, 2, 3, 4, 9, 9, 5, 8, 6, 7]
    assert s.loss_mask == [False, False, True, True, False, False, True, False, True, True]
    assert s.inference_logprobs == [0.0, 0.0, -0.3, -0.4, 0.0, 0.0, -0.5, 0.0, -0.6, -0.7]


def test_calls_out_of_order_merge_by_index():
    calls = [_call(1, [1, 2, 3, 7], [8]), _call(0, [1, 2], [3])]
    [s] = build_samples("r", calls, advantage=1.0)
    assert s.token_ids == [1, 2, 3, 7, 8]


def test_a_rewritten_history_starts_a_new_sample():
    calls = [_call(0, [1, 2], [3, 4]), _call(1, [1, 2, 3, 99, 5], [6])]  # token 4 re-rendered as 99
    first, second = build_samples("r", calls, advantage=1.0)
    assert first.token_ids == [1, 2, 3, 4] and first.loss_mask == [False, False, True, True]
    assert second.token_ids == [1, 2, 3, 99, 5, 6]
    assert second.loss_mask == [False] * 5 + [True]


def test_unusable_calls_are_left_out():
    calls = [
        _call(0, [1], [2]),
        ModelCall(rollout_id="r", idx=1, started_at=0.0, latency_s=0.1, status=500, error="boom"),
        _call(2, [1, 2, 3], [4], logprobs=[]),  # logprobs missing for its token
        _call(3, [1, 2, 3], [4]),
    ]
    first, second = build_samples("r", calls, advantage=1.0)
    assert first.token_ids == [1, 2]
    assert second.token_ids == [1, 2, 3, 4]  # the chain was broken by the failed call


def test_a_reply_sampled_by_two_policies_is_corrected_against_each_tokens_own_sampler():
    """In-flight weight updates: a reply's first tokens come from version 3, the rest from version 4. Each
    loss token keeps the logprob of the weights that sampled it, through packing, so the rollout correction's
    ratio is the trainer's probability over the mixed behaviour policy: per token, and at sequence level the
    product over both versions' tokens."""
    import math

    import torch

    from looprl.orchestrator.packing import pack
    from looprl.trainer.loss.correction import tis

    sampled = [-0.1, -0.2, -1.0, -2.0]  # versions 3, 3, 4, 4
    call = _call(0, [1, 2, 3], [4, 5, 6, 7], sampled).model_copy(update={"completion_policy_versions": [3, 3, 4, 4]})
    [sample] = build_samples("r", [call], advantage=1.0)
    assert sample.policy_versions == [-1, -1, -1, 3, 3, 4, 4]
    [batch] = pack([sample], token_budget=64)
    engine = torch.tensor([lp for lp, loss in zip(batch.inference_logprobs, batch.loss_mask) if loss])
    assert torch.allclose(engine, torch.tensor(sampled))
    trainer = torch.tensor([-0.3, -0.3, -0.9, -1.9])  # logp_old of the same tokens
    token = tis(trainer - engine, torch.zeros(4, dtype=torch.long), cap=100.0)
    assert torch.allclose(token.weight, torch.exp(trainer - engine))
    sequence = tis(trainer - engine, torch.zeros(4, dtype=torch.long), cap=100.0, level="sequence")
    behaviour = sum(sampled)  # log q3(t1) + log q3(t2) + log q4(t3) + log q4(t4)
    assert math.isclose(float(sequence.weight[0]), math.exp(float(trainer.sum()) - behaviour), rel_tol=1e-5)
