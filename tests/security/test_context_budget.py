"""The context budget holds on every call, the first included, and no field of a request lifts it.

Through the gateway, with the scripted server as the upstream engine. `honest` replies honour the
`max_tokens` they are sent (one token per character), as an engine does; the scripted prompt costs one
token per character of its messages' JSON (about 45 tokens for MESSAGES).
"""

import json

import httpx
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.config import SamplingParams
from looprl.gateway.app import Gateway

MESSAGES = [{"role": "user", "content": "hello"}]
BUDGET = 80


def honest(body):
    """Up to 200 tokens, cut at the request's `max_tokens` (then finish reason `length`)."""
    limit = body.get("max_tokens") or 200
    return Reply("y" * min(200, limit), finish_reason="length" if limit < 200 else None)


async def chat(url: str, body: dict) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url.format(rollout_id="a") + "/chat/completions", json=body)


async def test_the_first_call_fits_the_budget():
    with ScriptedServer(honest) as server:
        gateway = Gateway(server.base_url, "m", context_budget=BUDGET)
        async with gateway.serve() as url:
            gateway.open_session("a")
            response = await chat(url, {"messages": MESSAGES})
            [call] = gateway.close_session("a")
    assert response.status_code == 200 and call.status == 200
    assert call.prompt_tokens + call.completion_tokens == BUDGET, "the answer fills exactly the room the prompt left"
    assert response.json()["choices"][0]["finish_reason"] == "length"
    assert [r["max_tokens"] for r in server.requests] == [BUDGET, BUDGET - call.prompt_tokens]


async def test_max_completion_tokens_and_max_tokens_cannot_lift_the_budget():
    with ScriptedServer(honest) as server:
        gateway = Gateway(server.base_url, "m", SamplingParams(max_tokens=500), context_budget=BUDGET)
        async with gateway.serve() as url:
            gateway.open_session("a")
            first = await chat(url, {"messages": MESSAGES, "max_completion_tokens": 10_000,
                                              "max_tokens": 5_000})
            calls = gateway.close_session("a")
    assert first.status_code == 200 and all("max_completion_tokens" not in r for r in server.requests)
    assert all(r["max_tokens"] <= BUDGET for r in server.requests)
    assert calls[0].prompt_tokens + calls[0].completion_tokens <= BUDGET


def test_the_smallest_completion_limit_wins_and_is_sent_alone():
    from looprl.gateway.sampling_params import apply_sampling

    body = {"messages": MESSAGES, "max_tokens": 50, "max_completion_tokens": 10_000}
    out = apply_sampling(body, SamplingParams(max_tokens=20), "r", 0)
    assert out["max_tokens"] == 20 and "max_completion_tokens" not in out
    out = apply_sampling({**body, "max_completion_tokens": 7}, SamplingParams(), "r", 0)
    assert out["max_tokens"] == 7 and "max_completion_tokens" not in out


async def test_a_prompt_alone_over_the_budget_and_an_engine_ignoring_max_tokens_get_400():
    with ScriptedServer(lambda body: Reply("y" * 200)) as server:
        gateway = Gateway(server.base_url, "m", context_budget=BUDGET)
        async with gateway.serve() as url:
            gateway.open_session("a")
            ignored = await chat(url, {"messages": MESSAGES})  # 200 tokens whatever max_tokens says
            long_prompt = await chat(url, {"messages": MESSAGES * 3})
            calls = gateway.close_session("a")
    for response in (ignored, long_prompt):
        assert response.status_code == 400 and response.json()["error"]["code"] == "context_budget_exceeded"
    assert [c.status for c in calls] == [400, 400] and {c.error for c in calls} == {"context_budget_exceeded"}


async def test_a_streamed_call_is_held_to_the_budget_as_a_plain_one():
    """`stream: true` changes only how the answer is sent: the budget, the re-ask and the record are the same."""
    with ScriptedServer(honest) as server:
        gateway = Gateway(server.base_url, "m", context_budget=BUDGET)
        async with gateway.serve() as url:
            gateway.open_session("a")
            response = await chat(url, {"messages": MESSAGES, "max_completion_tokens": 10_000, "stream": True,
                                        "stream_options": {"include_usage": True}})
            [call] = gateway.close_session("a")
    events = [json.loads(e.removeprefix("data: ")) for e in response.text.split("\n\n") if e and "[DONE]" not in e]
    assert response.status_code == 200 and call.prompt_tokens + call.completion_tokens == BUDGET
    assert [r["max_tokens"] for r in server.requests] == [BUDGET, BUDGET - call.prompt_tokens]
    assert [c["finish_reason"] for e in events for c in e["choices"] if c["finish_reason"]] == ["length"]
    assert events[-1]["usage"]["total_tokens"] == BUDGET
