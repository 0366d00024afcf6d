"""Packing training samples into micro-batches: token budget, shared prompts, rollout ids kept."""

from looprl.handoff import row_segments
from looprl.orchestrator.packing import pack
from looprl.orchestrator.training_samples import TrainingSample


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


def _reply(prompt: list[int], completion: list[int], advantage: float, rollout_id: str = "r") -> TrainingSample:
    return TrainingSample(rollout_id=rollout_id, token_ids=prompt + completion,
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


def _rollouts_by_segment(batches) -> list[tuple[str, list[int]]]:
    """(rollout id, its loss tokens' ids) for every sample of every row, read back through the trees."""
    out = []
    for b in batches:
        for seg in row_segments(b.trees):
            tree = b.trees[seg.tree]
            if seg.branch or not tree.branches:  # a branch, or a lone sample (its prefix is the sample)
                rollout_id = tree.rollout_ids[seg.branch - 1 if seg.branch else 0]
                out.append((rollout_id, b.token_ids[seg.start:seg.end]))
    return out


def test_packing_keeps_each_samples_rollout_id():
    prompt = [7, 8, 9, 10]
    samples = [_reply(prompt, [1, 2], 1.0, "a"), _reply(prompt, [3], -1.0, "b"), _reply([1, 2], [3], 2.0, "c"),
               _reply([5, 6], [4], 0.5, "c")]  # one rollout may give several samples
    (batch,) = pack(samples, token_budget=64)
    shared, *lone = batch.trees
    assert shared.rollout_ids == ["a", "b"] and [t.rollout_ids for t in lone] == [["c"], ["c"]]
    assert sorted(_rollouts_by_segment([batch])) == [("a", [1, 2]), ("b", [3]), ("c", [1, 2, 3]), ("c", [5, 6, 4])]


def test_a_split_tree_keeps_the_rollout_ids_of_its_branches():
    prompt = list(range(10, 20))
    samples = [_reply(prompt, [i] * 5, 1.0, f"r{i}") for i in range(5)]
    batches = pack(samples, token_budget=20)  # prompt 10 + two completions of 5 fit; the fifth is alone
    trees = [t for b in batches for t in b.trees]
    assert all(len(t.rollout_ids) == max(1, len(t.branches)) for t in trees)
    assert sorted(r for t in trees for r in t.rollout_ids) == ["r0", "r1", "r2", "r3", "r4"]
    assert sorted(_rollouts_by_segment(batches)) == [("r0", [0] * 5), ("r1", [1] * 5), ("r2", [2] * 5),
                                                     ("r3", [3] * 5), ("r4", prompt + [4] * 5)]
