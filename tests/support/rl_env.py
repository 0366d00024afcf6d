"""A single-turn env whose reward varies even for a random-weight model (distinct characters in the
reply), so RL tests on the tiny model get non-zero advantages; one whose groups never have signal (a
collapse from the first step); one whose sandbox is down (every rollout fails); writers for their data,
and one for the config of a tiny `looprl rl` run on them."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, RolloutFailure
from looprl.rewards import extract_completion_text


class CharsEnv(BaseEnv):
    max_turns = 1

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None):
        return JsonlDataset(base_dir / f"{split}.jsonl", max_examples=max_examples)

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"chars": len(set(extract_completion_text(rollout.messages))) / 10}


class LevelEnv(CharsEnv):
    """Every reply to an example gets that example's `level` (`write_levels`): no group ever has signal, while
    the rewards differ between examples, as for a policy that answers every question alike."""

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"level": float(rollout.example_args["level"])}


class LevelCharsEnv(CharsEnv):
    """An example's `level` plus `CharsEnv`'s reward: sampled greedily every group is alike (a collapse) while the
    rewards differ between examples; sampled hotter, its groups have signal again."""

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        return {"level": float(rollout.example_args["level"]), **await super().compute_reward(rollout)}


class RisingEnv(CharsEnv):
    """`LevelEnv` until the env has scored `RISES_AFTER` rollouts, then 1 for every reply: a policy that answers
    alike (no group with signal) and learns the task later, as large_number's seeds that gave up and then learnt."""

    scored = 0
    """Rollouts this worker has scored (one worker: the whole run's)."""

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        RisingEnv.scored += 1
        return {"level": 1.0 if RisingEnv.scored > RISES_AFTER else float(rollout.example_args["level"])}


RISES_AFTER = 72
"""`RisingEnv`'s rollouts before it gives every reply 1: 9 steps of 8 (a margin over the ~62 that may be scored before
step 6 ends: groups started ahead, and those dropped after a rollback drawn again)."""


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


def write_levels(base_dir: Path, n: int = 6, level: Callable[[int], float] = lambda i: i % 2) -> Path:
    """`LevelEnv`'s data: example i's level is `level(i)` (by default i % 2)."""
    base_dir.mkdir(parents=True, exist_ok=True)
    for split in ("train", "eval"):
        lines = [json.dumps({"prompt_messages": [{"role": "user", "content": f"is {i} odd?"}], "level": level(i)})
                 for i in range(n)]
        (base_dir / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    return base_dir


def _merged(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def write_rl_config(path: Path, *, model: Path, data: Path, run: Path, max_steps: int,
                    overrides: dict[str, Any] | None = None) -> Path:
    """A `looprl rl` config for a tiny, fast run of `CharsEnv`: 2 groups of 4 per step, 6-token replies;
    `overrides` (nested tables, merged key by key) gives each test what it is about."""
    base = {"output_dir": str(run), "max_steps": max_steps, "model": {"name": str(model)},
            "env": {"source": "tests/support/rl_env.py:CharsEnv", "base_dir": str(data)},
            "orchestrator": {"batch_size": 8, "group_size": 4, "sampling": {"max_tokens": 6}},
            "trainer": {"optim": {"lr": 1e-3}}}
    path.write_text(tomli_w.dumps(_merged(base, overrides or {})))
    return path
