"""vLLM's side without vLLM: looprl's routes (`inference.vllm.routes`, vLLM's HTTP middleware) on a
Starlette app with a stand-in engine refuse requests without the run secret (401) and weights outside
the run (403); `VllmProcess` hands the secret to vLLM as `VLLM_API_KEY` in its environment, never argv."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from looprl.config import InferenceConfig
from looprl.inference.backends import engine_process
from looprl.inference.vllm import routes
from looprl.inference.vllm.routes import API_KEY_ENV, WEIGHTS_DIRS_ENV, looprl_routes

SECRET = "the-run-secret"


class FakeEngine:
    """The `engine_client` calls `routes` makes for a full-weights update."""

    def __init__(self) -> None:
        self.loaded: list[str] = []

    async def pause_generation(self, **kwargs) -> None: ...

    async def resume_generation(self) -> None: ...

    async def collective_rpc(self, method: str, args: tuple) -> None:
        self.loaded.append(args[0])

    async def update_weight_version(self, version: str) -> None: ...

    async def generate(self, *args, **kwargs):  # the chat route's engine call, which `routes` wraps
        yield SimpleNamespace(request_id="none", outputs=[])


async def ok(request):
    return JSONResponse({"ok": True})


@pytest.fixture
def served(tmp_path, monkeypatch):
    """`(client, engine, broadcasts)`: the routes in front of a stand-in vLLM, the run's broadcasts allowed."""
    broadcasts = tmp_path / "run" / "broadcasts"
    broadcasts.mkdir(parents=True)
    monkeypatch.setenv(API_KEY_ENV, SECRET)
    monkeypatch.setenv(WEIGHTS_DIRS_ENV, str(broadcasts))

    async def no_adapters(state, keep):  # vLLM's LoRA bookkeeping, which needs vLLM
        pass

    monkeypatch.setattr(routes, "_unload_adapters", no_adapters)
    app = Starlette(routes=[Route("/health", ok), Route("/v1/chat/completions", ok, methods=["POST"]),
                            Route("/tokenize", ok, methods=["POST"])])
    app.add_middleware(BaseHTTPMiddleware, dispatch=looprl_routes)
    engine = FakeEngine()
    app.state.engine_client = engine
    app.state.openai_serving_models = SimpleNamespace(base_model_paths=[SimpleNamespace(name="m")], lora_requests={})
    app.state.args = SimpleNamespace(model="/models/m")
    with TestClient(app) as client:
        yield client, engine, broadcasts


def weights(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.zeros(2)}, path / "model.safetensors")
    return path


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_update_weights_needs_the_key(served):
    client, engine, broadcasts = served
    path = weights(broadcasts / "step_1")
    for headers in ({}, bearer("wrong"), bearer(SECRET[:-1]), {"Authorization": SECRET}):
        r = client.post("/update_weights", json={"path": str(path)}, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    assert engine.loaded == []
    r = client.post("/update_weights", json={"path": str(path), "version": 1}, headers=bearer(SECRET))
    assert r.status_code == 200 and r.json()["version"] == 1, r.text
    assert engine.loaded == [str(path.resolve())]


def test_vllms_own_routes_outside_v1_need_the_key_too(served):
    """vLLM checks its --api-key on /v1 only; its other routes are guarded here."""
    client, _, _ = served
    assert client.post("/tokenize", json={}).status_code == 401
    assert client.post("/tokenize", json={}, headers=bearer(SECRET)).status_code == 200
    assert client.get("/health").status_code == 200


def test_weights_outside_the_run_are_refused(served, tmp_path):
    client, engine, broadcasts = served
    outside = weights(tmp_path / "elsewhere")
    link = broadcasts / "step_2"
    link.symlink_to(outside, target_is_directory=True)
    for path in (outside, link, broadcasts / ".." / ".." / "elsewhere"):
        r = client.post("/update_weights", json={"path": str(path)}, headers=bearer(SECRET))
        assert r.status_code == 403 and r.json()["error"]["code"] == "path_outside_run", r.text
    assert engine.loaded == []


def test_no_weights_directories_no_updates(served, monkeypatch):
    client, engine, broadcasts = served
    monkeypatch.delenv(WEIGHTS_DIRS_ENV)
    r = client.post("/update_weights", json={"path": str(weights(broadcasts / "step_1"))}, headers=bearer(SECRET))
    assert r.status_code == 403 and engine.loaded == []


def test_vllm_gets_the_secret_through_its_environment(tiny_model_dir, tmp_path):
    cfg = InferenceConfig(backend="vllm", vllm_python="/opt/vllm/bin/python")
    engine = engine_process(cfg, str(tiny_model_dir), secret=SECRET, weights_dirs=[tmp_path / "broadcasts"])
    try:
        command, env = engine.command(), engine.environment()
    finally:
        engine.stop()
    assert not any(SECRET in arg for arg in command) and "--api-key" not in command
    assert env[API_KEY_ENV] == SECRET and env[WEIGHTS_DIRS_ENV] == str(tmp_path / "broadcasts")


def test_without_a_secret_vllm_gets_no_key_from_the_users_environment(tiny_model_dir, monkeypatch):
    """`looprl eval --backend vllm` starts vLLM with no secret: a VLLM_API_KEY the user has exported for some
    other server must not make this one refuse the clients looprl gives no key."""
    monkeypatch.setenv(API_KEY_ENV, "someone-elses-key")
    engine = engine_process(InferenceConfig(backend="vllm", vllm_python="/opt/vllm/bin/python"), str(tiny_model_dir))
    try:
        env = engine.environment()
    finally:
        engine.stop()
    assert API_KEY_ENV not in env
