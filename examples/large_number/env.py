"""Is a number large (greater than 50)? An easy yes/no task on which the policy stops exploring.

Each prompt asks "Is 73 a large number (greater than 50)? Answer yes or no." about a number from 1
to 99 (50 left out, so about half the answers are yes); the reward (`correct`) is 1 when the reply's
first "yes" or "no" is the right one. SmolLM2-135M-Instruct answers yes or no from the first
steps, and rarely because of the number. Within about ten steps its policy gives one answer to
every question ("Yes" with seed 0, "No, 73 is not a large number ..." with seed 1): right half the
time, and all eight replies of every group alike, so every group's rewards are equal, its
advantages all zero, and it teaches nothing. At 32 rollouts a step (4 prompts, the default until
2026-12-04; 40 steps, no collapse recovery), 4 of 4 groups carried no signal at every step from 7 to
40 but two (seed 0) and from 8 to 40 but three (seed 1), the step's reward swinging between 0 and 1
with the prompts drawn; eval reward 0.55 and 0.45 at step 40. At the default 64 most seeds learn it
(docs/benchmarks.md, "The defaults").
docs/training.md ("Collapse") has the warning and the remedies; `bench/ablation.py --task
large_number --window 3` measures them.

The examples are drawn in code (seeded), no data files: 78 numbers to train on, 20 held out.
"""

import random
import re
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit
from looprl.rewards import extract_completion_text

THRESHOLD = 50
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def numbers(split: DatasetSplit) -> list[int]:
    """The split's numbers: 1-99 but the threshold, shuffled once, the first 20 held out for eval."""
    drawn = random.Random(0).sample([n for n in range(1, 100) if n != THRESHOLD], 98)
    return drawn[:20] if split == "eval" else drawn[20:]


class LargeNumberEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        question = "Is {} a large number (greater than {})? Answer yes or no."
        payloads = ({"prompt_messages": [{"role": "user", "content": question.format(n, THRESHOLD)}],
                     "answer": "yes" if n > THRESHOLD else "no"}
                    for n in numbers(split))
        return Dataset(payloads, max_examples=max_examples, source=f"large_number/{split}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward of a reply (also used by `bench/learning.py` for TRL's reward function)."""
    first = _YES_NO.search(reply)
    return {"correct": float(first is not None and first.group().lower() == example_args["answer"])}
