"""A single-turn env whose reward varies even for a random-weight model (distinct characters in the
reply), so RL tests on the tiny model get non-zero advantages; one whose sandbox is down (every rollout
fails); and a writer for their data."""

import json
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, RolloutFailure
from looprl.rewards import extract_completion_text


class CharsEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"chars": len(set(extract_completion_text(rollout.messages))) / 10}


class DownEnv(CharsEnv):
    """Every rollout fails as its reward is computed: a sandbox service that stopped answering."""

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        raise RolloutFailure("sandbox_unavailable", "the sandbox service at 10.0.0.7 refused the connection")


def write_data(base_dir: Path, n: int = 6) -> Path:
    base_dir.mkdir(parents=True, exist_ok=True)
    for split in ("train", "eval"):
        lines = [json.dumps({"prompt_messages": [{"role": "user", "content": f"what is {i} plus two?"}]})
                 for i in range(n)]
        (base_dir / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return base_dir
