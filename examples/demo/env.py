"""The CPU demo: single-digit additions that SmolLM2-135M gets wrong and wordy, learnable in minutes.

The bundled model answers "What is 3 + 5?" with a paragraph: measured on 32 samples at temperature 1,
the first number of the reply is the sum 3 % of the time. Two reward components (weighted in
`rl.toml`) give GRPO a dense signal:

- `correct`: 1 when the reply's answer is the sum: its first number, after an optional restatement of
  the question ("3 + 5 = 8", "3 + 5 is 8" and "8" all count; "3 + 5 is 9" does not);
- `brief`: 1 when the reply is at most 6 words (shapes the model towards direct answers).

A first version rewarded "the reply starts with a number": the model learned within 9 steps to
start every reply by restating "3 + 5 ...", which that reward could not tell from an answer.
"""

import re
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.rewards import extract_completion_text

_NUMBER = re.compile(r"-?\d+")
_RESTATED = re.compile(r"^\s*-?\d+\s*\+\s*-?\d+")
BRIEF_WORDS = 6


class AdditionEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward components of a reply (also used by `bench/learning.py` for TRL's reward functions)."""
    restated = _RESTATED.match(reply)
    first = _NUMBER.search(reply, restated.end() if restated else 0)
    correct = first is not None and int(first.group()) == example_args["answer"]
    return {"correct": float(correct), "brief": float(len(reply.split()) <= BRIEF_WORDS)}
