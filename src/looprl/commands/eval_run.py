"""`looprl eval`'s engine: rollouts of an environment against a model, recorded to a run directory.

Runs the env in `env_workers` worker processes (`EnvServerHost`, logs under
`logs/envs/{split}/{env_name}/`), serves the gateway on this event loop, runs `r`
sibling rollouts for each of the first `n` examples with at most `concurrency` rollouts in flight,
writes every finished group to the run store, and returns the run summary. Nothing is lost on
failure: groups already finished are in the store, and the run is marked `failed` or `interrupted`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from looprl.config import SamplingParams
from looprl.envserver.loading import default_base_dir, env_name, load_env_class
from looprl.envs.types import DatasetSplit, RolloutResult
from looprl.envserver.capture import LogLimits
from looprl.envserver.host import EnvServerHost
from looprl.errors import UserError
from looprl.gateway.app import Gateway
from looprl.orchestrator.groups import new_id, rollout_group
from looprl.orchestrator.rewards import total_reward
from looprl.orchestrator.summary import summarize
from looprl.paths import db_path
from looprl.store.records import RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter


class EvalConfig(BaseModel):
    """Everything `looprl eval` needs; built from its flags."""

    env: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    base_dir: Path | None = None
    split: DatasetSplit = "eval"
    num_examples: int = Field(5, ge=1)
    rollouts_per_example: int = Field(3, ge=1)
    concurrency: int = Field(32, ge=1)
    env_workers: int = Field(1, ge=1)
    model: str
    base_url: str
    api_key: str | None = None
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    context_budget: int | None = None
    timeout_s: float | None = None
    output: Path
    overwrite: bool = False
    log_level: str = "INFO"
    log_limits: LogLimits = Field(default_factory=LogLimits)


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


def prepare_output(cfg: EvalConfig) -> None:
    if db_path(cfg.output).exists():
        if not cfg.overwrite:
            raise UserError(f"{cfg.output} already holds a run; choose another --output or pass --overwrite")
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_path(cfg.output)) + suffix).unlink(missing_ok=True)


async def run_eval(cfg: EvalConfig, on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the evaluation; `on_progress(done, total)` is called as rollouts finish."""
    load_env_class(cfg.env)  # a bad spec fails here, with its own message, before any worker starts
    base_dir = cfg.base_dir or default_base_dir(cfg.env)
    prepare_output(cfg)
    host = EnvServerHost(cfg.env, cfg.output, env_args=cfg.env_args, splits=[cfg.split], workers=cfg.env_workers,
                         env_level=cfg.log_level, log_limits=cfg.log_limits)
    await host.start()
    writer = RunStoreWriter(cfg.output)
    run_id = cfg.output.resolve().name
    name = env_name(cfg.env)
    writer.start_run(RunInfo(run_id=run_id, kind="eval", env=cfg.env, env_name=name, model=cfg.model,
                             config=cfg.model_dump(mode="json"), created_at=time.time()))
    results: list[RolloutResult] = []
    started = time.time()
    status = "failed"
    try:
        dataset = await host.create_dataset(cfg.split, base_dir, cfg.num_examples)
        examples = list(dataset)[: cfg.num_examples]
        if not examples:
            raise UserError(f"{name}.create_dataset({cfg.split!r}) returned no examples (base_dir={base_dir})")
        total = len(examples) * cfg.rollouts_per_example
        if on_progress:
            on_progress(0, total)
        gateway = Gateway(cfg.base_url, cfg.model, cfg.sampling, cfg.context_budget, cfg.api_key)
        slots = _Slots(cfg.concurrency)
        async with gateway.serve() as url_template:

            async def one_group(example) -> None:
                await slots.acquire(cfg.rollouts_per_example)
                try:
                    pairs = await rollout_group(host, gateway, url_template, example, cfg.split,
                                            cfg.rollouts_per_example, cfg.model, cfg.timeout_s)
                finally:
                    await slots.release(cfg.rollouts_per_example)
                records = [RolloutRecord.from_result(
                    r, run_id=run_id, env_name=name, step=0, reward=total_reward(r.rewards) if r.scored else None,
                    advantage=None, model_calls=calls) for r, calls in pairs]
                await asyncio.to_thread(writer.write_rollouts, records)
                results.extend(records)
                if on_progress:
                    on_progress(len(results), total)

            await asyncio.gather(*(one_group(e) for e in examples))
        status = "completed"
    except (KeyboardInterrupt, asyncio.CancelledError):
        status = "interrupted"
        raise
    finally:
        summary = summarize(results, time.time() - started)
        writer.finish_run(run_id, status, summary)
        writer.close()
        await host.aclose()
    return summary


__all__ = ["EvalConfig", "run_eval", "new_id"]
