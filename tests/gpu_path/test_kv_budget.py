"""The embedded engine's KV-cache budget (issue #33, defect 5): a burst beyond it queues and completes, the
cache never holds more tokens than the budget, a request that can never fit fails alone, and the default
budget is a share of the device's free memory, by the same rule on a GPU as on the CPU."""

import asyncio

import pytest
import torch
from fastapi.testclient import TestClient
from tests.unit.inference.conftest import model_and_tokenizer, tiny_model_dir  # noqa: F401 (fixtures)

from looprl.config import InferenceConfig
from looprl.inference import kv_budget
from looprl.inference.backends import engine_process
from looprl.inference.batch import DecodeBatch
from looprl.inference.engine import Engine
from looprl.inference.kv_budget import KVBudgetExceeded, default_max_kv_tokens, free_memory, kv_bytes_per_token
from looprl.inference.server import create_app
from looprl.inference.token_sampling import SamplingParams

BUDGET = 200
MAX_TOKENS = 30


@pytest.fixture
def cache_sizes(monkeypatch):
    """(rows, columns) of the decode batch's KV cache after every decode step."""
    sizes: list[tuple[int, int]] = []
    decode = DecodeBatch.decode

    def recording(self, forward, input_ids, positions):
        logits = decode(self, forward, input_ids, positions)
        keys = self.cache.layers[0].keys  # [rows, kv heads, columns, head dim]
        sizes.append((keys.shape[0], keys.shape[2]))
        return logits

    monkeypatch.setattr(DecodeBatch, "decode", recording)
    return sizes


@pytest.fixture
async def engine(model_and_tokenizer):  # noqa: F811 (the fixture imported above)
    model, tokenizer = model_and_tokenizer
    engine = Engine(model, tokenizer, max_batch_size=64, max_kv_tokens=BUDGET)
    engine.start()
    yield engine
    engine.stop()


def prompt(engine, i):
    return engine.tokenizer(f"hello world {'two ' * (i % 3)}plus", add_special_tokens=False)["input_ids"]


async def test_a_burst_beyond_the_budget_queues_and_completes(engine, cache_sizes):
    """Before the budget, all 12 requests joined one batch, whose cache reached 340 tokens (12 rows)."""
    requests = [(prompt(engine, i), SamplingParams(max_tokens=MAX_TOKENS, seed=i)) for i in range(12)]
    assert sum(len(p) + MAX_TOKENS for p, _ in requests) > 2 * BUDGET
    results = await asyncio.wait_for(asyncio.gather(*(engine.generate(p, s) for p, s in requests)), 120)
    assert all(len(c.token_ids) == MAX_TOKENS or c.finish_reason == "stop" for [c] in results)
    assert max(rows * columns for rows, columns in cache_sizes) <= BUDGET
    longest = max(len(p) for p, _ in requests) + MAX_TOKENS
    assert 2 <= max(rows for rows, _ in cache_sizes) <= BUDGET // (longest - MAX_TOKENS)  # it still batches


async def test_a_request_that_can_never_fit_fails_alone(engine):
    running = [asyncio.create_task(engine.generate(prompt(engine, i), SamplingParams(max_tokens=MAX_TOKENS, seed=i)))
               for i in range(2)]
    await asyncio.sleep(0.05)
    with pytest.raises(KVBudgetExceeded, match=f"budget of {BUDGET}"):
        await engine.generate(prompt(engine, 0), SamplingParams(max_tokens=BUDGET))
    with pytest.raises(KVBudgetExceeded):  # n rows of a prompt that fits once
        await engine.generate(prompt(engine, 0), SamplingParams(max_tokens=MAX_TOKENS), n=8)
    for [completion] in await asyncio.wait_for(asyncio.gather(*running), 60):
        assert len(completion.token_ids) == MAX_TOKENS or completion.finish_reason == "stop"


def test_a_request_beyond_the_budget_is_a_bad_request(model_and_tokenizer):  # noqa: F811
    model, tokenizer = model_and_tokenizer
    with TestClient(create_app(Engine(model, tokenizer, max_kv_tokens=BUDGET), "tiny")) as client:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}]}
        too_long = client.post("/v1/chat/completions", json={**body, "max_tokens": BUDGET})
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "kv_budget_exceeded"
        assert client.post("/v1/chat/completions", json={**body, "max_tokens": 8}).status_code == 200


def test_the_default_budget_is_a_share_of_free_memory(model_and_tokenizer, monkeypatch):  # noqa: F811
    model, _ = model_and_tokenizer
    config = model.config
    head_dim = config.hidden_size // config.num_attention_heads
    assert kv_bytes_per_token(model) == 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4
    monkeypatch.setattr(kv_budget, "_available_ram", lambda: 2**30)
    assert default_max_kv_tokens(model) == int(kv_budget.KV_MEMORY_SHARE * 2**30) // kv_bytes_per_token(model)
    assert Engine(model, model_and_tokenizer[1]).max_kv_tokens == default_max_kv_tokens(model)


def test_a_gpus_free_memory_is_within_the_process_share(monkeypatch):
    """The GPU's rule, computed on the CPU: free memory, within `--gpu-memory-fraction` less what torch holds."""
    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (60 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 0.4)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 20 * gib)
    assert free_memory(torch.device("cuda", 0)) == 12 * gib  # 0.4 x 80 - 20, below the 60 free
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device: 1.0)
    assert free_memory(torch.device("cuda", 0)) == 60 * gib


def test_the_budget_reaches_the_engine_from_the_config():
    args = list(engine_process(InferenceConfig(max_kv_tokens=4096), "tiny").extra_args)
    assert args[args.index("--max-kv-tokens") + 1] == "4096"
    assert "--max-kv-tokens" not in engine_process(InferenceConfig(), "tiny").extra_args
    with pytest.raises(ValueError, match="vLLM sizes its own"):
        InferenceConfig(backend="vllm", max_kv_tokens=4096)
