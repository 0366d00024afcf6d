"""One conformance suite, two engines: the embedded engine and vLLM (the CPU build in `.venv-vllm`,
which `make test` installs) on the bundled SmolLM2-135M-Instruct, each started once, as `looprl rl`
starts it (`inference.backends.engine_process`), and spoken to over HTTP.

Token fidelity is checked against the trainer's view: the logprobs each engine reports for the
tokens it sampled are recomputed by teacher forcing on a separately loaded copy of the weights (what
the trainer does at step 1), and their mismatch KL (the trainer's `mismatch_kl`) must stay below 1e-3.
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch
from safetensors.torch import save_file

from looprl.config import InferenceConfig
from looprl.config.trainer import LoraConfig
from looprl.inference.backends import engine_process
from looprl.model_loading import DEFAULT_MODEL, load_model_and_tokenizer, resolve_model
from looprl.orchestrator.training_samples import build_samples, extends
from looprl.store.records import ModelCall
from looprl.trainer.broadcast import broadcast_weights
from looprl.trainer.lora import add_lora
from looprl.trainer.loss.kl import token_kl

pytestmark = pytest.mark.slow
LORA_RANK = 8
TOLERANCE = 2e-3
SECRET = "conformance-run-secret"
"""The run secret both engines are started with, as `looprl rl` starts them; every request but /health sends it."""
AUTH = {"Authorization": f"Bearer {SECRET}"}
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module", params=["embedded", "vllm"])
def engine(request, tmp_path_factory):
    log = tmp_path_factory.mktemp(request.param) / "inference.log"
    weights_dirs = [tmp_path_factory.getbasetemp(), resolve_model(DEFAULT_MODEL)]  # the tests' weights, the original
    with engine_process(InferenceConfig(backend=request.param), DEFAULT_MODEL, log, lora_rank=LORA_RANK,
                        secret=SECRET, weights_dirs=weights_dirs) as engine:
        engine.backend = request.param
        yield engine


@pytest.fixture(scope="module")
def reference():
    return load_model_and_tokenizer(DEFAULT_MODEL)


def chat(engine, messages, model=None, **body):
    r = httpx.post(f"{engine.base_url}/chat/completions", timeout=600, headers=AUTH,
                   json={"model": model or engine.model_name, "messages": messages, **body})
    assert r.status_code == 200, r.text
    return r.json()


def update(engine, path, version, in_flight=False):
    r = httpx.post(f"{engine.url}/update_weights", timeout=600, headers=AUTH,
                   json={"path": str(path), "version": version, "in_flight": in_flight})
    assert r.status_code == 200, r.text
    return r.json()


def greedy_logprobs(engine, model=None):
    body = chat(engine, [{"role": "user", "content": "Say hello."}], model, max_tokens=6, temperature=0, logprobs=True)
    return torch.tensor([e["logprob"] for e in body["choices"][0]["logprobs"]["content"]])


@torch.no_grad()
def teacher_forced(model, prompt, completion):
    logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1:-1]
    return torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_health(engine):
    health = httpx.get(f"{engine.url}/health").json()
    assert health["status"] == "ok" and health["model"] == DEFAULT_MODEL
    assert health["weights"]["version"] == 0 and health["weights"]["model"] == DEFAULT_MODEL


def test_the_run_secret_is_required_and_weights_must_be_the_runs(engine, tmp_path_factory):
    """401 without the run secret (vLLM: its --api-key on /v1, looprl's routes on the rest), 403 outside the
    engine's weights directories, before anything is loaded."""
    outside = tmp_path_factory.getbasetemp().parent  # the weights directories' parent
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert httpx.get(f"{engine.base_url}/models", headers=headers).status_code == 401
        r = httpx.post(f"{engine.url}/update_weights", json={"path": str(outside)}, headers=headers, timeout=60)
        assert r.status_code == 401
    assert httpx.get(f"{engine.base_url}/models", headers=AUTH).status_code == 200
    r = httpx.post(f"{engine.url}/update_weights", json={"path": str(outside)}, headers=AUTH, timeout=60)
    assert r.status_code == 403 and r.json()["error"]["code"] == "path_outside_run"
    assert httpx.get(f"{engine.url}/health").status_code == 200


def test_prompt_token_ids_are_the_rendered_template(engine, reference):
    _, tokenizer = reference
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]
    body = chat(engine, messages, max_tokens=4, return_token_ids=True)
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert body["prompt_token_ids"] == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert body["usage"]["prompt_tokens"] == len(body["prompt_token_ids"])


def test_sampled_logprobs_match_the_trainer(engine, reference):
    """(a) of token fidelity: the trainer's logprobs of the recorded tokens against the engine's."""
    model, _ = reference
    questions = ["What is 2+2?", "Name three fruits.", "Write a haiku about rain."]

    def ask(i):
        return chat(engine, [{"role": "user", "content": questions[i]}], max_tokens=16, temperature=1.0, seed=i,
                    logprobs=True, return_token_ids=True)

    with ThreadPoolExecutor(3) as pool:  # concurrent requests, batched together by both engines
        bodies = list(pool.map(ask, range(3)))
    served, trained = [], []
    for body in bodies:
        choice = body["choices"][0]
        assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) <= 16
        served.append(torch.tensor([e["logprob"] for e in choice["logprobs"]["content"]]))
        trained.append(teacher_forced(model, body["prompt_token_ids"], choice["token_ids"]))
    served_all, trained_all = torch.cat(served), torch.cat(trained)
    kl = float(token_kl(served_all.double(), trained_all.double()).mean())  # float32 rounds tiny k3 terms to 0
    max_diff = float((served_all - trained_all).abs().max())
    print(f"{engine.backend}: mismatch KL {kl:.2e}, max |logprob diff| {max_diff:.2e} over {len(served_all)} tokens")
    assert kl < 1e-3
    assert torch.allclose(served_all, trained_all, atol=TOLERANCE)


def test_length_and_stop_finishes(engine):
    messages = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]
    long = chat(engine, messages, max_tokens=12, temperature=0)["choices"][0]
    assert long["finish_reason"] == "length"
    text = long["message"]["content"]
    stop = text.split(",")[2].strip() if text.count(",") >= 3 else text.split()[-1]
    stopped = chat(engine, messages, max_tokens=12, temperature=0, stop=[stop])["choices"][0]
    assert stopped["finish_reason"] == "stop" and stop not in stopped["message"]["content"]


def test_tool_calls_and_multi_turn_token_drift(engine):
    """(b) of token fidelity: turn 2 re-renders turn 1's tool call; does its prompt extend turn 1's tokens?

    Whichever it is, the sample builder must train exactly the sampled tokens: one sample when the
    prompt extends the previous call, two (counted as a `sample_breaks`) when the template drifted."""

    def call(city, i):
        function = {"name": "get_weather", "arguments": json.dumps({"city": city})}
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": f"call_{i}", "type": "function", "function": function}]}

    messages = [{"role": "user", "content": "Weather in London?"}, call("London", 1),
                {"role": "user", "content": "Weather in Rome?"}, call("Rome", 2),
                {"role": "user", "content": "Weather in Paris?"}]
    first = chat(engine, messages, tools=WEATHER, temperature=0, max_tokens=32, logprobs=True, return_token_ids=True)
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    [tool_call] = choice["message"]["tool_calls"]
    assert tool_call["function"]["name"] == "get_weather"
    assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}
    assistant = {"role": "assistant", "content": choice["message"]["content"],
                 "tool_calls": choice["message"]["tool_calls"]}
    messages += [assistant, {"role": "tool", "tool_call_id": tool_call["id"], "content": "sunny, 25 C"}]
    second = chat(engine, messages, tools=WEATHER, temperature=0, max_tokens=16, logprobs=True, return_token_ids=True)
    answer = second["choices"][0]
    assert answer["finish_reason"] in ("stop", "length") and answer["message"]["content"]

    calls = [record(i, body) for i, body in enumerate([first, second])]
    kept = extends(second["prompt_token_ids"], first["prompt_token_ids"] + choice["token_ids"])
    print(f"{engine.backend}: turn 2's prompt {'extends' if kept else 'does NOT extend'} turn 1's prompt + completion")
    samples = build_samples("r", calls, 1.0)
    assert len(samples) == (1 if kept else 2)
    sampled = [t for s in samples for t, m in zip(s.token_ids, s.loss_mask) if m]
    assert sampled == choice["token_ids"] + answer["token_ids"]  # exactly the sampled tokens, with loss


def record(idx, body):
    choice = body["choices"][0]
    return ModelCall(rollout_id="r", idx=idx, started_at=0.0, latency_s=0.0, status=200,
                     finish_reason=choice["finish_reason"], prompt_tokens=len(body["prompt_token_ids"]),
                     completion_tokens=len(choice["token_ids"]), prompt_token_ids=body["prompt_token_ids"],
                     completion_token_ids=choice["token_ids"],
                     completion_logprobs=[e["logprob"] for e in choice["logprobs"]["content"]])


def test_weight_update_changes_outputs(engine, reference, tmp_path):
    model, _ = reference
    before = greedy_logprobs(engine)
    state = {k: v * 1.5 for k, v in model.state_dict().items() if "layers.0." in k and "norm" in k}
    save_file(state, tmp_path / "model.safetensors")
    assert update(engine, tmp_path, 1) == {"version": 1, "path": str(tmp_path), "model": DEFAULT_MODEL}
    assert not torch.allclose(greedy_logprobs(engine), before, atol=1e-2)
    if engine.backend == "vllm":  # half of a fused layer (gate_up_proj): refused, nothing loaded
        half = tmp_path / "half"
        half.mkdir()
        save_file({"model.layers.0.mlp.up_proj.weight": model.state_dict()["model.layers.0.mlp.up_proj.weight"]},
                  half / "model.safetensors")
        r = httpx.post(f"{engine.url}/update_weights", timeout=600, headers=AUTH, json={"path": str(half)})
        assert r.status_code == 400 and "model.layers.0.mlp.gate_proj.weight" in r.json()["error"]["message"]
        assert httpx.get(f"{engine.url}/health").json()["weights"]["version"] == 1
    update(engine, resolve_model(DEFAULT_MODEL), 2)
    assert torch.allclose(greedy_logprobs(engine), before, atol=TOLERANCE)
    assert httpx.get(f"{engine.url}/health").json()["weights"]["version"] == 2


def test_lora_load_and_unload(engine, reference, tmp_path):
    """The trainer's LoRA broadcast: adapters alone for vLLM (a new adapter name), merged for the embedded engine."""
    base, _ = load_model_and_tokenizer(DEFAULT_MODEL)
    policy = add_lora(base, LoraConfig(rank=LORA_RANK))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    before = greedy_logprobs(engine)
    target = broadcast_weights(tmp_path, 3, policy, adapter_only=engine.backend == "vllm")
    loaded = update(engine, target, 3)
    adapter = loaded["model"]
    assert adapter == (f"{DEFAULT_MODEL}-step-3" if engine.backend == "vllm" else DEFAULT_MODEL)
    body = chat(engine, [{"role": "user", "content": "Say hello."}], adapter, max_tokens=6, temperature=0,
                logprobs=True, return_token_ids=True)
    served = torch.tensor([e["logprob"] for e in body["choices"][0]["logprobs"]["content"]])
    assert not torch.allclose(served, before, atol=1e-2)
    expected = teacher_forced(policy.eval(), body["prompt_token_ids"], body["choices"][0]["token_ids"])
    assert torch.allclose(served, expected, atol=TOLERANCE)
    assert update(engine, resolve_model(DEFAULT_MODEL), 4)["model"] == DEFAULT_MODEL  # unloads the adapter
    assert torch.allclose(greedy_logprobs(engine), before, atol=TOLERANCE)
    if engine.backend == "vllm":
        gone = httpx.post(f"{engine.base_url}/chat/completions", timeout=60, headers=AUTH,
                          json={"model": adapter, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1})
        assert gone.status_code == 404


def test_an_in_flight_update_changes_the_tokens_after_it(engine, reference, tmp_path):
    """Changed weights loaded while a reply decodes (`in_flight`, the orchestrator's in-flight updates): the reply
    goes on, its `weight_versions` spans say where the new version took over, the tokens before that are the old
    weights' (teacher forcing on them matches the served logprobs), and those after it are not."""
    model, _ = reference
    story = [{"role": "user", "content": "Write a very long story about a dragon."}]
    request = {"max_tokens": 200, "temperature": 0, "logprobs": True, "return_token_ids": True}
    started = time.perf_counter()
    alone = chat(engine, story, **request)["choices"][0]
    decoding_s = time.perf_counter() - started
    assert alone["finish_reason"] == "length", "the reply must outlast the update: it ended before max_tokens"
    scaled, whole = ("norm.weight", "up_proj.weight"), ("gate_proj.weight",)  # gate_up_proj is fused: both halves
    state = {k: v * (1.5 if k.endswith(scaled) else 1.0) for k, v in model.state_dict().items()
             if k.endswith(scaled + whole)}
    save_file(state, tmp_path / "model.safetensors")
    try:
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(chat, engine, story, **request)
            time.sleep(decoding_s / 4)
            update(engine, tmp_path, 10, in_flight=True)
            body = running.result()
    finally:
        update(engine, resolve_model(DEFAULT_MODEL), 11)
    choice = body["choices"][0]
    spans = choice["weight_versions"]
    assert len(spans) == 2 and spans[1]["version"] == "10", f"the reply did not span the update: {spans}"
    swap = spans[1]["start"]
    print(f"{engine.backend}: {len(alone['token_ids'])} tokens in {decoding_s:.1f} s alone; "
          f"the update took over at {swap}")
    assert spans[0] == {"version": spans[0]["version"], "start": 0, "end": swap} and spans[1]["end"] == 200
    served = torch.tensor([e["logprob"] for e in choice["logprobs"]["content"]])
    old = teacher_forced(model, body["prompt_token_ids"], choice["token_ids"])
    assert choice["token_ids"][:swap] == alone["token_ids"][:swap]  # greedy: the old weights' reply until the swap
    assert torch.allclose(served[:swap], old[:swap], atol=TOLERANCE)
    assert (served[swap:] - old[swap:]).abs().max() > 10 * TOLERANCE  # the new weights made the rest
