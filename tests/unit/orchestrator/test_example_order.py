"""Shuffled epochs over the train split, resumable from a saved position."""

from looprl.envs.types import Example
from looprl.orchestrator.example_order import ExampleOrder

EXAMPLES = [Example(id=str(i), payload={"prompt_messages": []}) for i in range(5)]


def test_each_epoch_is_a_permutation_and_epochs_differ():
    order = ExampleOrder(EXAMPLES, seed=1)
    first = [order.next().id for _ in range(5)]
    second = [order.next().id for _ in range(5)]
    assert sorted(first) == sorted(second) == [e.id for e in EXAMPLES]
    assert first != second and order.state() == {"epoch": 1, "position": 5}


def test_a_restored_order_continues_where_the_saved_one_was():
    order = ExampleOrder(EXAMPLES, seed=3)
    [order.next() for _ in range(7)]
    restored = ExampleOrder(EXAMPLES, seed=3, state=order.state())
    assert [restored.next().id for _ in range(9)] == [order.next().id for _ in range(9)]
