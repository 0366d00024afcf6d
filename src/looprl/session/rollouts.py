"""`RolloutSession`: env servers, gateway, store writer and reward totals for one run, as one context.

    async with RolloutSession(run_dir, kind="eval", env=EnvRuntimeConfig(source=spec), gateway=gateway,
                              config=cfg_json, splits=["eval"], reward_weights={"correct": 2.0}) as session:
        examples = await session.dataset("eval", max_examples=5)
        group = await session.roll_out(examples[0], "eval", size=4)   # [(RolloutResult, [ModelCall])]
        await session.write([session.record(r, calls, step=0, reward=session.score(r)) for r, calls in group])

Entering starts the env servers (env logs under `logs/envs/{split}/{env_name}/`), writes the run's
row and serves the gateway; leaving marks the run `completed`, `failed` (an exception) or
`interrupted` (Ctrl-C, cancellation) with `session.summary`, then closes the writer and the env
servers. Rollouts already written stay in the store whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from looprl.config import SamplingParams
from looprl.config.env_runtime import EnvRuntimeConfig
from looprl.envs.types import DatasetSplit, Example, RolloutResult
from looprl.envserver.host import EnvServerHost
from looprl.envserver.loading import default_base_dir, env_name
from looprl.gateway.app import Gateway
from looprl.session.groups import rollout_group
from looprl.session.rewards import rollout_reward
from looprl.store.records import ModelCall, RolloutRecord, RunInfo
from looprl.store.writer import RunStoreWriter

Group = list[tuple[RolloutResult, list[ModelCall]]]
"""One group of sibling rollouts, each with the model calls the gateway recorded for it."""


class RolloutSession:
    def __init__(self, run_dir: Path, *, kind: str, env: EnvRuntimeConfig, gateway: Gateway, config: dict[str, Any],
                 splits: Sequence[DatasetSplit], model: str | None = None, timeout_s: float | None = None,
                 reward_weights: Mapping[str, float] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = self.run_dir.resolve().name
        self.env_name = env_name(env.source)
        self.gateway, self.timeout_s = gateway, timeout_s
        self.reward_weights = dict(reward_weights or {})
        self.base_dir = env.base_dir or default_base_dir(env.source)
        self.run = RunInfo(run_id=self.run_id, kind=kind, env=env.source, env_name=self.env_name,
                           model=model or gateway.model, config=config, created_at=time.time())
        self.host = EnvServerHost(env, self.run_dir, splits=splits)
        self.writer: RunStoreWriter | None = None
        self.summary: dict[str, Any] = {}
        """Stored with the run's status when the session ends."""
        self.status = "running"
        self._stack = contextlib.AsyncExitStack()
        self._url_template = ""

    async def __aenter__(self) -> RolloutSession:
        await self.host.start()
        self._stack.push_async_callback(self.host.aclose)
        try:
            self.writer = RunStoreWriter(self.run_dir)
            self._stack.callback(self.writer.close)
            self.writer.start_run(self.run)
            self._url_template = await self._stack.enter_async_context(self.gateway.serve())
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        interrupted = exc_type is not None and issubclass(exc_type, (KeyboardInterrupt, asyncio.CancelledError))
        self.status = "completed" if exc_type is None else "interrupted" if interrupted else "failed"
        try:
            assert self.writer is not None
            self.writer.finish_run(self.run_id, self.status, self.summary)
        finally:
            await self._stack.aclose()

    async def dataset(self, split: DatasetSplit, max_examples: int | None = None) -> list[Example]:
        """The split's examples (the first `max_examples`), built by the env in its server."""
        dataset = await self.host.create_dataset(split, self.base_dir, max_examples)
        return list(dataset)[:max_examples]

    async def roll_out(self, example: Example, split: DatasetSplit, size: int, group_id: str | None = None,
                       sampling: SamplingParams | None = None, seed_key: str | None = None) -> Group:
        """`size` sibling rollouts of `example`, each with its recorded model calls; `group_id`: the group's id
        when the caller chose it; `sampling`: the group's own instead of the run's (collapse recovery's raised
        temperature); `seed_key`: what the group is in the run, so a run of the same config and seed draws the
        same sampling seeds for it (`rollout_group`)."""
        return await rollout_group(self.host, self.gateway, self._url_template, example, split, size,
                                   self.gateway.model, self.timeout_s, group_id, sampling, seed_key)

    def score(self, result: RolloutResult) -> float | None:
        """The rollout's total reward with the run's `reward_weights`; None for a failed rollout."""
        return rollout_reward(result, self.reward_weights)

    def record(self, result: RolloutResult, calls: list[ModelCall], step: int, reward: float | None,
               advantage: float | None = None) -> RolloutRecord:
        return RolloutRecord.from_result(result, run_id=self.run_id, env_name=self.env_name, step=step,
                                         reward=reward, advantage=advantage, model_calls=calls)

    async def write(self, records: Sequence[RolloutRecord]) -> None:
        """Store rollouts (off the event loop: SQLite writes block)."""
        assert self.writer is not None
        await asyncio.to_thread(self.writer.write_rollouts, records)
