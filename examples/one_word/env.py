"""Format following: name a thing of a category in one word, and nothing else.

Each prompt asks "Name a fruit. Reply with one word only, nothing else." (or another of four phrasings)
about one of 25 categories; the reward (`correct`) is 1 when the whole reply, stripped of spaces,
quotes and a final period, is a single word of letters ("Mango", "apple."); "Apple is a fruit.",
"Sure! Mango" or "Red apple" score 0, and what the word is does not matter. It is the learning
benchmark's task of another shape than the arithmetic and yes/no ones (`bench/learning.py --tasks
one_word`): nothing has to be known or computed, what has to be learnt is the form of the reply
(SmolLM2-135M-Instruct tends to answer in a sentence), so the signal comes from the length of replies.

The examples are drawn in code (seeded), no data files: 80 prompts to train on, 20 held out.
"""

import random
import re
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit
from looprl.rewards import extract_completion_text

CATEGORIES = ["fruit", "animal", "colour", "country", "city", "vegetable", "tree", "flower", "bird", "fish",
              "drink", "sport", "instrument", "tool", "metal", "planet", "insect", "vehicle", "game",
              "language", "dessert", "spice", "fabric", "gemstone", "profession"]
PHRASINGS = ("Name a {}. Reply with one word only, nothing else.", "Give me one {}. Answer in a single word.",
             "Which {} do you like? One word, no sentence.", "Say a {} in one word and nothing else.")
_ONE_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")


def prompts(split: DatasetSplit) -> list[str]:
    """The split's prompts: every category in every phrasing, shuffled once, the first 20 held out for eval."""
    every = [p.format(c) for c in CATEGORIES for p in PHRASINGS]
    drawn = random.Random(0).sample(every, len(every))
    return drawn[:20] if split == "eval" else drawn[20:]


class OneWordEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        payloads = ({"prompt_messages": [{"role": "user", "content": p}]} for p in prompts(split))
        return Dataset(payloads, max_examples=max_examples, source=f"one_word/{split}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward of a reply (also used by `bench/learning.py` for TRL's reward function)."""
    return {"correct": float(_ONE_WORD.fullmatch(reply.strip(" \t\n\"'*`.!")) is not None)}
