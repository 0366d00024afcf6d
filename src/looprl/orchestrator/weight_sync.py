"""Keeping the inference engine on the trainer's latest weights, and the disk free of loaded broadcasts.

The trainer writes `broadcasts/step_N/` and then its `STABLE` marker (`looprl.handoff`); `sync()`
finds the newest stable broadcast beyond the engine's version and asks the engine to load it
(`POST /update_weights`, which swaps weights between decoding steps once the requests in flight have
finished, so no completion mixes two versions; with `in_flight` (`orchestrator.in_flight_updates`) at
once, the running requests continuing on the new weights, each token recording its version).
`wait_for(v)` blocks until the engine runs version `v` or newer: that is how the orchestrator bounds
off-policy lag.

Each broadcast is a full copy of the weights. Once the engine has answered that it runs step N, every
older broadcast is removed (the engine holds N in memory, nothing reads the older ones), and with N the
run's last step, N's own directory too. Loads are serialised, so the directory being loaded is never
removed. A resumed trainer restores from `checkpoints/`, not from broadcasts, and broadcasts its
restored weights again when that broadcast is gone (`trainer.loop`).

The engine answers with the name requests for the new weights must use (`model`): the served name,
or with vLLM and LoRA the adapter loaded for this step (`{name}-step-N`); `on_model` hears it, so
the rollouts of step N name the adapter they used.

With several engines (`engine_urls`: one per inference node or GPU, each serving the whole model)
every broadcast is loaded into all of them at once, and the version counts as loaded when all have
answered: the gateway spreads rollouts over them, so none may lag.

A broadcast through the shared-memory region (`looprl.handoff.shared_weights`, the embedded engine
on the trainer's host) is relayed the same way: its directory names the region and the version in it.
If the trainer is changing the region, or has changed it again, when an engine comes to copy it
(possible only with off-policy overlap), the engine answers 409 and keeps its weights, and the next
`sync()` loads the newer version. A newer version is published within a step; if the same broadcast is
still refused after SUPERSEDED_LIMIT_S with none newer (a trainer that left the region marked as
being changed), `sync()` raises instead of letting the run wait forever.

An update takes as long as the engine needs to reach a point where it may swap the weights: without
`in_flight` the embedded engine and vLLM (`pause_generation(mode="wait")`) both let the requests in flight
finish first, and an agentic rollout's request may run for many minutes. So the request has no read
timeout, only a connect timeout; instead the engine's liveness is checked while it waits: every
LIVENESS_INTERVAL_S its `/health` must answer within LIVENESS_TIMEOUT_S, and after LIVENESS_FAILURES misses
in a row the update fails with `EngineUnresponsive`, naming the engine, instead of waiting on a dead one forever.

`published_at` and `loaded_at` keep, per version, when its broadcast became stable and when the
engine had loaded it (epoch seconds): the step metrics time the weight handoff with them.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from looprl.handoff import STABLE, newest_broadcast, step_dirs
from looprl.handoff.files import POLL_S
from looprl.paths import broadcast_dir, broadcasts_dir

SUPERSEDED_LIMIT_S = 300.0  # how long one broadcast may be refused with 409 and none newer appear
UPDATE_TIMEOUT = httpx.Timeout(None, connect=30.0)
"""An update waits as long as the engine drains its requests (no read timeout); only connecting is bounded."""
LIVENESS_INTERVAL_S = 10.0  # how often an engine that is loading weights must answer /health
LIVENESS_TIMEOUT_S = 10.0
LIVENESS_FAILURES = 3  # misses in a row that fail the update


class WeightsSuperseded(Exception):
    """An engine answered 409: the shared-memory region no longer held the version of this broadcast (the
    trainer had changed it again), and the engine kept its weights."""


class EngineUnresponsive(RuntimeError):
    """An engine stopped answering `/health` while it was loading weights."""


class WeightSync:
    def __init__(self, engine_urls: str | Sequence[str], run_dir: Path, version: int = 0,
                 last_version: int | None = None, on_model: Callable[[str], None] | None = None,
                 secret: str | None = None, in_flight: bool = False) -> None:
        """`in_flight`: ask the engines to swap weights between decoding steps of the running requests
        (`orchestrator.in_flight_updates`) instead of once they finish."""
        self.in_flight = in_flight
        self.engine_urls = [engine_urls] if isinstance(engine_urls, str) else list(engine_urls)
        self._headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        """The run secret, which the engines require (`looprl.handoff.engine_access`)."""
        self.run_dir, self.version, self.on_model = Path(run_dir), version, on_model
        self.last_version = last_version
        """The run's last step: once the engine runs it, its broadcast is removed as well."""
        self._loading = asyncio.Lock()
        self.published_at: dict[int, float] = {}
        self.loaded_at: dict[int, float] = {}
        self._refused_since: tuple[int, float] | None = None
        """The broadcast the engine refuses with 409 and since when (monotonic seconds)."""

    async def load(self, path: Path, version: int) -> None:
        body = {"path": str(path.resolve()), "version": version, "in_flight": self.in_flight}
        async with httpx.AsyncClient(timeout=UPDATE_TIMEOUT, headers=self._headers) as client:
            # every engine's update finishes before the client closes, even when one fails
            outcomes = await asyncio.gather(*(_update_while_alive(client, url, body) for url in self.engine_urls),
                                            return_exceptions=True)
        responses = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            responses.append(outcome)
        if any(response.status_code == 409 for response in responses):
            raise WeightsSuperseded(path)
        for url, response in zip(self.engine_urls, responses):
            if response.status_code != 200:
                raise RuntimeError(f"the engine at {url} refused weights {path}: {response.status_code} "
                                   f"{response.text}")
        self.version = version
        self.loaded_at[version] = time.time()
        model = responses[0].json().get("model")  # every engine names a step's weights alike
        if model and self.on_model is not None:
            self.on_model(model)

    async def sync(self) -> bool:
        """Load the newest stable broadcast if it is newer than the engine's weights; True if loaded."""
        async with self._loading:
            newest = newest_broadcast(self.run_dir)
            if newest is None or newest <= self.version:
                return False
            path = broadcast_dir(self.run_dir, newest)
            self.published_at[newest] = (path / STABLE).stat().st_mtime
            try:
                await self.load(path, newest)
            except WeightsSuperseded:  # the next sync loads the newer broadcast that superseded it
                self._check_refusals(newest, path)
                return False
            self._refused_since = None
            self.remove_loaded()
            return True

    def _check_refusals(self, version: int, path: Path) -> None:
        now = time.monotonic()
        if self._refused_since is None or self._refused_since[0] != version:
            self._refused_since = (version, now)
        elif now - self._refused_since[1] > SUPERSEDED_LIMIT_S:
            raise RuntimeError(
                f"the engine has refused the weights of step {version} ({path}) for {SUPERSEDED_LIMIT_S:.0f} s "
                "(409: the shared-memory region does not hold that version) and the trainer published none "
                "newer; see the trainer's log, or set trainer.weight_handoff = 'file'")

    def remove_loaded(self) -> None:
        """Remove the broadcasts older than the engine's weights (and its own after the last step)."""
        for step, path in step_dirs(broadcasts_dir(self.run_dir)).items():
            if step < self.version or step == self.version == self.last_version:
                shutil.rmtree(path, ignore_errors=True)

    async def wait_for(self, version: int) -> None:
        while True:
            await self.sync()
            if self.version >= version:
                return
            await asyncio.sleep(POLL_S)


async def _update_while_alive(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> httpx.Response:
    """`POST {url}/update_weights`, however long the engine takes, as long as its `/health` keeps answering."""
    update = asyncio.ensure_future(client.post(f"{url}/update_weights", json=body))
    misses = 0
    try:
        while not (await asyncio.wait({update}, timeout=LIVENESS_INTERVAL_S))[0]:
            try:
                (await client.get(f"{url}/health", timeout=LIVENESS_TIMEOUT_S)).raise_for_status()
                misses = 0
            except httpx.HTTPError as e:
                misses += 1
                if misses >= LIVENESS_FAILURES:
                    raise EngineUnresponsive(
                        f"the engine at {url} stopped answering /health while it loaded weights {body['path']} "
                        f"({misses} checks in a row, {LIVENESS_INTERVAL_S:g} s apart; last: {e!r}); see its log") from e
        return update.result()
    finally:
        update.cancel()
