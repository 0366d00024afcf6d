"""Two-digit additions: a task the CPU demo's model does not master in ten minutes, for `bench/learning.py`.

The demo (`examples/demo`, single digits) saturates within about three minutes with looprl and with
TRL alike, so it cannot show one learning twice as fast as the other. Sums of two two-digit numbers
(carries included) are much harder for SmolLM2-135M; two components (weighted in `rl.toml`, maximum
1.5):

- `correct`: 1 when the reply's last number is the sum ("85", "37 + 48 = 85" count; "85 or 86" does not);
- `format`: 1 when the reply is the number alone (an optional final period), the shape asked for.
"""

import re
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.rewards import extract_completion_text

_NUMBERS = re.compile(r"-?\d+")
_NUMBER_ALONE = re.compile(r"\s*-?\d+\.?\s*")


class TwoDigitEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args["answer"])


def score(reply: str, answer: int) -> dict[str, float]:
    """The reward components of a reply (also used by `bench/learning.py` for TRL's reward functions)."""
    numbers = _NUMBERS.findall(reply)
    return {"correct": float(bool(numbers) and int(numbers[-1]) == answer),
            "format": float(_NUMBER_ALONE.fullmatch(reply) is not None)}
