"""The learning benchmark's tasks score what their prompts ask for (`bench/learning.py` gives TRL the same `score`)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def example(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_env", ROOT / "examples" / name / "env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("reply,correct,shape", [
    ("37 + 48 = 85", 1.0, 1.0),
    (" 37+48=85.\n", 1.0, 1.0),
    ("37 + 48 = 86", 0.0, 1.0),  # the shape asked for, the wrong sum
    ("85", 1.0, 0.0),  # the sum alone is not the equation asked for
    ("48 + 37 = 85", 1.0, 0.0),  # not the question's operands
    ("The sum is 37 + 48 = 85", 1.0, 0.0),
    ("37 + 48 = 85 and more", 1.0, 0.0),  # the last number counts for the sum
])
def test_two_digit_rewards_the_sum_and_the_equation(reply, correct, shape):
    assert example("two_digit").score(reply, {"answer": 85, "operands": [37, 48]}) == {"correct": correct,
                                                                                       "format": shape}


def test_two_digit_examples_carry_what_the_reward_reads():
    import asyncio

    env = example("two_digit").TwoDigitEnv()
    rows = [e.payload for e in asyncio.run(env.create_dataset("train", ROOT))]
    assert len(rows) == 400 and all(sum(r["operands"]) == r["answer"] for r in rows)
    assert {tuple(r["operands"]) for r in rows}.isdisjoint(
        {tuple(e.payload["operands"]) for e in asyncio.run(env.create_dataset("eval", ROOT))})



@pytest.mark.parametrize("reply,correct", [
    ("No", 1.0),
    ("no.", 1.0),
    ("No, 32 is not a large number.", 1.0),
    ("32 is not large, so no.", 1.0),
    ("Yes", 0.0),
    ("Yes, no doubt.", 0.0),  # the first yes or no is the answer
    ("Nobody knows.", 0.0),  # a word, not part of one
    ("", 0.0),
])
def test_large_number_rewards_the_first_yes_or_no(reply, correct):
    assert example("large_number").score(reply, {"answer": "no"}) == {"correct": correct}


def test_large_number_asks_about_as_many_yes_as_no():
    import asyncio

    env = example("large_number").LargeNumberEnv()
    rows = [e.payload for e in asyncio.run(env.create_dataset("train", ROOT))]
    held_out = [e.payload for e in asyncio.run(env.create_dataset("eval", ROOT))]
    assert len(rows) == 78 and len(held_out) == 20
    assert 0.4 < sum(r["answer"] == "yes" for r in rows) / len(rows) < 0.6
    for r in rows + held_out:
        number = int(r["prompt_messages"][-1]["content"].split()[1])
        assert r["answer"] == ("yes" if number > 50 else "no")
    assert {r["prompt_messages"][-1]["content"] for r in rows}.isdisjoint(
        r["prompt_messages"][-1]["content"] for r in held_out)


@pytest.mark.parametrize("reply,correct", [
    ("Mango", 1.0),
    (" \"apple\".\n", 1.0),
    ("forget-me-not", 1.0),
    ("Apple is a fruit.", 0.0),
    ("Sure! Mango", 0.0),
    ("Red apple", 0.0),
    ("42", 0.0),
    ("", 0.0),
])
def test_one_word_rewards_a_single_word_alone(reply, correct):
    assert example("one_word").score(reply, {}) == {"correct": correct}


def test_one_word_holds_out_distinct_prompts():
    import asyncio

    env = example("one_word").OneWordEnv()
    rows = [e.payload["prompt_messages"][-1]["content"] for e in asyncio.run(env.create_dataset("train", ROOT))]
    held_out = [e.payload["prompt_messages"][-1]["content"] for e in asyncio.run(env.create_dataset("eval", ROOT))]
    assert len(rows) == 80 and len(held_out) == 20 and len(set(rows)) == 80
    assert set(rows).isdisjoint(held_out)


@pytest.mark.parametrize("task,right_reply,example_args", [
    ("demo", "7", {"answer": 7}),
    ("two_digit", "37 + 48 = 85", {"answer": 85, "operands": [37, 48]}),
    ("large_number", "No", {"answer": "no"}),
    ("one_word", "Mango", {}),
])
def test_solved_reward_is_a_right_replys_total(task, right_reply, example_args):
    """Each task's `orchestrator.collapse.solved_reward` is what a right reply scores, weighed as its rl.toml weighs
    the components: the collapse watch counts groups at it as solved, and bench/learning.py's levels are its shares."""
    import tomllib

    orchestrator = tomllib.loads((ROOT / "examples" / task / "rl.toml").read_text())["orchestrator"]
    weights = orchestrator.get("reward_weights", {})
    scored = example(task).score(right_reply, example_args)
    assert sum(weights.get(name, 1.0) * value for name, value in scored.items()) == orchestrator["collapse"][
        "solved_reward"]
