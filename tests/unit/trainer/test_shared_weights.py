"""The shared-memory weight handoff against the file handoff it stands in for: the engine ends with the very
same weights (bitwise), a region being changed or changed again is never loaded, the engine's HTTP route
answers 409 then and the orchestrator loads the newer broadcast; the launcher's region directory goes away
however the run ends."""

import asyncio
import os

import pytest
import torch
from fastapi.testclient import TestClient
from tests.support.tiny_model import tiny_model

from looprl.handoff.shared_weights import REGION_FILE, Superseded, read_message
from looprl.inference.engine import Engine
from looprl.inference.server import create_app
from looprl.inference.weight_update import load_update
from looprl.launch.weight_region import OWNER_LOCK, remove_stale_regions, weight_region
from looprl.orchestrator.weight_sync import WeightSync
from looprl.paths import broadcast_dir
from looprl.trainer.broadcast import Broadcaster, broadcast_weights
from looprl.trainer.optim import build_optimizer
from looprl.trainer.parallel import Ranks
from looprl.trainer.weight_files import full_state_dict


def trained(broadcast: Broadcaster | None = None, steps: int = 1):
    """The tiny policy after `steps` AdamW steps, its parameters attached to `broadcast`'s region first."""
    model = tiny_model()
    if broadcast is not None:
        broadcast.attach(model, Ranks())
    optimizer = build_optimizer(model, lr=1e-2)
    if broadcast is not None:
        broadcast.guard(optimizer)
    for _ in range(steps):
        model(input_ids=torch.tensor([[2, 3, 4, 5]])).logits.logsumexp(-1).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def engine_after(path, model_dtype=torch.float32):
    engine_model = tiny_model(seed=1).to(model_dtype)
    load_update(path, engine_model).apply(engine_model)
    return engine_model.state_dict()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_engine_gets_bitwise_the_weights_a_file_would_give_it(tmp_path, dtype):
    """float32 (the CPU default): the trainer's parameters live in the region, nothing is copied on its side;
    bfloat16 (a GPU engine's): each broadcast copies the cast weights in. Either way the engine's weights
    equal those a file broadcast gives it, bit for bit, and the region holds the file's names and dtypes."""
    from safetensors.torch import load_file

    shared = Broadcaster(tmp_path / "run", dtype=dtype, region_dir=tmp_path)
    model = trained(shared)
    assert shared.shared is not None and shared.shared.live == (dtype == torch.float32)
    state = full_state_dict(model, Ranks())
    via_region = shared(1, model, state)
    via_file = broadcast_weights(tmp_path / "files", 1, model, state, dtype=dtype)

    message = read_message(via_region)
    on_file = load_file(via_file / "model.safetensors")
    assert sorted(p.name for p in via_region.iterdir()) == ["STABLE", "shared_memory.json"]
    assert message is not None and message.version == 1 and message.region == str(tmp_path / REGION_FILE)
    assert {e.name: (e.dtype, e.shape) for e in message.tensors} == {
        n: (str(t.dtype).removeprefix("torch."), list(t.shape)) for n, t in on_file.items()}
    for engine_dtype in {torch.float32, dtype}:
        from_region, from_file = engine_after(via_region, engine_dtype), engine_after(via_file, engine_dtype)
        for name, tensor in from_file.items():
            assert torch.equal(from_region[name], tensor), name
        assert torch.equal(from_region["model.embed_tokens.weight"], state["model.embed_tokens.weight"].to(dtype)
                           .to(engine_dtype))


def test_a_region_being_changed_or_changed_again_is_never_loaded(tmp_path):
    """A live trainer's optimizer step locks the region and marks it changing until the broadcast: an engine
    asked for version 1 meanwhile, or once version 2 replaced it, keeps its weights whole (and does not wait).
    A trainer that died mid-change leaves a region marked changing: never loaded either."""
    import subprocess
    import sys

    shared = Broadcaster(tmp_path / "run", dtype=torch.float32, region_dir=tmp_path)
    model = trained(shared)
    path = shared(1, model, full_state_dict(model, Ranks()))
    engine_model = tiny_model(seed=1)
    before = {k: v.clone() for k, v in engine_model.state_dict().items()}
    update = load_update(path, engine_model)  # checked and mapped while the region holds version 1

    model(input_ids=torch.tensor([[2, 3]])).logits.sum().backward()
    optimizer = build_optimizer(model, lr=1e-2)
    shared.guard(optimizer)
    optimizer.step()  # the pre-step hook locks the region: the trainer is between its step and the broadcast
    with pytest.raises(Superseded, match="being changed"):
        update.apply(engine_model)
    shared.shared.region.publish(2)
    with pytest.raises(Superseded, match="version 2, not version 1"):
        update.apply(engine_model)

    message = read_message(path)
    code = ("import sys, os; from looprl.handoff.shared_weights import Region\n"
            "Region(sys.argv[1], int(sys.argv[2]), create=True).begin_change(); os._exit(0)")  # a writer
    subprocess.run([sys.executable, "-c", code, message.region, str(message.nbytes)], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    update = load_update(path, engine_model)
    update.region_version = 2
    with pytest.raises(Superseded, match="being changed"):
        update.apply(engine_model)
    for name, tensor in engine_model.state_dict().items():
        assert torch.equal(tensor, before[name]), name
    load_update(shared(3, model, full_state_dict(model, Ranks())), engine_model).apply(engine_model)
    assert torch.equal(engine_model.model.norm.weight, model.model.norm.weight)


def test_a_superseded_region_is_a_409_and_the_orchestrator_loads_the_newer_one(tmp_path, monkeypatch):
    """The engine route answers 409 and keeps its weights; `WeightSync` then loads the newest broadcast."""
    from tests.support.tiny_model import tiny_tokenizer

    run = tmp_path / "run"
    shared = Broadcaster(run, keep=3, dtype=torch.float32, region_dir=tmp_path)
    model = trained(shared)
    shared(1, model, full_state_dict(model, Ranks()))
    shared.shared.region.publish(2)  # the trainer changed the region again before the engine copied step 1
    engine_model = tiny_model(seed=1)
    engine_model.generation_config.eos_token_id = 1
    # the engine's weights directories as `looprl rl` gives them: the run's broadcasts and its region's directory
    app = create_app(Engine(engine_model, tiny_tokenizer()), "tiny", weights_dirs=[run / "broadcasts", tmp_path])
    with TestClient(app) as client:
        r = client.post("/update_weights", json={"path": str(broadcast_dir(run, 1)), "version": 1})
        assert r.status_code == 409 and r.json()["error"]["code"] == "weights_superseded"
        assert client.get("/health").json()["weights"]["version"] == 0

        async def post(self, url, json):
            return client.post("/update_weights", json=json)

        import httpx

        monkeypatch.setattr(httpx.AsyncClient, "post", post)
        sync = WeightSync("http://engine", run)
        assert not asyncio.run(sync.sync()) and sync.version == 0
        shared(2, model, full_state_dict(model, Ranks()))
        assert asyncio.run(sync.sync()) and sync.version == 2
    assert torch.equal(engine_model.model.norm.weight, model.model.norm.weight)


def test_the_region_directory_is_removed_however_the_run_ends(tmp_path):
    with weight_region(tmp_path) as region:
        assert region.name.startswith("looprl-weights-") and (region / OWNER_LOCK).is_file()
        assert remove_stale_regions(tmp_path) == []  # its launcher holds the lock
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt), weight_region(tmp_path):
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_the_next_run_sweeps_a_region_whose_launcher_was_killed(tmp_path):
    """SIGKILL runs no cleanup; the kernel drops the launcher's lock, so the next launcher removes it."""
    import signal
    import subprocess
    import sys

    code = ("import sys, time; from pathlib import Path; from looprl.launch.weight_region import weight_region\n"
            "with weight_region(Path(sys.argv[1])) as r:\n    print(r, flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert child.stdout is not None
    region = child.stdout.readline().strip()
    assert remove_stale_regions(tmp_path) == []
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert [str(p) for p in remove_stale_regions(tmp_path)] == [region] and list(tmp_path.iterdir()) == []


def test_a_region_that_cannot_be_made_falls_back_to_files(tmp_path):
    """A `/dev/shm` too small (ENOSPC from `posix_fallocate`) or gone: the trainer broadcasts files instead."""
    shared = Broadcaster(tmp_path / "run", dtype=torch.float32, region_dir=tmp_path / "gone")
    model = trained(shared)
    assert shared.shared is None
    path = shared(1, model, full_state_dict(model, Ranks()))
    assert sorted(p.name for p in path.iterdir()) == ["STABLE", "config.json", "model.safetensors"]


def test_a_checkpoint_before_any_trained_step_leaves_the_version_loadable(tmp_path, tokenizer):
    """torch's distributed checkpoint fills an empty optimizer state with a step at learning rate 0; the
    guard sees an optimizer step, and without `unchanged` the region stayed 'being changed' for good (a run
    whose steps trained nothing hung at its last step, the engine refusing the final weights)."""
    from looprl.trainer.checkpoint import save_checkpoint
    from looprl.trainer.optim import build_scheduler

    shared = Broadcaster(tmp_path / "run", dtype=torch.float32, region_dir=tmp_path)
    model = tiny_model()
    shared.attach(model, Ranks())
    optimizer = build_optimizer(model, lr=1e-2)
    shared.guard(optimizer)
    path = shared(1, model, full_state_dict(model, Ranks()))
    with shared.unchanged(1):
        save_checkpoint(tmp_path / "run", 1, model, tokenizer, optimizer, build_scheduler(optimizer))
    engine_model = tiny_model(seed=1)
    load_update(path, engine_model).apply(engine_model)
    for name, tensor in engine_model.state_dict().items():
        assert torch.equal(tensor, model.state_dict()[name]), name
