"""Keeping the inference engine on the trainer's latest weights.

The trainer writes `broadcasts/step_N/` and then its `STABLE` marker (`looprl.handoff`); `sync()`
finds the newest stable broadcast beyond the engine's version and asks the engine to load it
(`POST /update_weights`, which swaps weights between decoding steps, so no completion mixes two
versions). `wait_for(v)`
blocks until the engine runs version `v` or newer: that is how the orchestrator bounds off-policy lag.
`published_at` and `loaded_at` keep, per version, when its broadcast became stable and when the
engine had loaded it (epoch seconds): the step metrics time the weight handoff with them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from looprl.handoff import STABLE, newest_broadcast
from looprl.handoff.files import POLL_S
from looprl.paths import broadcast_dir


class WeightSync:
    def __init__(self, engine_url: str, run_dir: Path, version: int = 0) -> None:
        self.engine_url, self.run_dir, self.version = engine_url, Path(run_dir), version
        self.published_at: dict[int, float] = {}
        self.loaded_at: dict[int, float] = {}

    async def load(self, path: Path, version: int) -> None:
        async with httpx.AsyncClient(timeout=600) as client:
            response = await client.post(f"{self.engine_url}/update_weights",
                                         json={"path": str(path.resolve()), "version": version})
        if response.status_code != 200:
            raise RuntimeError(f"the engine refused weights {path}: {response.status_code} {response.text}")
        self.version = version
        self.loaded_at[version] = time.time()

    async def sync(self) -> bool:
        """Load the newest stable broadcast if it is newer than the engine's weights; True if loaded."""
        newest = newest_broadcast(self.run_dir)
        if newest is None or newest <= self.version:
            return False
        path = broadcast_dir(self.run_dir, newest)
        self.published_at[newest] = (path / STABLE).stat().st_mtime
        await self.load(path, newest)
        return True

    async def wait_for(self, version: int) -> None:
        while True:
            await self.sync()
            if self.version >= version:
                return
            await asyncio.sleep(POLL_S)
