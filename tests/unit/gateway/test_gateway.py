"""The gateway: sampling applied, vLLM fields requested and recorded, budgets enforced, sessions required."""

import httpx
import pytest
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import SamplingParams
from looprl.gateway.app import Gateway
from looprl.gateway.sampling_params import apply_sampling, call_seed

MESSAGES = [{"role": "user", "content": "hello"}]


def test_run_sampling_overrides_and_bounds_the_request():
    body = {"messages": MESSAGES, "temperature": 0.0, "max_tokens": 50, "stop": "END"}
    out = apply_sampling(body, SamplingParams(temperature=0.7, top_p=0.9, max_tokens=20, seed=1, stop=["\n\n"]),
                         "r1", 0)
    assert out["temperature"] == 0.7 and out["top_p"] == 0.9 and out["max_tokens"] == 20
    assert out["stop"] == ["END", "\n\n"] and out["logprobs"] is True and out["return_token_ids"] is True
    assert out["seed"] == call_seed(1, "r1", 0) != call_seed(1, "r2", 0), "siblings get distinct seeds"


async def post(url, rollout_id, body):
    async with httpx.AsyncClient() as c:
        return await c.post(url.format(rollout_id=rollout_id) + "/chat/completions", json=body)


@pytest.mark.parametrize("vllm_fields", [True, False])
async def test_calls_are_recorded_under_their_rollout(vllm_fields):
    with ScriptedServer(lambda b: Reply("hi there"), vllm_fields=vllm_fields) as server:
        gw = Gateway(server.base_url, "m", SamplingParams(temperature=0.5))
        async with gw.serve() as url:
            gw.open_session("a")
            gw.open_session("b")
            r = await post(url, "a", {"messages": MESSAGES, "model": "whatever"})
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "hi there"
            await post(url, "b", {"messages": MESSAGES})
            await post(url, "a", {"messages": MESSAGES})
            calls_a, calls_b = gw.close_session("a"), gw.close_session("b")
        assert server.requests[0]["model"] == "m" and server.requests[0]["temperature"] == 0.5
    assert [c.idx for c in calls_a] == [0, 1] and len(calls_b) == 1
    call = calls_a[0]
    assert call.finish_reason == "stop" and call.prompt_tokens > 0 and call.completion_tokens == len("hi there")
    if vllm_fields:
        assert len(call.completion_token_ids) == len(call.completion_logprobs) == call.completion_tokens
        assert call.prompt_token_ids
    else:
        assert call.completion_token_ids is None and call.completion_logprobs is None and call.prompt_token_ids is None


async def test_a_rollouts_seeds_follow_its_seed_key_not_its_id():
    """With a run seed, the seeds a rollout's calls get derive from the seed key its session opened with (what
    the rollout is in the run), so another run's rollout of the same key draws alike; without a key, its id."""
    with ScriptedServer(lambda b: Reply("x")) as server:
        gw = Gateway(server.base_url, "m", SamplingParams(seed=7))
        async with gw.serve() as url:
            gw.open_session("first-run-id", seed_key="train/0/3/1")
            gw.open_session("other-run-id", seed_key="train/0/3/1")
            gw.open_session("no-key")
            for rollout in ("first-run-id", "first-run-id", "other-run-id", "no-key"):
                await post(url, rollout, {"messages": MESSAGES})
    seeds = [r["seed"] for r in server.requests]
    assert seeds == [call_seed(7, "train/0/3/1", 0), call_seed(7, "train/0/3/1", 1), call_seed(7, "train/0/3/1", 0),
                     call_seed(7, "no-key", 0)]


async def test_unknown_session_and_n_are_refused():
    with ScriptedServer(lambda b: Reply("x")) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            assert (await post(url, "ghost", {"messages": MESSAGES, "stream": True})).status_code == 404
            gw.open_session("a")
            r = await post(url, "a", {"messages": MESSAGES, "n": 2})
            assert r.status_code == 400 and r.json()["error"]["code"] == "n_unsupported"
        assert server.requests == []


async def test_context_budget():
    with ScriptedServer(lambda b: Reply("y" * 30)) as server:
        gw = Gateway(server.base_url, "m", context_budget=80)
        async with gw.serve() as url:
            gw.open_session("a")
            first = await post(url, "a", {"messages": MESSAGES})  # ~45 prompt + 30 completion tokens
            assert first.status_code == 200
            second = await post(url, "a", {"messages": MESSAGES * 2})
            assert server.requests[-1]["max_tokens"] <= 80 - 45
            third = await post(url, "a", {"messages": MESSAGES * 3})
            assert third.status_code == 400 and third.json()["error"]["code"] == "context_budget_exceeded"
            calls = gw.close_session("a")
    assert second.status_code in (200, 400) and calls[-1].error == "context_budget_exceeded"


async def test_upstream_errors_are_forwarded_and_recorded():
    with ScriptedServer(lambda b: Reply(status=503)) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            r = await post(url, "a", {"messages": MESSAGES})
            calls = gw.close_session("a")
    assert r.status_code == 503 and calls[0].status == 503 and calls[0].error


async def test_unreachable_upstream_is_502():
    gw = Gateway("http://127.0.0.1:9/v1", "m")
    async with gw.serve() as url:
        gw.open_session("a")
        r = await post(url, "a", {"messages": MESSAGES})
        assert r.status_code == 502 and gw.close_session("a")[0].status == 502


async def test_a_dropped_upstream_connection_is_retried(monkeypatch):
    with ScriptedServer(lambda b: Reply("ok")) as server:
        gw = Gateway(server.base_url, "m")
        monkeypatch.setattr("looprl.gateway.app.RETRY_DELAY_S", 0.0)
        real_post, failures = gw._client.post, ["ReadError", "RemoteProtocolError"]

        async def flaky_post(*args, **kwargs):
            if failures:
                raise getattr(httpx, failures.pop(0))("connection closed by peer")
            return await real_post(*args, **kwargs)

        monkeypatch.setattr(gw._client, "post", flaky_post)
        async with gw.serve() as url:
            gw.open_session("a")
            r = await post(url, "a", {"messages": MESSAGES})
            calls = gw.close_session("a")
    assert r.status_code == 200 and [c.status for c in calls] == [200] and len(server.requests) == 1


async def test_an_upstream_that_stays_unreachable_is_recorded_as_502(monkeypatch):
    monkeypatch.setattr("looprl.gateway.app.RETRY_DELAY_S", 0.0)
    gw = Gateway("http://127.0.0.1:9/v1", "m")  # the discard port: connections are refused
    async with gw.serve() as url:
        gw.open_session("a")
        r = await post(url, "a", {"messages": MESSAGES})
        calls = gw.close_session("a")
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"
    assert [c.status for c in calls] == [502] and "ConnectError" in calls[0].error


async def test_rollouts_spread_over_several_upstreams_and_each_stays_on_its_own():
    """Several inference nodes: rollouts are dealt out in turn, and a rollout's later turns go to the engine
    that holds its earlier ones (its prefix cache)."""
    with ScriptedServer(lambda b: Reply("a")) as one, ScriptedServer(lambda b: Reply("bb")) as two:
        gw = Gateway([one.base_url, two.base_url], "m")
        async with gw.serve() as url:
            for rollout in ("r0", "r1", "r2", "r3"):
                gw.open_session(rollout)
            for rollout in ("r0", "r1", "r2", "r3", "r0", "r1"):
                assert (await post(url, rollout, {"messages": MESSAGES})).status_code == 200
            served = {r: [c.completion_tokens for c in gw.close_session(r)] for r in ("r0", "r1", "r2", "r3")}
    assert len(one.requests) == 3 and len(two.requests) == 3
    assert served == {"r0": [1, 1], "r1": [2, 2], "r2": [1], "r3": [2]}  # engine one answers "a", two "bb"
