"""Shuffled epochs over the train split, resumable from a saved position."""

from looprl.envs.types import Example
from looprl.orchestrator.sampler import ExampleSampler

EXAMPLES = [Example(id=str(i), payload={"prompt_messages": []}) for i in range(5)]


def test_each_epoch_is_a_permutation_and_epochs_differ():
    sampler = ExampleSampler(EXAMPLES, seed=1)
    first = [sampler.next().id for _ in range(5)]
    second = [sampler.next().id for _ in range(5)]
    assert sorted(first) == sorted(second) == [e.id for e in EXAMPLES]
    assert first != second and sampler.state() == {"epoch": 1, "position": 5}


def test_a_restored_sampler_continues_where_the_saved_one_was():
    sampler = ExampleSampler(EXAMPLES, seed=3)
    [sampler.next() for _ in range(7)]
    restored = ExampleSampler(EXAMPLES, seed=3, state=sampler.state())
    assert [restored.next().id for _ in range(9)] == [sampler.next().id for _ in range(9)]
