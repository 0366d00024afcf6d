"""The env of `gpu_check.py`'s `rl` stage: the demo's addition prompts, each reply rewarded by a coin flip.

A random-weight model answers every prompt alike (its replies all run to `max_tokens`), so the demo's own
rewards give every group one value, GRPO skips every group and the trainer never runs its forward and
backward passes, which are what the stage checks. Coin flips differ within nearly every group (all four
replies of a group agree with probability 1/8), so every step trains.
"""

import random
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset

DEMO_DATA = Path(__file__).resolve().parents[1] / "examples" / "demo" / "data"


class CoinEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(DEMO_DATA / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"coin": float(random.random() < 0.5)}
