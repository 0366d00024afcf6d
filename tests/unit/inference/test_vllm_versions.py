"""vLLM's side of per-token policy versions, without vLLM: `routes` asks for an in-flight pause
(`mode="keep"`) and labels the engine's weight version, and adds the `weight_versions` spans vLLM keeps on
its outputs to its chat completions (a stand-in chat route calls the engine client as vLLM's does)."""

from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from looprl.inference.vllm import routes
from looprl.inference.vllm.routes import WEIGHTS_DIRS_ENV, looprl_routes


class FakeEngine:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.spans = [SimpleNamespace(version="default", start=0, end=2), SimpleNamespace(version="3", start=2, end=5)]

    async def pause_generation(self, **kwargs) -> None:
        self.calls.append(("pause", kwargs))

    async def resume_generation(self) -> None:
        self.calls.append(("resume", None))

    async def collective_rpc(self, method: str, args: tuple) -> None:
        self.calls.append(("load", args[0]))

    async def update_weight_version(self, version: str) -> None:
        self.calls.append(("label", version))

    async def generate(self, prompt, params, request_id):
        yield SimpleNamespace(request_id=request_id, outputs=[
            SimpleNamespace(index=0, weight_versions=None)])  # an intermediate output: no spans yet
        yield SimpleNamespace(request_id=request_id, outputs=[
            SimpleNamespace(index=0, weight_versions=self.spans), SimpleNamespace(index=1, weight_versions=None)])


async def chat(request):
    """Like vLLM's chat route: the engine client generates under the response's id."""
    body = await request.json()
    async for _ in request.app.state.engine_client.generate(None, None, "chatcmpl-1"):
        pass
    return JSONResponse({"id": "chatcmpl-1", "model": body["model"], "choices": [
        {"index": 0, "token_ids": [1, 2, 3, 4, 5]}, {"index": 1, "token_ids": [6]}]})


@pytest.fixture
def served(tmp_path, monkeypatch):
    broadcasts = tmp_path / "broadcasts"
    (broadcasts / "step_3").mkdir(parents=True)
    save_file({"w": torch.zeros(2)}, broadcasts / "step_3" / "model.safetensors")
    monkeypatch.setenv(WEIGHTS_DIRS_ENV, str(broadcasts))

    async def no_adapters(state, keep):
        pass

    monkeypatch.setattr(routes, "_unload_adapters", no_adapters)
    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    app.add_middleware(BaseHTTPMiddleware, dispatch=looprl_routes)
    app.state.engine_client = FakeEngine()
    app.state.openai_serving_models = SimpleNamespace(base_model_paths=[SimpleNamespace(name="m")], lora_requests={})
    app.state.args = SimpleNamespace(model="/models/m")
    with TestClient(app) as client:
        yield client, app.state.engine_client, broadcasts


@pytest.mark.parametrize("in_flight", [True, False])
def test_an_update_pauses_in_flight_or_drains_and_labels_the_version(served, in_flight):
    client, engine, broadcasts = served
    r = client.post("/update_weights", json={"path": str(broadcasts / "step_3"), "version": 3, "in_flight": in_flight})
    assert r.status_code == 200 and r.json()["version"] == 3, r.text
    mode = {"mode": "keep", "clear_cache": False} if in_flight else {"mode": "wait", "clear_cache": True}
    assert engine.calls == [("pause", mode), ("load", str((broadcasts / "step_3").resolve())), ("label", "3"),
                            ("resume", None)]
    bad = client.post("/update_weights", json={"path": str(broadcasts / "step_3"), "in_flight": "yes"})
    assert bad.status_code == 400


def test_chat_completions_carry_the_spans_vllm_recorded(served):
    client, _, _ = served
    body = client.post("/v1/chat/completions", json={"model": "m"}).json()
    # vLLM's label before any update ("default") is the initial weights, version 0
    assert body["choices"][0]["weight_versions"] == [{"version": "0", "start": 0, "end": 2},
                                                     {"version": "3", "start": 2, "end": 5}]
    assert body["choices"][1]["weight_versions"] is None  # vLLM named no versions for it
    assert client.app.state.looprl_versions == {}  # handed out once, then forgotten


def test_a_lora_adapter_names_the_version_of_the_whole_choice(served):
    client, _, _ = served
    body = client.post("/v1/chat/completions", json={"model": "m-step-7"}).json()
    assert [c["weight_versions"] for c in body["choices"]] == [[{"version": "7", "start": 0, "end": 5}],
                                                               [{"version": "7", "start": 0, "end": 1}]]
