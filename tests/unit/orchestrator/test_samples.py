"""Training samples from recorded model calls (multi-turn merge, masks, logprobs) and their packing."""

from looprl.orchestrator.packing import pack
from looprl.orchestrator.samples import build_samples
from looprl.orchestrator.types import TrainingSample
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


def _sample(n: int, advantage: float = 1.0) -> TrainingSample:
    return TrainingSample(rollout_id=f"r{n}", token_ids=list(range(n)), loss_mask=[True] * n,
                          inference_logprobs=[-1.0] * n, advantage=advantage)


def test_packing_by_token_budget():
    batches = pack([_sample(3), _sample(6), _sample(4), _sample(2), _sample(12)], token_budget=10)
    assert [[t.prefix for t in b.trees] for b in batches] == [[12], [6, 4], [3, 2]]
    assert all(not t.branches for b in batches for t in b.trees)  # no shared prompts here
    b = batches[2]
    assert b.position_ids == [0, 1, 2, 0, 1]
    assert b.loss_mask == [False, True, True, False, True]  # no loss on a sequence's first token
    assert b.advantages == [1.0] * 5 and len(b.inference_logprobs) == 5


def _reply(prompt: list[int], completion: list[int], advantage: float) -> TrainingSample:
    return TrainingSample(rollout_id="r", token_ids=prompt + completion,
                          loss_mask=[False] * len(prompt) + [True] * len(completion),
                          inference_logprobs=[0.0] * len(prompt) + [-0.5] * len(completion), advantage=advantage)


def test_siblings_share_their_prompt_once():
    prompt = [7, 8, 9, 10]
    siblings = [_reply(prompt, [1, 2], 1.0), _reply(prompt, [3], -1.0), _reply(prompt, [4, 5, 6], 0.5)]
    (batch,) = pack(siblings + [_reply([1, 2], [3], 2.0)], token_budget=64)
    shared, lone = batch.trees
    assert (shared.prefix, shared.branches) == (4, [2, 1, 3]) and (lone.prefix, lone.branches) == (3, [])
    assert batch.token_ids == prompt + [1, 2, 3, 4, 5, 6] + [1, 2, 3]
    assert batch.position_ids == [0, 1, 2, 3, 4, 5, 4, 4, 5, 6] + [0, 1, 2]
    assert batch.loss_mask == [False] * 4 + [True] * 6 + [False, False, True]
    assert batch.advantages == [0.0] * 4 + [1.0] * 2 + [-1.0] + [0.5] * 3 + [2.0] * 3


def test_a_shared_prompt_tree_over_budget_is_split_with_the_prompt_copied():
    prompt = list(range(10, 20))
    siblings = [_reply(prompt, [i] * 5, 1.0) for i in range(4)]
    batches = pack(siblings, token_budget=20)  # prompt 10 + two completions of 5 fit
    assert sorted((t.prefix, t.branches) for b in batches for t in b.trees) == [(10, [5, 5]), (10, [5, 5])]
    assert sum(sum(b.loss_mask) for b in batches) == 20
