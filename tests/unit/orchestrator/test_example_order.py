"""Shuffled epochs over the train split, resumable from a saved position and passing over settled ones."""

from looprl.envs.types import Example
from looprl.orchestrator.example_order import ExampleOrder

EXAMPLES = [Example(id=str(i), payload={"prompt_messages": []}) for i in range(5)]


def test_each_epoch_is_a_permutation_and_epochs_differ():
    order = ExampleOrder(EXAMPLES, seed=1)
    first = [order.draw().example.id for _ in range(5)]
    second = [order.draw().example.id for _ in range(5)]
    assert sorted(first) == sorted(second) == [e.id for e in EXAMPLES]
    assert first != second and order.state() == {"epoch": 1, "position": 5}


def test_a_restored_order_continues_where_the_saved_one_was():
    order = ExampleOrder(EXAMPLES, seed=3)
    [order.draw() for _ in range(7)]
    restored = ExampleOrder(EXAMPLES, seed=3, state=order.state())
    assert [restored.draw().example.id for _ in range(9)] == [order.draw().example.id for _ in range(9)]


def test_a_resumed_order_passes_over_positions_already_done():
    order = ExampleOrder(EXAMPLES, seed=5)
    draws = [order.draw() for _ in range(8)]
    resumed = ExampleOrder(EXAMPLES, seed=5, state={"epoch": 0, "position": 2}, done={(0, 3), (1, 0)})
    again = [resumed.draw() for _ in range(4)]
    assert [(d.epoch, d.position) for d in again] == [(0, 2), (0, 4), (1, 1), (1, 2)]
    assert [d.example for d in again] == [draws[2].example, draws[4].example, draws[6].example, draws[7].example]
