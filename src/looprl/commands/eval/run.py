"""`looprl eval`'s engine: rollouts of an environment against a model, recorded to a run directory.

A `RolloutSession` on the run directory (env servers for the split, gateway, store, reward totals
with `reward_weights`) runs `r` sibling rollouts for each of the first `n` examples with at most
`concurrency` rollouts in flight, writes every finished group to the run store, and returns the
run summary. Nothing is lost on failure: groups already finished are in the store, and the run is
marked `failed` or `interrupted` (a later `--overwrite` replaces it).

The batch that reward components are zero-filled across is the whole split, known only once every
group is in: the rollouts are written as their groups finish and their `zero_filled` names are
stored at the end (also when the run fails or is interrupted, for the rollouts it has).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr

from looprl.commands.eval.summary import summarize
from looprl.config import EnvRuntimeConfig, SamplingParams, TrackersConfig
from looprl.envs.types import DatasetSplit, Example
from looprl.errors import UserError
from looprl.gateway.app import Gateway
from looprl.paths import db_path, logs_dir
from looprl.session import RolloutSession
from looprl.session.rewards import mark_zero_filled
from looprl.store.records import RolloutRecord
from looprl.trackers import TrackedRun, open_trackers


class EvalRunConfig(BaseModel):
    """Everything `looprl eval` needs; built from its flags."""

    env: EnvRuntimeConfig
    """The env, its workers (`--env-workers`) and their logging (`--log-level`)."""
    split: DatasetSplit = "eval"
    num_examples: int = Field(5, ge=1)
    rollouts_per_example: int = Field(3, ge=1)
    concurrency: int = Field(32, ge=1)
    model: str
    base_url: str
    api_key: SecretStr | None = None
    """Sent to `base_url` as `Authorization: Bearer`; every dump of this config writes `**********`."""
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    context_budget: int | None = None
    timeout_s: float | None = None
    reward_weights: dict[str, float] = Field(default_factory=dict)
    output: Path
    overwrite: bool = False


class _Slots:
    """At most `capacity` rollouts in flight; a group takes as many slots as it has rollouts."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.used = capacity, 0
        self._cond = asyncio.Condition()

    async def acquire(self, n: int) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.used == 0 or self.used + n <= self.capacity)
            self.used += n

    async def release(self, n: int) -> None:
        async with self._cond:
            self.used -= n
            self._cond.notify_all()


def prepare_output(output: Path, overwrite: bool) -> None:
    """Refuse an `output` that already holds a run, unless `overwrite`: then remove that run (its
    store and its logs), so nothing of the new run is appended to the old one."""
    if not db_path(output).exists():
        return
    if not overwrite:
        raise UserError(f"{output} already holds a run; choose another --output or pass --overwrite")
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path(output)) + suffix).unlink(missing_ok=True)
    shutil.rmtree(logs_dir(output), ignore_errors=True)


async def run_eval(cfg: EvalRunConfig, on_group: Callable[[list[RolloutRecord]], None] | None = None) -> dict[str, Any]:
    """Run the evaluation; `on_group(records)` is called as each group's rollouts are stored."""
    gateway = Gateway(cfg.base_url, cfg.model, cfg.sampling, cfg.context_budget,
                      cfg.api_key.get_secret_value() if cfg.api_key else None)
    session = RolloutSession(cfg.output, kind="eval", env=cfg.env, gateway=gateway, config=cfg.model_dump(mode="json"),
                             splits=[cfg.split], timeout_s=cfg.timeout_s, reward_weights=cfg.reward_weights)
    records: list[RolloutRecord] = []
    started = time.time()
    async with session:
        try:
            examples = await session.dataset(cfg.split, cfg.num_examples)
            if not examples:
                raise UserError(f"{session.env_name}.create_dataset({cfg.split!r}) returned no examples "
                                f"(base_dir={session.base_dir})")
            slots = _Slots(cfg.concurrency)

            async def one_group(example: Example) -> None:
                await slots.acquire(cfg.rollouts_per_example)
                try:
                    group = await session.roll_out(example, cfg.split, cfg.rollouts_per_example,
                                                   seed_key=f"{cfg.split}/{example.id}")
                finally:
                    await slots.release(cfg.rollouts_per_example)
                done = [session.record(r, calls, step=0, reward=session.score(r)) for r, calls in group]
                await session.write(done)
                records.extend(done)
                if on_group:
                    on_group(done)

            await asyncio.gather(*(one_group(e) for e in examples))
        finally:
            mark_zero_filled(records)
            assert session.writer is not None  # set while the session is open
            session.writer.mark_zero_filled(records)
            session.summary = summarize(records, time.time() - started, cfg.reward_weights)
    return session.summary


def track_eval(trackers: TrackersConfig, cfg: EvalRunConfig, summary: dict[str, Any]) -> None:
    """Log the evaluation's config (the API key masked, as `SecretStr` dumps it) and results to `trackers`, as
    step 0."""
    run = TrackedRun(cfg.output.resolve().name, cfg.output, cfg.output.resolve().name, cfg.model_dump(mode="json"))
    metrics = {f"eval/{k}": v for k, v in summary["rewards"].items()}
    metrics |= {f"eval/{k}": summary[k] for k in ("rollouts", "scored", "failed", "wall_s", "rollouts_per_s")}
    opened = open_trackers(trackers, run)
    opened.log(0, metrics)
    opened.finish()
