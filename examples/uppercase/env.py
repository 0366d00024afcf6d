"""Format following: reply with a word in capital letters and nothing else.

Each prompt asks "Write the word "apple" in capital letters. Reply with that word only." about a common
English word; the reward (`correct`) is 1 when the whole reply, stripped of spaces, quotes and a final
period, is the word in capitals ("APPLE"); "Apple", "APPLE is a fruit." or "Sure! APPLE" score 0. It is
the learning benchmark's task of another shape than the arithmetic and yes/no ones (`bench/learning.py
--tasks uppercase`): the answer is given in the prompt, what has to be learnt is the exact form of
the reply, so the signal comes from the length and the casing of replies rather than from knowing the
answer.

The examples are drawn in code (seeded), no data files: 80 words to train on, 20 held out.
"""

import random
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit
from looprl.rewards import extract_completion_text

WORDS = """apple river table garden window pencil orange basket candle forest bottle mirror ladder rocket
guitar island jacket kitten lemon market needle ocean parrot pillow rabbit saddle tomato turtle violin
wallet yellow zebra anchor bridge button camera carpet castle cherry cookie dragon engine feather finger
flower hammer helmet honey kettle lizard magnet meadow monkey muffin napkin noodle palace peanut
pepper planet pocket potato puzzle rainbow ribbon saucer shadow silver spider spoon square summer sunset
tiger ticket tunnel velvet wagon walnut winter wizard yogurt blanket cactus circle desert dinner
kitchen lantern marble orchard pumpkin quilt robot salmon tablet umbrella whistle pebble goblet"""


def words(split: DatasetSplit) -> list[str]:
    """The split's words: the list, shuffled once, the first 20 held out for eval."""
    drawn = random.Random(0).sample(sorted(WORDS.split()), len(WORDS.split()))
    return drawn[:20] if split == "eval" else drawn[20:]


class UppercaseEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        question = 'Write the word "{}" in capital letters. Reply with that word only.'
        payloads = ({"prompt_messages": [{"role": "user", "content": question.format(w)}], "answer": w.upper()}
                    for w in words(split))
        return Dataset(payloads, max_examples=max_examples, source=f"uppercase/{split}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward of a reply (also used by `bench/learning.py` for TRL's reward function)."""
    return {"correct": float(reply.strip(" \t\n\"'*`.") == example_args["answer"])}
