"""Weight sync: only stable broadcasts newer than the engine's version are loaded, newest first."""

from looprl.handoff import mark_stable
from looprl.orchestrator.weights import WeightSync
from looprl.paths import broadcast_dir
from looprl.trainer.broadcast import broadcast_weights
from tests.support.tiny_model import tiny_model


class Recording(WeightSync):
    def __init__(self, run_dir):
        super().__init__("http://engine", run_dir)
        self.loaded = []

    async def load(self, path, version):
        self.loaded.append((path.name, version))
        self.version = version


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


async def test_wait_for_returns_once_the_version_is_reached(tmp_path):
    sync = Recording(tmp_path)
    broadcast(tmp_path, 1)
    await sync.wait_for(1)
    assert sync.version == 1
    await sync.wait_for(0)
    assert sync.loaded == [("step_1", 1)]



async def test_sync_loads_what_the_trainer_broadcasts(tmp_path):
    sync = Recording(tmp_path)
    broadcast_weights(tmp_path, 1, tiny_model())
    assert await sync.sync() and sync.loaded == [("step_1", 1)]
