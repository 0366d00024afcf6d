"""Two-digit additions: a task the CPU demo's model does not master in ten minutes, for `bench/learning.py`.

The demo (`examples/demo`, single digits) saturates within about three minutes with looprl and with
TRL alike, so it cannot show one learning twice as fast as the other. Sums of two two-digit numbers
(carries included) are much harder for SmolLM2-135M; two components (weighted in `rl.toml`, maximum
1.5):

- `correct`: 1 when the reply's last number is the sum ("37 + 48 = 85", "85"; "85 or 86" does not count);
- `format`: 1 when the reply is the equation asked for, `37 + 48 = 85` with the question's two numbers
  (an optional final period; the sum need not be right).

Why the equation: the model adds far more reliably when it writes the operands out first. An earlier
version asked for the number alone, which made the task bimodal: each run settled early into one of
two replies (the bare number, format 1 but mostly wrong; or a sentence with the equation, right more
often but format 0) and stayed there, so three seeds measured which mode each fell into, not how
fast either system learns. Asking for the equation makes the shape and the arithmetic pull the same way.

The examples are drawn in code (seeded), no data files: 400 to train on, 50 held out.
"""

import random
import re
from pathlib import Path
from typing import Any

from looprl.envs import BaseEnv, BaseRollout, Dataset, DatasetSplit
from looprl.rewards import extract_completion_text

SYSTEM = "Reply with the equation and its result, like: 12 + 30 = 42"
_NUMBERS = re.compile(r"-?\d+")
_EQUATION = re.compile(r"\s*(?P<a>\d+)\s*\+\s*(?P<b>\d+)\s*=\s*-?\d+\.?\s*")


def pairs(split: DatasetSplit) -> list[tuple[int, int]]:
    """The split's (a, b): 450 distinct two-digit pairs drawn once, the first 50 held out for eval."""
    drawn = random.Random(0).sample([(a, b) for a in range(10, 100) for b in range(10, 100)], 450)
    return drawn[:50] if split == "eval" else drawn[50:]


class TwoDigitEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        payloads = ({"prompt_messages": [{"role": "system", "content": SYSTEM},
                                         {"role": "user", "content": f"What is {a} + {b}?"}],
                     "answer": a + b, "operands": [a, b]}
                    for a, b in pairs(split))
        return Dataset(payloads, max_examples=max_examples, source=f"two_digit/{split}")

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return score(extract_completion_text(rollout.messages), rollout.example_args)


def score(reply: str, example_args: dict[str, Any]) -> dict[str, float]:
    """The reward components of a reply (also used by `bench/learning.py` for TRL's reward functions)."""
    numbers = _NUMBERS.findall(reply)
    equation = _EQUATION.fullmatch(reply)
    operands = [int(equation["a"]), int(equation["b"])] if equation else None
    return {"correct": float(bool(numbers) and int(numbers[-1]) == example_args["answer"]),
            "format": float(operands == example_args["operands"])}
