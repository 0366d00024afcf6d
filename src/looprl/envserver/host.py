"""`EnvServerHost`: an environment served by worker processes, one env server per split.

It implements what `looprl.session.groups.EnvHost` asks of wherever env code runs (`start` / `create_dataset` /
`submit_group` / `aclose`; the tests' in-process stand-in is `tests/support/thread_host.py`).
It takes the env runtime config whole (workers load the env from its spec themselves) and writes the env logs of the run
directory: `logs/envs/{split}/{env_name}/env_server.log` and `env_worker_{id}.log`.

    runtime = EnvRuntimeConfig(source="examples/arithmetic/env.py:ArithmeticEnv", workers=4)
    host = EnvServerHost(runtime, run_dir, splits=("train", "eval"))
    await host.start()
    dataset = await host.create_dataset("train", base_dir, max_examples=None)
    results = await host.submit_group(request)   # routed to the server of request.split
    await host.aclose()
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from looprl.config.env_runtime import EnvRuntimeConfig
from looprl.envs.dataset import Dataset
from looprl.envs.types import DatasetSplit, GroupRequest, RolloutResult
from looprl.envserver.server import EnvServer
from looprl.errors import UserError


class EnvServerHost:
    def __init__(self, runtime: EnvRuntimeConfig, run_dir: Path, *,
                 splits: Sequence[DatasetSplit] = ("train", "eval")) -> None:
        self.servers: dict[str, EnvServer] = {split: EnvServer(runtime, split, run_dir)
                                              for split in dict.fromkeys(splits)}

    def _server(self, split: str) -> EnvServer:
        server = self.servers.get(split)
        if server is None:
            raise UserError(f"this env host serves the splits {sorted(self.servers)}, not {split!r}")
        return server

    async def start(self) -> None:
        results = await asyncio.gather(*(s.start() for s in self.servers.values()), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await self.aclose()
            raise errors[0]

    async def create_dataset(self, split: DatasetSplit, base_dir: Path, max_examples: int | None) -> Dataset:
        examples = await self._server(split).create_dataset(base_dir, max_examples)
        return Dataset(examples, source=f"{split} dataset")

    async def submit_group(self, request: GroupRequest) -> list[RolloutResult]:
        return await self._server(request.split).dispatch_group(request)

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.servers.values()))
