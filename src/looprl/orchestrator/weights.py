"""Keeping the inference engine on the trainer's latest weights.

The trainer writes `broadcasts/step_N/` and then its `STABLE` marker; `sync()` finds the newest
stable broadcast beyond the engine's version and asks the engine to load it (`POST /update_weights`,
which swaps weights between decoding steps, so no completion mixes two versions). `wait_for(v)`
blocks until the engine runs version `v` or newer: that is how the orchestrator bounds off-policy lag.

The engine answers with the name requests for the new weights must use (`model`): the served name,
or with vLLM and LoRA the adapter loaded for this step (`{name}-step-N`); `on_model` hears it, so
the rollouts of step N name the adapter they used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx

from looprl.store.paths import broadcast_dir

POLL_S = 0.2
STABLE = "STABLE"  # the marker `trainer.broadcast` writes last


class WeightSync:
    def __init__(self, engine_url: str, run_dir: Path, version: int = 0,
                 on_model: Callable[[str], None] | None = None) -> None:
        self.engine_url, self.run_dir, self.version, self.on_model = engine_url, Path(run_dir), version, on_model

    def newest_stable(self) -> int | None:
        root = broadcast_dir(self.run_dir, 0).parent
        steps = [int(p.name.removeprefix("step_")) for p in root.glob("step_*") if (p / STABLE).is_file()]
        return max(steps, default=None)

    async def load(self, path: Path, version: int) -> None:
        async with httpx.AsyncClient(timeout=600) as client:
            response = await client.post(f"{self.engine_url}/update_weights",
                                         json={"path": str(path.resolve()), "version": version})
        if response.status_code != 200:
            raise RuntimeError(f"the engine refused weights {path}: {response.status_code} {response.text}")
        self.version = version
        model = response.json().get("model")
        if model and self.on_model is not None:
            self.on_model(model)

    async def sync(self) -> bool:
        """Load the newest stable broadcast if it is newer than the engine's weights; True if loaded."""
        newest = self.newest_stable()
        if newest is None or newest <= self.version:
            return False
        await self.load(broadcast_dir(self.run_dir, newest), newest)
        return True

    async def wait_for(self, version: int) -> None:
        while True:
            await self.sync()
            if self.version >= version:
                return
            await asyncio.sleep(POLL_S)
