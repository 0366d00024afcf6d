"""The CPU demo: single-digit additions that SmolLM2-135M gets wrong and wordy, learnable in minutes.

The bundled model answers "What is 3 + 5?" with a paragraph, and the right number comes first only a
few times in a hundred. Two reward components make the improvement visible early and keep it honest:

- `correct`: 1 when the first number in the reply is the sum;
- `brief`: 1 when the reply is just a number (an optional trailing period), shaping the model towards
  the short answers that make `correct` easy to check and cheap to sample.
"""

import re
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.rewards import extract_completion_text

_NUMBER = re.compile(r"-?\d+")
_JUST_A_NUMBER = re.compile(r"-?\d+\.?")


class AdditionEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        first = _NUMBER.search(text)
        correct = first is not None and int(first.group()) == rollout.example_args["answer"]
        return {"correct": float(correct), "brief": float(_JUST_A_NUMBER.fullmatch(text) is not None)}
