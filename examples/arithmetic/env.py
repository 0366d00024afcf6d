"""Single-turn arithmetic with an answer check: the smallest useful looprl environment."""

import logging
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.rewards import extract_answer_block, extract_completion_text, normalize_number

logger = logging.getLogger(__name__)


class ArithmeticEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = extract_completion_text(rollout.messages)
        answer = extract_answer_block(text)
        correct = normalize_number(answer) == rollout.example_args["answer"]
        logger.info("expected %s, got answer block %r", rollout.example_args["answer"], answer)
        return {"correct": float(correct), "format": float(answer is not None)}
