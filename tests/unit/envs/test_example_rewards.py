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
    ("77 is the larger number.", 1.0),
    ("77", 1.0),
    ("The number 77 is larger than the number 39.", 1.0),
    ("39 is smaller than 77.", 0.0),  # the first number is the answer
    ("39 is larger than 77.", 0.0),
    ("The larger one.", 0.0),
    ("", 0.0),
])
def test_larger_rewards_the_larger_number_first(reply, correct):
    assert example("larger").score(reply, {"answer": 77}) == {"correct": correct}


def test_larger_puts_the_larger_number_first_about_half_the_time():
    import asyncio

    env = example("larger").LargerEnv()
    rows = [e.payload for e in asyncio.run(env.create_dataset("train", ROOT))]
    firsts = [int(r["prompt_messages"][-1]["content"].split()[4]) for r in rows]
    assert len(rows) == 400 and 0.4 < sum(f == r["answer"] for f, r in zip(firsts, rows)) / 400 < 0.6
    held_out = {e.payload["prompt_messages"][-1]["content"] for e in asyncio.run(env.create_dataset("eval", ROOT))}
    assert held_out.isdisjoint(r["prompt_messages"][-1]["content"] for r in rows)
