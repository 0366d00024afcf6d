"""A weight update waits as long as the engine drains its requests (issue #33, defect 3), and fails clearly
when the engine stops answering instead.

Time is compressed: every timeout the client sets is capped at CAP_S (1 s), as if the engine's requests
ran for longer than the client's old 600 s. Before the fix the client's 600 s read timeout became 1 s,
and an update behind a generation of a few seconds failed with httpx.ReadTimeout: the orchestrator crashed
exactly when rollouts were long.
"""

import asyncio
import socket
import time

import httpx
import pytest
import uvicorn
from aiohttp import web
from tests.unit.inference.conftest import model_and_tokenizer, tiny_model_dir  # noqa: F401 (fixtures)

from looprl.inference.batch import DecodeBatch
from looprl.inference.engine import Engine
from looprl.inference.server import create_app
from looprl.orchestrator import weight_sync
from looprl.orchestrator.weight_sync import EngineUnresponsive, WeightSync
from looprl.trainer.broadcast import broadcast_weights

CAP_S = 1.0


def _capped(timeout: object) -> httpx.Timeout:
    limits = httpx.Timeout(timeout)  # type: ignore[arg-type]

    def cap(seconds: float | None) -> float | None:
        return None if seconds is None else min(seconds, CAP_S)

    return httpx.Timeout(connect=cap(limits.connect), read=cap(limits.read), write=cap(limits.write),
                         pool=cap(limits.pool))


class CappedClient(httpx.AsyncClient):
    def __init__(self, *args, timeout=httpx.Timeout(5.0), **kwargs):
        super().__init__(*args, timeout=_capped(timeout), **kwargs)


@pytest.fixture
def compressed_time(monkeypatch):
    monkeypatch.setattr(weight_sync.httpx, "AsyncClient", CappedClient)
    monkeypatch.setattr(weight_sync, "LIVENESS_INTERVAL_S", 0.2)
    monkeypatch.setattr(weight_sync, "LIVENESS_TIMEOUT_S", 0.3)


async def fake_engine(update_s: float, health: str) -> tuple[web.AppRunner, str]:
    """An engine whose update answers after `update_s` (None: never) and whose /health is `ok`, `hangs` or `503`."""

    async def update_weights(request: web.Request) -> web.Response:
        body = await request.json()
        await asyncio.sleep(update_s)
        return web.json_response({"version": body["version"], "path": body["path"], "model": "m"})

    async def health_route(request: web.Request) -> web.Response:
        if health == "hangs":
            await asyncio.sleep(3600)
        return web.json_response({"status": "ok"}, status=503 if health == "503" else 200)

    app = web.Application()
    app.router.add_post("/update_weights", update_weights)
    app.router.add_get("/health", health_route)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def test_an_update_waits_while_the_engine_drains(tmp_path, compressed_time):
    runner, url = await fake_engine(update_s=3 * CAP_S, health="ok")
    try:
        sync = WeightSync(url, tmp_path)
        await sync.load(tmp_path, 1)
        assert sync.version == 1
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("health", ["hangs", "503"])
async def test_an_engine_that_stops_answering_fails_the_update_clearly(tmp_path, compressed_time, health):
    runner, url = await fake_engine(update_s=3600, health=health)
    try:
        started = time.monotonic()
        with pytest.raises(EngineUnresponsive, match=f"the engine at {url} stopped answering /health"):
            await WeightSync(url, tmp_path).load(tmp_path, 1)
        assert time.monotonic() - started < 5
    finally:
        await runner.cleanup()


async def test_the_embedded_engine_loads_an_update_after_a_long_generation(model_and_tokenizer, tmp_path,  # noqa: F811
                                                                             compressed_time, monkeypatch):
    """The embedded engine in the same situation: requests sent before the update finish on the old weights
    (each decode step slowed to make the generation outlast the capped timeout), then it swaps them."""
    decode, decoding = DecodeBatch.decode, asyncio.Event()
    loop = asyncio.get_running_loop()

    last_decode = [0.0]

    def slow_decode(self, *args):
        loop.call_soon_threadsafe(decoding.set)
        time.sleep(0.01)
        last_decode[0] = time.monotonic()
        return decode(self, *args)

    monkeypatch.setattr(DecodeBatch, "decode", slow_decode)
    model, tokenizer = model_and_tokenizer
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(Engine(model, tokenizer), "tiny", weights_dirs=[tmp_path / "broadcasts"])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_config=None, access_log=False))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=None) as client:
            long = asyncio.create_task(client.post(f"{url}/v1/chat/completions", json={
                "model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 300,
                "temperature": 0}))
            await asyncio.wait_for(decoding.wait(), 60)  # the generation runs (not a fixed sleep: a loaded machine)
            sync = WeightSync(url, tmp_path)
            started = time.monotonic()
            await sync.load(broadcast_weights(tmp_path, 1, model), 1)
            loaded, waited = time.monotonic(), time.monotonic() - started
            assert waited > 2 * CAP_S  # it waited for the long generation to drain, past the capped timeouts
            assert last_decode[0] < loaded  # the old weights decoded the whole reply before the swap
            # the generation's response may reach the client a moment after the update's: wait for it
            generated = (await asyncio.wait_for(long, 30)).json()
            assert generated["usage"]["completion_tokens"] == 300
            assert sync.version == 1 and (await client.get(f"{url}/health")).json()["weights"]["version"] == 1
    finally:
        server.should_exit = True
        await serving
