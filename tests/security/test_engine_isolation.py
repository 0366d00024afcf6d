"""One request cannot hurt the others in the embedded engine (issue #34, items 7 and 13): a seed torch cannot
take fails that request alone (400 at the HTTP boundary, its own error inside the engine), and a prompt
that takes long to render and tokenize does not stall the server's event loop."""

import asyncio
import time

import httpx
import pytest
from tests.unit.inference.conftest import model_and_tokenizer, tiny_model_dir  # noqa: F401 (fixtures)

from looprl.inference import server
from looprl.inference.engine import Engine
from looprl.inference.server import create_app
from looprl.inference.token_sampling import SamplingParams

NAME = "tiny"
TOO_LARGE_SEED = 2**70


@pytest.fixture
async def engine(model_and_tokenizer):  # noqa: F811 (the fixture imported above)
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer, max_batch_size=8)
    engine.start()
    yield engine
    engine.stop()


@pytest.fixture
async def client(engine):
    """The app on this test's event loop (no lifespan: the engine fixture runs the engine thread)."""
    transport = httpx.ASGITransport(app=create_app(engine, NAME))
    async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
        yield client


def prompt(engine, text="hello world"):
    return engine.tokenizer(text, add_special_tokens=False)["input_ids"]


async def test_a_seed_torch_cannot_take_fails_that_request_alone(engine):
    """Before: creating the request's generator raised on the engine thread outside any per-request guard,
    failing every running row (and leaving the requests admitted with it unanswered)."""
    running = [asyncio.create_task(engine.generate(prompt(engine), SamplingParams(max_tokens=40, seed=i)))
               for i in range(2)]
    await asyncio.sleep(0.05)  # they are decoding when the bad seed arrives, with a sibling admitted beside it
    bad = asyncio.create_task(engine.generate(prompt(engine, "two plus"), SamplingParams(max_tokens=8,
                                                                                            seed=TOO_LARGE_SEED)))
    sibling = asyncio.create_task(engine.generate(prompt(engine, "two plus"), SamplingParams(max_tokens=8, seed=3)))
    with pytest.raises(ValueError, match="seed"):
        await asyncio.wait_for(bad, 30)
    for task, tokens in [(running[0], 40), (running[1], 40), (sibling, 8)]:
        [completion] = await asyncio.wait_for(task, 30)
        assert len(completion.token_ids) == tokens or completion.finish_reason == "stop"


@pytest.mark.parametrize("seed", [TOO_LARGE_SEED, 2**63, -(2**63) - 1])
async def test_a_seed_out_of_range_is_a_bad_request(client, seed):
    """vLLM's range: a signed 64-bit integer."""
    body = {"model": NAME, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, "seed": seed}
    r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    assert "seed" in r.json()["error"]["message"]


@pytest.mark.parametrize("seed", [2**63 - 1, -(2**63)])
async def test_the_extreme_seeds_in_range_are_served(client, seed):
    body = {"model": NAME, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4, "seed": seed}
    r = await client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text


async def test_a_slow_prompt_render_leaves_the_event_loop_free(client, monkeypatch):
    """Rendering the chat template and tokenizing run off the event loop. Before: they ran on it, so a
    prompt that took 2 s to tokenize held /health and every other request for those 2 s."""
    render = server.render_prompt

    def slow_render(tokenizer, messages, tools):
        if messages[0].content == "slow":
            time.sleep(2.0)  # a huge prompt: the Rust tokenizer releases the GIL, as sleep does
        return render(tokenizer, messages, tools)

    gaps = []

    async def ticker():
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()

    monkeypatch.setattr(server, "render_prompt", slow_render)
    ticking = asyncio.create_task(ticker())
    slow = asyncio.create_task(client.post("/v1/chat/completions", json={
        "model": NAME, "messages": [{"role": "user", "content": "slow"}], "max_tokens": 4}))
    await asyncio.sleep(0.1)  # the slow prompt is being rendered
    health = await client.get("/health")
    other = await client.post("/v1/chat/completions", json={
        "model": NAME, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    assert health.status_code == 200 and other.status_code == 200, other.text
    assert not slow.done(), "the short request waited for the slow prompt"
    assert (await slow).status_code == 200
    ticking.cancel()
    assert max(gaps) < 0.5, f"the event loop stalled for {max(gaps):.2f} s"
