"""Group rewards: siblings are ranked against each other, with per-rollout log lines."""

import logging
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset
from looprl.envs.logging import rollout_context
from looprl.rewards import extract_completion_text

logger = logging.getLogger(__name__)


class GroupJudgeEnv(BaseEnv):
    """Rewards sentences that mention the topic, and (group-relative) the shortest of the group."""

    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_group_rewards(self, rollouts: list[BaseRollout]) -> dict[str, dict[str, float]]:
        logger.info("scoring group of %d", len(rollouts))  # attributed to every rollout of the group
        lengths = {r.rollout_id: len(extract_completion_text(r.messages)) for r in rollouts}
        shortest = min(lengths.values())
        results = {}
        for r in rollouts:
            with rollout_context(r.rollout_id):
                topic = r.example_args["topic"].split()[-1]
                on_topic = topic.lower() in extract_completion_text(r.messages).lower()
                logger.info("length %d (shortest %d), mentions %r: %s", lengths[r.rollout_id], shortest, topic,
                            on_topic)
                results[r.rollout_id] = {"on_topic": float(on_topic),
                                         "shortest": float(lengths[r.rollout_id] == shortest)}
        return results
