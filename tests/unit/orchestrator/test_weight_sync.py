"""Weight sync: only stable broadcasts newer than the engine's version are loaded, newest first;
broadcasts the engine no longer needs are removed, never the one being loaded."""

import asyncio

import pytest
from tests.support.tiny_model import tiny_model

from looprl.handoff import mark_stable
from looprl.orchestrator.weight_sync import WeightSync
from looprl.paths import broadcast_dir
from looprl.trainer.broadcast import broadcast_weights


class Recording(WeightSync):
    def __init__(self, run_dir, last_version=None, load_s=None):
        super().__init__("http://engine", run_dir, last_version=last_version)
        self.loaded, self.load_s = [], load_s or {}

    async def load(self, path, version):
        await asyncio.sleep(self.load_s.get(version, 0))
        assert path.is_dir(), f"{path} was removed while the engine loaded it"
        self.loaded.append((path.name, version))
        self.version = version


def left(run_dir):
    return sorted(p.name for p in (run_dir / "broadcasts").iterdir())


def broadcast(run_dir, step, stable=True):
    path = broadcast_dir(run_dir, step)
    path.mkdir(parents=True)
    if stable:
        mark_stable(path)


async def test_sync_loads_the_newest_stable_broadcast_only(tmp_path):
    sync = Recording(tmp_path)
    assert not await sync.sync()
    broadcast(tmp_path, 1)
    broadcast(tmp_path, 2)
    broadcast(tmp_path, 3, stable=False)
    assert await sync.sync() and sync.loaded == [("step_2", 2)]
    assert not await sync.sync()
    assert list(sync.published_at) == [2]  # when step_2's STABLE marker was written


async def test_wait_for_returns_once_the_version_is_reached(tmp_path):
    sync = Recording(tmp_path)
    broadcast(tmp_path, 1)
    await sync.wait_for(1)
    assert sync.version == 1
    await sync.wait_for(0)
    assert sync.loaded == [("step_1", 1)]



async def test_a_broadcast_refused_for_too_long_fails_the_run(tmp_path, monkeypatch):
    """A 409 means a newer broadcast is coming; the same one refused past the limit, with none newer, is an
    error instead of a run that waits forever."""
    from looprl.orchestrator import weight_sync

    class Refusing(Recording):
        async def load(self, path, version):
            raise weight_sync.WeightsSuperseded(path)

    monkeypatch.setattr(weight_sync, "SUPERSEDED_LIMIT_S", 0.3)
    sync = Refusing(tmp_path)
    broadcast(tmp_path, 1)
    assert not await sync.sync()
    broadcast(tmp_path, 2)  # a newer one restarts the clock
    await asyncio.sleep(0.2)
    assert not await sync.sync()
    await asyncio.sleep(0.2)
    assert not await sync.sync()
    with pytest.raises(RuntimeError, match="refused the weights of step 2"):
        await sync.wait_for(2)


async def test_sync_loads_what_the_trainer_broadcasts(tmp_path):
    sync = Recording(tmp_path)
    broadcast_weights(tmp_path, 1, tiny_model())
    assert await sync.sync() and sync.loaded == [("step_1", 1)]


async def test_broadcasts_older_than_the_engine_weights_are_removed(tmp_path):
    sync = Recording(tmp_path, last_version=4)
    for step in (1, 2):
        broadcast(tmp_path, step)
    broadcast(tmp_path, 3, stable=False)
    assert await sync.sync() and left(tmp_path) == ["step_2", "step_3"]  # the engine runs step 2


async def test_the_last_broadcast_is_removed_once_the_engine_runs_it(tmp_path):
    sync = Recording(tmp_path, last_version=2)
    broadcast(tmp_path, 1)
    await sync.wait_for(1)
    assert left(tmp_path) == ["step_1"]
    broadcast(tmp_path, 2)
    await sync.wait_for(2)
    assert sync.loaded == [("step_1", 1), ("step_2", 2)] and left(tmp_path) == []


async def test_the_broadcast_being_loaded_is_never_removed(tmp_path):
    sync = Recording(tmp_path, load_s={1: 0.2})
    broadcast(tmp_path, 1)
    slow = asyncio.create_task(sync.sync())
    await asyncio.sleep(0.05)  # step 1 is loading when step 2 appears and a second sync starts
    broadcast(tmp_path, 2)
    await asyncio.gather(slow, sync.sync())
    assert sync.loaded == [("step_1", 1), ("step_2", 2)] and left(tmp_path) == ["step_2"]


async def test_every_engine_loads_each_broadcast(tmp_path, monkeypatch):
    """Several inference nodes: each update goes to all of them, and one refusing fails the update."""
    import httpx

    posted, refusing = [], set()

    async def post(self, url, json):
        posted.append((url, json["version"]))
        status = 500 if url.split("/update_weights")[0] in refusing else 200
        return httpx.Response(status, json={"version": json["version"], "path": json["path"], "model": "m"})

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    sync = WeightSync(["http://node-a:8000", "http://node-b:8000"], tmp_path)
    broadcast(tmp_path, 1)
    assert await sync.sync() and sync.version == 1
    assert sorted(posted) == [("http://node-a:8000/update_weights", 1), ("http://node-b:8000/update_weights", 1)]
    refusing.add("http://node-b:8000")
    broadcast(tmp_path, 2)
    with pytest.raises(RuntimeError, match="node-b"):
        await sync.sync()
    assert sync.version == 1
