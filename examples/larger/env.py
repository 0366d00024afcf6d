"""Which of two numbers is larger: an easy binary task on which a policy can stop exploring.

Each prompt names two different two-digit numbers, the larger one first half the time; the reward
(`correct`) is 1 when the reply's first number is the larger one. SmolLM2-135M already answers with
one of the two numbers most of the time, so the task looks easy, and it shows a failure of
group-relative RL that the addition tasks hide: a policy that learns to answer with the question's
first number is right half the time, whatever it is asked. Once every reply of a group starts with
the same number, the group's rewards are all equal, its advantages all zero, and it teaches nothing;
when that holds for every group the run goes on stepping while it trains on nothing, and its reward
swings with the prompts drawn (docs/training.md, "Collapse"). `bench/ablation.py --task larger`
measures the remedies on it.

The examples are drawn in code (seeded), no data files: 400 to train on, 50 held out.
"""

import random
import re
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit
from looprl.rewards import extract_completion_text

_NUMBER = re.compile(r"-?\d+")


def pairs(split: DatasetSplit) -> list[tuple[int, int]]:
    """The split's (first, second): 450 ordered pairs of different two-digit numbers drawn once, the
    first 50 held out for eval; the larger one comes first in about half of them."""
    drawn = random.Random(0).sample([(a, b) for a in range(10, 100) for b in range(10, 100) if a != b], 450)
    return drawn[:50] if split == "eval" else drawn[50:]


class LargerEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        payloads = ({"prompt_messages": [{"role": "user", "content": f"Which number is larger, {a} or {b}?"}],
                     "answer": max(a, b)}
                    for a, b in pairs(split))
        return Dataset(payloads, max_examples=max_examples, source=f"larger/{split}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward of a reply (also used by `bench/learning.py` for TRL's reward function)."""
    first = _NUMBER.search(reply)
    return {"correct": float(first is not None and int(first.group()) == example_args["answer"])}
