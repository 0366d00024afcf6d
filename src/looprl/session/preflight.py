"""Cheap checks before anything expensive starts: the env imports, constructs and yields its first rows.

`looprl rl`, `eval` and `validate` run these in their own process before starting an inference
engine (seconds to minutes), so a typo in the env spec or a malformed dataset line is one line on
stderr at once (`data/train.jsonl:3: invalid JSON ...`), not after the engine's start-up.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NamedTuple

from looprl.envs.dataset import Dataset
from looprl.envs.environment import Environment
from looprl.envs.types import DatasetSplit, Example
from looprl.envserver.loading import default_base_dir, env_name, instantiate, load_env_class
from looprl.errors import UserError


async def first_examples(env: Environment, split: DatasetSplit, base_dir: Path, max_examples: int) -> list[Example]:
    """What `create_dataset(split, base_dir, max_examples=...)` returns (an env that ignores
    `max_examples` returns more); a `UserError` for a dataset that fails to load or is empty."""
    name = type(env).__name__
    try:
        dataset = Dataset(await env.create_dataset(split, base_dir, max_examples=max_examples),
                          source=f"{split} dataset")
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"{name}.create_dataset({split!r}) raised {type(e).__name__}: {e}") from e
    if not len(dataset):
        raise UserError(f"{name}.create_dataset({split!r}) returned no examples (base_dir={base_dir})")
    return list(dataset)


class CheckedEnv(NamedTuple):
    examples: list[Example]
    """The first rows of the split."""
    reward_weights: dict[str, float]
    """The weights the env declares (`Environment.reward_weights`), for the run's own to override."""


def check_env(spec: str, env_args: dict[str, Any], split: DatasetSplit, base_dir: Path | None,
              max_examples: int) -> CheckedEnv:
    """Import the env, construct it here and load the first rows of `split` (then close it)."""
    cls = load_env_class(spec)

    async def first_rows() -> CheckedEnv:
        env = instantiate(cls, env_args)
        try:
            examples = await first_examples(env, split, base_dir or default_base_dir(spec), max_examples)
            return CheckedEnv(examples[:max_examples], dict(env.reward_weights))
        finally:
            await env.aclose()

    try:
        return asyncio.run(first_rows())
    except UserError as e:
        raise UserError(f"{env_name(spec)}: {e}") from e
