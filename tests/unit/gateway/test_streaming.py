"""Streamed chat completions through the gateway, read by the real openai SDK: the same answer, record,
budget and errors as a plain call, in OpenAI's chunk shape."""

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from tests.support.scripted_server import Reply, ScriptedServer

from looprl.gateway.app import Gateway
from looprl.utils import chat_stream

MESSAGES = [{"role": "user", "content": "hello"}]
TOOLS = [{"type": "function", "function": {"name": name, "strict": True, "parameters": {"type": "object"}}}
         for name in ("add", "note")]
"""Strict: openai 2.x's stream helper parses the arguments of strict tools only (verifiers 0.4 pins openai<3)."""
RECORD_FIELDS = ("status", "finish_reason", "prompt_tokens", "completion_tokens", "prompt_token_ids",
                 "completion_token_ids", "completion_logprobs", "error")


def client(url: str, rollout_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=url.format(rollout_id=rollout_id), api_key="x", max_retries=0)


def same_record(a, b) -> bool:
    return all(getattr(a, f) == getattr(b, f) for f in RECORD_FIELDS)


async def post_stream(url: str, rollout_id: str = "a") -> httpx.Response:
    """A streamed call read whole by a plain HTTP client (no SDK parsing in the way). Its timeout is the SDK's
    order of magnitude, not httpx's 5 s: in `make test`, on two busy workers, the headers once took longer."""
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(url.format(rollout_id=rollout_id) + "/chat/completions",
                               json={"messages": MESSAGES, "stream": True})


async def refused(upstream: str, error: type[openai.APIStatusError], **gateway: Any) -> tuple[Any, list]:
    """A streamed call refused before its stream started: the SDK's exception and the session's calls."""
    gw = Gateway(upstream, "m", **gateway)
    async with gw.serve() as url:
        gw.open_session("a")
        with pytest.raises(error) as failed:
            await client(url, "a").chat.completions.create(model="m", messages=MESSAGES, stream=True)
        return failed.value, gw.close_session("a")


def data_events(text: str) -> list[str]:
    return [e.removeprefix("data: ") for e in text.split("\n\n") if e.startswith("data: ")]


@pytest.fixture
def fast_commit(monkeypatch):
    """A stream commits (and sends keep-alive comments) after 50 ms instead of 20 s."""
    monkeypatch.setattr(chat_stream, "KEEPALIVE_GRACE_S", 0.05)
    monkeypatch.setattr(chat_stream, "KEEPALIVE_INTERVAL_S", 0.05)


async def test_a_streamed_answer_is_the_plain_answer_and_is_recorded_alike():
    with ScriptedServer(lambda body: Reply("hi there, streaming")) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            c = client(url, "a")
            plain = await c.chat.completions.create(model="m", messages=MESSAGES, logprobs=True)
            stream = await c.chat.completions.create(model="m", messages=MESSAGES, logprobs=True, stream=True,
                                                     stream_options={"include_usage": True},
                                                     extra_headers={"X-Session-ID": "trace-1"})
            chunks = [chunk async for chunk in stream]
            plain_call, streamed_call = gw.close_session("a")
    assert all("stream" not in r and "stream_options" not in r for r in server.requests), "the upstream answers whole"
    assert server.requests[0] == server.requests[1], "a streamed call asks the upstream what a plain one does"
    assert same_record(plain_call, streamed_call) and streamed_call.idx == 1
    assert streamed_call.completion_token_ids and streamed_call.completion_logprobs
    assert chunks[0].choices[0].delta.role == "assistant" and all(c.object == "chat.completion.chunk" for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hi there, streaming"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage == plain.usage, "include_usage: a last chunk with usage"
    logprobs = [e for c in chunks if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert logprobs == plain.choices[0].logprobs.content
    token_ids = [t for c in chunks if c.choices for t in (c.choices[0].model_extra or {}).get("token_ids") or []]
    assert token_ids == streamed_call.completion_token_ids
    assert chunks[0].model_extra["prompt_token_ids"] == streamed_call.prompt_token_ids


async def test_tool_calls_stream_in_openai_delta_shape():
    calls = [("add", {"a": 1, "b": 2}), ("note", {"text": "ünïcode"})]
    with ScriptedServer(lambda body: Reply("let me add", tool_calls=calls)) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            c = client(url, "a")
            plain = await c.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
            async with c.chat.completions.stream(model="m", messages=MESSAGES, tools=TOOLS,
                                                 stream_options={"include_usage": True}) as stream:
                events = [event async for event in stream]
                final = await stream.get_final_completion()
            raw = await c.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
            deltas = [tc for chunk in [ch async for ch in raw] if chunk.choices
                      for tc in chunk.choices[0].delta.tool_calls or []]
            recorded = gw.close_session("a")
    message = final.choices[0].message
    assert message.content == plain.choices[0].message.content == "let me add"
    assert [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls] == \
        [(t.id, t.function.name, t.function.arguments) for t in plain.choices[0].message.tool_calls]
    assert final.choices[0].finish_reason == "tool_calls" and final.usage == plain.usage
    done = [e for e in events if e.type == "tool_calls.function.arguments.done"]
    assert [(e.index, e.name, json.loads(e.arguments)) for e in done] == [(0, "add", {"a": 1, "b": 2}),
                                                                          (1, "note", {"text": "ünïcode"})]
    assert [(d.index, d.id, d.type, d.function.name) for d in deltas] == [(0, "call_0", "function", "add"),
                                                                          (1, "call_1", "function", "note")]
    assert len(recorded) == 3 and same_record(recorded[0], recorded[1]) and same_record(recorded[0], recorded[2])


async def test_without_include_usage_no_usage_chunk_is_sent():
    with ScriptedServer(lambda body: Reply("ok")) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            r = await post_stream(url)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = data_events(r.text)
    assert events[-1] == "[DONE]" and len(events) == len([e for e in r.text.split("\n\n") if e])
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["choices"] for c in chunks) and "usage" not in json.dumps(chunks)


async def test_a_context_budget_refusal_is_an_http_400_before_the_stream():
    with ScriptedServer(lambda body: Reply("y" * 200)) as server:  # ignores max_tokens: over any budget
        error, [call] = await refused(server.base_url, openai.BadRequestError, context_budget=80)
    assert error.status_code == 400 and error.code == "context_budget_exceeded"
    assert call.status == 400 and call.error == "context_budget_exceeded"


async def test_an_upstream_error_is_its_http_status_and_a_bad_stream_option_a_400():
    with ScriptedServer(lambda body: Reply(status=503)) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            c = client(url, "a")
            with pytest.raises(openai.InternalServerError) as failed:
                await c.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            with pytest.raises(openai.BadRequestError) as bad:
                await c.chat.completions.create(model="m", messages=MESSAGES, stream=True,
                                                stream_options="usage")  # type: ignore[arg-type]
            calls = gw.close_session("a")
    assert failed.value.status_code == 503 and bad.value.code == "invalid_request"
    assert [c.status for c in calls] == [503] and calls[0].error


async def test_an_unreachable_upstream_is_a_502_before_the_stream(monkeypatch):
    monkeypatch.setattr("looprl.gateway.app.RETRY_DELAY_S", 0.0)
    error, [call] = await refused("http://127.0.0.1:9/v1", openai.APIStatusError)
    assert error.status_code == 502 and error.code == "upstream_unreachable" and call.status == 502


@pytest.mark.parametrize("status", [200, 503])
async def test_a_long_answer_commits_the_stream_and_keeps_it_alive(fast_commit, status):
    """Past the grace period the client gets 200 and keep-alive comments; the answer follows, or, if the
    upstream failed, one SSE error event and the end of the stream (no [DONE])."""
    with ScriptedServer(lambda body: Reply("slow answer", status=status), delay_s=0.5) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            raw = await post_stream(url)
            if status == 200:
                stream = await client(url, "a").chat.completions.create(model="m", messages=MESSAGES, stream=True)
                text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
            else:
                with pytest.raises(openai.APIError) as failed:
                    stream = await client(url, "a").chat.completions.create(model="m", messages=MESSAGES,
                                                                            stream=True)
                    [c async for c in stream]
            calls = gw.close_session("a")
    assert raw.status_code == 200 and raw.text.startswith(": keep-alive\n\n")
    assert [c.status for c in calls] == [status, status]
    if status == 200:
        assert raw.text.endswith("data: [DONE]\n\n") and text == "slow answer"
    else:
        events = data_events(raw.text)
        assert len(events) == 1 and json.loads(events[0])["error"]["message"]
        assert not isinstance(failed.value, openai.APIStatusError) and "scripted error" in failed.value.message


async def test_two_rollouts_stream_at_once_each_under_its_own_rollout():
    def reply(body):
        return Reply(f"answer for {body['messages'][-1]['content']}")

    with ScriptedServer(reply, delay_s=1.0) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            gw.open_session("b")

            async def one(rollout_id: str) -> tuple[str, int]:
                stream = await client(url, rollout_id).chat.completions.create(
                    model="m", messages=[{"role": "user", "content": rollout_id}], stream=True,
                    stream_options={"include_usage": True}, extra_headers={"X-Session-ID": rollout_id})
                text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
                return text, len(server.requests)

            (a, asked_by_a), (b, asked_by_b) = await asyncio.gather(one("a"), one("b"))
            calls = {r: gw.close_session(r) for r in ("a", "b")}
    assert (a, b) == ("answer for a", "answer for b")
    assert asked_by_a == asked_by_b == 2, "each stream ended after both had reached the upstream: they overlapped"
    for rollout_id, [call] in calls.items():
        assert call.rollout_id == rollout_id and call.completion_tokens == len(f"answer for {rollout_id}")


async def test_the_scripted_server_streams_too():
    """The test double answers `stream: true` itself, so streaming clients (verifiers' vf-eval) can use it."""
    with ScriptedServer(lambda body: Reply("direct", tool_calls=[("add", {"a": 1})])) as server:
        c = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        async with c.chat.completions.stream(model="m", messages=MESSAGES, tools=TOOLS,
                                             stream_options={"include_usage": True}) as stream:
            final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "direct" and message.tool_calls[0].function.name == "add" and final.usage.total_tokens


async def test_an_answer_that_lands_after_its_session_closed_is_cancelled_and_unrecorded(fast_commit):
    """The client of a committed stream goes away and the rollout's session closes: its call in flight is
    cancelled, and the calls handed over stay as they were."""
    with ScriptedServer(lambda body: Reply("late"), delay_s=0.5) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url, httpx.AsyncClient() as http:
            gw.open_session("a")
            async with http.stream("POST", url.format(rollout_id="a") + "/chat/completions",
                                   json={"messages": MESSAGES, "stream": True}) as r:
                first = await anext(r.aiter_bytes())  # the stream is committed: the client leaves
            session = gw._sessions["a"]
            calls = gw.close_session("a")
            await asyncio.sleep(0.8)  # past the upstream's answer
    assert first.startswith(b": keep-alive") and len(server.requests) == 1
    assert calls == [] and session.calls == [] and len(session.answers) == 0


async def test_a_committed_stream_ends_with_a_timeout_event_and_its_answer_is_cancelled(fast_commit, monkeypatch):
    monkeypatch.setattr(chat_stream, "MAX_ANSWER_S", 0.3)
    with ScriptedServer(lambda body: Reply("too late"), delay_s=1.0) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            raw = await post_stream(url)
            answers = len(gw._sessions["a"].answers)
            await asyncio.sleep(1.0)  # past the upstream's answer
            calls = gw.close_session("a")
    [error] = data_events(raw.text)
    assert raw.text.startswith(": keep-alive") and json.loads(error)["error"]["code"] == "timeout"
    assert answers == 0 and calls == [], "the answer was cancelled, not left to run and be recorded"


async def test_pending_answers_are_cancelled_when_the_gateway_stops(fast_commit):
    with ScriptedServer(lambda body: Reply("after the end"), delay_s=1.0) as server:
        gw = Gateway(server.base_url, "m")
        async with gw.serve() as url:
            gw.open_session("a")
            raw = asyncio.create_task(post_stream(url))
            while not server.requests:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # the stream is committed
        session = gw._sessions["a"]
        text = (await raw).text
    assert len(session.answers) == 0 and session.calls == []
    assert json.loads(data_events(text)[-1])["error"]["code"] == "cancelled"


async def test_a_200_that_cannot_be_streamed_is_recorded_as_the_502_sent():
    with ScriptedServer(lambda body: Reply("no choices")) as server:
        server._response = lambda body, r: {"id": "x", "object": "chat.completion", "choices": []}
        error, [call] = await refused(server.base_url, openai.APIStatusError)
    assert error.status_code == 502 and error.code == "bad_upstream_response"
    assert call.status == 502 and "cannot be streamed" in call.error
