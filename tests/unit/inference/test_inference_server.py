"""The HTTP surface on a tiny random model: response fields, errors, weight updates, tool calls."""

import asyncio
import json

import pytest
from fastapi.testclient import TestClient
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk
from safetensors.torch import save_file

from looprl.inference.engine import Completion, Engine
from looprl.inference.server import create_app

NAME = "tiny"


@pytest.fixture
def client(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    with TestClient(create_app(Engine(model, tokenizer), NAME, weights_dirs=[tmp_path])) as client:
        yield client


def chat(client, headers=None, **body):
    body = {"model": NAME, "messages": [{"role": "user", "content": "hello world"}], "max_tokens": 6, **body}
    return client.post("/v1/chat/completions", json=body, headers=headers)


def test_health_and_models(client):
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["model"] == NAME and health["weights"]["version"] == 0
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == [NAME]


def test_completion_with_token_ids_and_logprobs(client):
    r = chat(client, return_token_ids=True, logprobs=True, top_logprobs=2, n=2, seed=1)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion" and body["model"] == NAME
    prompt = body["prompt_token_ids"]
    assert body["usage"]["prompt_tokens"] == len(prompt)
    assert body["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in body["choices"])
    for choice in body["choices"]:
        assert choice["finish_reason"] in ("stop", "length")
        entries = choice["logprobs"]["content"]
        assert len(entries) == len(choice["token_ids"])
        assert all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in entries)
        assert isinstance(choice["message"]["content"], str)
        # the initial weights (version 0) sampled every token: one span over all of them, vLLM's shape
        assert choice["weight_versions"] == [{"version": "0", "start": 0, "end": len(choice["token_ids"])}]


def test_prompt_ids_are_the_rendered_template(client, model_and_tokenizer):
    _, tokenizer = model_and_tokenizer
    messages = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "two plus two"}]
    body = chat(client, messages=messages, return_token_ids=True).json()
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert body["prompt_token_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]


def test_token_fields_absent_unless_asked(client):
    body = chat(client).json()
    assert body["prompt_token_ids"] is None
    assert body["choices"][0]["token_ids"] is None and body["choices"][0]["logprobs"] is None
    assert body["choices"][0]["weight_versions"] is None


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"model": "other"}, 404, "model_not_found"),
        ({"messages": []}, 400, "invalid_request"),
        ({"temperature": -1}, 400, "invalid_request"),
        ({"n": 0}, 400, "invalid_request"),
        ({"stream_options": "usage"}, 400, "invalid_request"),
        ({"stream": True, "stream_options": {"include_usage": "true"}}, 400, "invalid_request"),
        ({"stop": [""]}, 400, "invalid_request"),
        ({"top_logprobs": 2}, 400, "invalid_request"),
        ({"tool_choice": "required"}, 400, "invalid_request"),
        ({"max_tokens": 100000}, 400, "context_length_exceeded"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "invalid_messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, 400, "invalid_request"),
    ],
)
def test_bad_requests_get_openai_error_bodies(client, body, status, code):
    r = chat(client, **body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["message"] and error["type"] == "invalid_request_error"


def test_invalid_json_is_a_400(client):
    r = client.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()


def test_update_weights_changes_logprobs_and_version(client, model_and_tokenizer, tmp_path):
    model, _ = model_and_tokenizer
    greedy = {"temperature": 0, "logprobs": True, "return_token_ids": True}
    before = chat(client, **greedy).json()["choices"][0]
    save_file({k: v * 2 for k, v in model.state_dict().items() if "norm" in k}, tmp_path / "model.safetensors")
    r = client.post("/update_weights", json={"path": str(tmp_path)})
    assert r.status_code == 200 and r.json() == {"version": 1, "path": str(tmp_path), "model": NAME}
    assert client.get("/health").json()["weights"] == {"version": 1, "path": str(tmp_path), "model": NAME}
    after = chat(client, **greedy).json()["choices"][0]
    assert [e["logprob"] for e in before["logprobs"]["content"]] != [e["logprob"] for e in after["logprobs"]["content"]]
    bad = client.post("/update_weights", json={"path": str(tmp_path / "missing")})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_weights"


def test_tool_calls_are_parsed_only_when_tools_are_given(client, monkeypatch):
    text = 'ok <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>'

    async def fake_generate(prompt_ids, params, n=1):
        return [Completion(token_ids=[1], logprobs=[0.0], top_logprobs=[[]], text=text, finish_reason="stop")]

    monkeypatch.setattr(Engine, "generate", lambda self, *a, **k: fake_generate(*a, **k))
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    choice = chat(client, tools=tools).json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "ok"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1}'}
    plain = chat(client).json()["choices"][0]
    assert plain["finish_reason"] == "stop" and plain["message"]["content"] == text
    none = chat(client, tools=tools, tool_choice="none").json()["choices"][0]
    assert none["message"]["tool_calls"] == []


@pytest.mark.parametrize("n", [1, 2])
def test_a_streamed_answer_is_the_plain_answer_as_server_sent_events(client, n):
    greedy = {"temperature": 0, "logprobs": True, "return_token_ids": True, "n": n}
    plain = chat(client, **greedy).json()
    r = chat(client, **greedy, stream=True, stream_options={"include_usage": True},
             headers={"X-Session-ID": "a-trace"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [e.removeprefix("data: ") for e in r.text.split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    state = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    final = state.current_completion_snapshot  # the SDK's final parse raises on a `length` finish
    assert final.usage.model_dump(exclude_none=True) == plain["usage"] and len(final.choices) == n
    for streamed, choice in zip(final.choices, plain["choices"], strict=True):
        assert streamed.message.content == choice["message"]["content"]
        assert streamed.finish_reason == choice["finish_reason"]
        assert [e.logprob for e in streamed.logprobs.content] == [e["logprob"] for e in choice["logprobs"]["content"]]
        token_ids = [t for c in chunks for ch in c["choices"] if ch["index"] == choice["index"]
                     for t in ch.get("token_ids") or []]
        assert token_ids == choice["token_ids"]
    assert chunks[0]["prompt_token_ids"] == plain["prompt_token_ids"]


def test_a_null_include_usage_streams_without_the_usage_chunk(client):
    """The gateway's rule (`looprl.utils.chat_stream.StreamFields`): null is false, as no field at all."""
    r = chat(client, stream=True, stream_options={"include_usage": None})
    *chunks, done = [e.removeprefix("data: ") for e in r.text.split("\n\n") if e]
    assert r.status_code == 200 and done == "[DONE]" and chunks
    assert all(json.loads(c)["choices"] for c in chunks)


def test_a_streamed_request_error_is_a_plain_json_error(client):
    r = chat(client, stream=True, max_tokens=100000)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_a_streamed_answer_in_progress_is_cancelled_before_the_engine_stops(model_and_tokenizer, monkeypatch):
    from looprl.utils import chat_stream

    monkeypatch.setattr(chat_stream, "KEEPALIVE_GRACE_S", 0.05)
    model, tokenizer = model_and_tokenizer
    ended = []

    async def wedged(self, prompt_ids, params, n=1):
        try:
            await asyncio.Event().wait()
        finally:
            ended.append("cancelled")

    stop = Engine.stop
    monkeypatch.setattr(Engine, "generate", wedged)
    monkeypatch.setattr(Engine, "stop", lambda self: (ended.append("engine stopped"), stop(self)))
    body = {"model": NAME, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with TestClient(create_app(Engine(model, tokenizer), NAME)) as client, \
            client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert next(r.iter_bytes()).startswith(b": keep-alive")
    assert ended == ["cancelled", "engine stopped"], "the answer ends before the engine stops"
