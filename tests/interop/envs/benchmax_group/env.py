"""A benchmax group-scored env (as upstream's `group_env`): `compute_reward` returns None, and
`compute_group_rewards` ranks the group's answers by length. `mode` breaks the group hook on purpose:
"misaligned" leaves one rollout out, "duplicate" returns a key `compute_reward` also returned."""

import logging

from benchmax.envs import BaseEnv, Dataset, Example, canonical_example_id

logger = logging.getLogger(__name__)

QUESTIONS = ["Name a colour.", "Name an animal.", "Name a city."]


class ShortestAnswerEnv(BaseEnv):
    max_turns = 1

    def __init__(self, *, mode: str = "ok") -> None:
        super().__init__()
        self.mode = mode

    async def create_dataset(self, split, base_dir, *, max_examples=None):
        rows = [{"prompt_messages": [{"role": "user", "content": q}]} for q in QUESTIONS][:max_examples]
        return Dataset([Example(id=canonical_example_id(row), payload=row) for row in rows])

    async def compute_reward(self, rollout):
        return {"shortest": 0.0} if self.mode == "duplicate" else None

    async def compute_group_rewards(self, rollouts):
        lengths = {r.rollout_id: len(r.messages[-1].get("content") or "") for r in rollouts}
        logger.info("group answer lengths %s", sorted(lengths.values()))
        best = min(lengths.values())
        rewards = {rid: {"shortest": float(n == best), "length": float(n)} for rid, n in lengths.items()}
        if self.mode == "misaligned":
            rewards.pop(rollouts[0].rollout_id)
        return rewards
