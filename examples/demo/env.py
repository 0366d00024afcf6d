"""The CPU demo: single-digit additions that SmolLM2-135M gets wrong and wordy, learnable in minutes.

The bundled model answers "What is 3 + 5?" with a paragraph: measured on 32 samples at temperature 1,
the first number of the reply is the sum 3 % of the time, and the reply starts with a number 19 % of
the time. Two reward components give GRPO a dense signal and keep it honest:

- `number_first`: 1 when the reply starts with a number (shapes the model towards direct answers);
- `correct`: 1 when the first number in the reply is the sum.
"""

import re
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.rewards import extract_completion_text

_NUMBER = re.compile(r"-?\d+")


class AdditionEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args["answer"])


def score(reply: str, answer: int) -> dict[str, float]:
    """The reward components of a reply (also used by `bench/learning.py` for TRL's reward functions)."""
    first = _NUMBER.search(reply)
    correct = first is not None and int(first.group()) == answer
    return {"correct": float(correct), "number_first": float(first is not None and first.start() == 0)}
