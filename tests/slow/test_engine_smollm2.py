"""The embedded engine on the bundled SmolLM2-135M-Instruct, in process: n > 1 logprobs, weight updates.

Prompt token ids, tool calls and what both engines share are in `test_engine_conformance.py`.

The engine serves in process (FastAPI's TestClient); a second, separately loaded copy of the same
weights is the teacher-forced reference. Logprobs are compared under the engine's default
definition, `raw_logprobs`: log_softmax of the raw logits (temperature 1), whatever temperature the
request sampled with.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from fastapi.testclient import TestClient
from safetensors.torch import save_file

from looprl.inference.engine import Engine
from looprl.inference.server import create_app
from looprl.model_loading import DEFAULT_MODEL, load_model_and_tokenizer

pytestmark = pytest.mark.slow
TOLERANCE = 2e-3


@pytest.fixture(scope="module")
def reference():
    return load_model_and_tokenizer(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model, tokenizer = load_model_and_tokenizer(DEFAULT_MODEL)
    weights_dirs = [tmp_path_factory.getbasetemp()]  # where the tests write the weights they load
    with TestClient(create_app(Engine(model, tokenizer), DEFAULT_MODEL, weights_dirs=weights_dirs)) as client:
        yield client


def chat(client, messages, **body):
    r = client.post("/v1/chat/completions", json={"model": DEFAULT_MODEL, "messages": messages, **body})
    assert r.status_code == 200, r.text
    return r.json()


@torch.no_grad()
def teacher_forced(model, prompt, completion):
    logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_concurrent_logprobs_match_teacher_forcing(client, reference):
    model, _ = reference
    questions = ["What is 2+2?", "Name three fruits.", "Write a haiku about rain, please, in English."]

    def ask(i):
        return chat(client, [{"role": "user", "content": questions[i]}], max_tokens=12 + 4 * i, temperature=0.8,
                    seed=i, n=2, logprobs=True, return_token_ids=True)

    with ThreadPoolExecutor(3) as pool:
        bodies = list(pool.map(ask, range(3)))
    for body in bodies:
        for choice in body["choices"]:
            served = torch.tensor([e["logprob"] for e in choice["logprobs"]["content"]])
            expected = teacher_forced(model, body["prompt_token_ids"], choice["token_ids"])
            assert torch.allclose(served, expected, atol=TOLERANCE), (served - expected).abs().max()


def test_update_weights_changes_logprobs(client, reference, tmp_path):
    model, _ = reference
    messages = [{"role": "user", "content": "Say hello."}]
    greedy = {"max_tokens": 8, "temperature": 0, "logprobs": True, "return_token_ids": True}
    before = chat(client, messages, **greedy)
    state = model.state_dict()
    original = {"model.norm.weight": state["model.norm.weight"].clone()}
    modified = {"model.norm.weight": state["model.norm.weight"] * 1.3}
    save_file(modified, tmp_path / "model.safetensors")
    (tmp_path / "original").mkdir()
    save_file(original, tmp_path / "original" / "model.safetensors")
    r = client.post("/update_weights", json={"path": str(tmp_path), "version": 5})
    assert r.json() == {"version": 5, "path": str(tmp_path), "model": DEFAULT_MODEL}
    assert client.get("/health").json()["weights"]["version"] == 5
    after = chat(client, messages, **greedy)
    lp = lambda body: [e["logprob"] for e in body["choices"][0]["logprobs"]["content"]]  # noqa: E731
    assert lp(before) != lp(after)
    with torch.no_grad():
        state["model.norm.weight"].copy_(modified["model.norm.weight"])  # the reference follows the update
    expected = teacher_forced(model, after["prompt_token_ids"], after["choices"][0]["token_ids"])
    assert torch.allclose(torch.tensor(lp(after)), expected, atol=TOLERANCE)
    assert client.post("/update_weights", json={"path": str(tmp_path / "original")}).json()["version"] == 6
    with torch.no_grad():
        state["model.norm.weight"].copy_(original["model.norm.weight"])
    assert torch.allclose(torch.tensor(lp(chat(client, messages, **greedy))), torch.tensor(lp(before)), atol=TOLERANCE)

