"""The lean forward pass against each architecture's own forward: prefill of left-padded prompts, decode
steps on a growing cache, weights refreshed after an in-place update, and the models it leaves alone."""

import pytest
import torch
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from looprl.inference import lean_decoder as lean_module
from looprl.inference.batch import DecodeBatch, TransformersForward, model_forward, prefill
from looprl.inference.lean_decoder import GrowingCache, LeanDecoder, lean_decoder

SHAPE = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)


def build(cls, config_cls, **extra):
    torch.manual_seed(0)
    return cls(config_cls(**SHAPE, **extra)).eval()


ARCHITECTURES = {
    "llama-tied": lambda: build(LlamaForCausalLM, LlamaConfig, tie_word_embeddings=True),
    "llama-rope-scaled": lambda: build(LlamaForCausalLM, LlamaConfig, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}),
    "qwen2-qkv-bias": lambda: build(Qwen2ForCausalLM, Qwen2Config),
    "qwen3-qk-norm": lambda: build(Qwen3ForCausalLM, Qwen3Config, head_dim=16),
    "mistral": lambda: build(MistralForCausalLM, MistralConfig, sliding_window=None),
}
PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]


@torch.inference_mode()
def alone(model, ids: list[int]) -> torch.Tensor:
    return model(torch.tensor([ids])).logits[0, -1]


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_prefill_and_decode_match_the_models_own_forward(name):
    model = ARCHITECTURES[name]()
    forward = lean_decoder(model)
    assert isinstance(forward, LeanDecoder)
    batch = DecodeBatch()
    new = prefill(forward, PROMPTS, [1, 2, 1], model.device)
    batch.add(new)
    rows = [PROMPTS[0], PROMPTS[1], PROMPTS[1], PROMPTS[2]]
    for row, prompt in enumerate(rows):
        assert torch.allclose(new.logits[row], alone(model, prompt), atol=1e-5)
    for step in range(3):  # 3 steps past a cache that grows in place
        tokens = [20 + row + step for row in range(len(rows))]
        logits = batch.decode(forward, tokens, [len(r) for r in rows])
        rows = [r + [t] for r, t in zip(rows, tokens)]
        for row, ids in enumerate(rows):
            assert torch.allclose(logits[row], alone(model, ids), atol=1e-5), (name, step, row)


def test_rows_added_and_dropped_mid_decode_keep_their_own_cache(monkeypatch):
    """Rows joining a running batch, rows leaving it, and the cache growing past its spare columns."""
    monkeypatch.setattr(lean_module, "GROWTH", 2)
    model = ARCHITECTURES["llama-tied"]()
    forward = lean_decoder(model)
    batch = DecodeBatch()
    batch.add(prefill(forward, PROMPTS[:2], [1, 1], model.device))
    rows = PROMPTS[:2]
    for step in range(5):
        if step == 2:
            batch.add(prefill(forward, [PROMPTS[2]], [1], model.device))
            rows = rows + [PROMPTS[2]]
        if step == 4:
            batch.keep([2, 0])
            rows = [rows[2], rows[0]]
        tokens = [30 + step] * len(rows)
        logits = batch.decode(forward, tokens, [len(r) for r in rows])
        rows = [r + [t] for r, t in zip(rows, tokens)]
        for row, ids in enumerate(rows):
            assert torch.allclose(logits[row], alone(model, ids), atol=1e-5), (step, row)


def test_refresh_copies_weights_changed_in_place():
    model = ARCHITECTURES["qwen2-qkv-bias"]()
    forward = lean_decoder(model)
    with torch.inference_mode():
        model.model.layers[0].self_attn.k_proj.bias.add_(0.5)
        model.model.layers[1].mlp.up_proj.weight.mul_(1.5)
    stale = prefill(forward, [PROMPTS[0]], [1], model.device).logits[0]
    assert not torch.allclose(stale, alone(model, PROMPTS[0]), atol=1e-3)  # the copies are the old weights
    forward.refresh()
    assert torch.allclose(prefill(forward, [PROMPTS[0]], [1], model.device).logits[0], alone(model, PROMPTS[0]),
                          atol=1e-5)


def test_other_models_keep_their_own_forward():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    windowed = build(MistralForCausalLM, MistralConfig, sliding_window=64)
    assert lean_decoder(gpt2) is None and lean_decoder(windowed) is None
    assert isinstance(model_forward(gpt2), TransformersForward)


def test_keys_and_values_are_set_and_grown_apart():
    cache = GrowingCache(torch.zeros(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
    cache.keys = torch.zeros(1, 1, 1, 2)  # the batch sets them one after the other, to different lengths meanwhile
    assert cache.values.shape[2] == 3
    cache.values = torch.ones(1, 1, 1, 2)
    keys, values = cache.append(torch.full((1, 1, 1, 2), 2.0), torch.full((1, 1, 1, 2), 3.0))
    assert keys[0, 0, :, 0].tolist() == [0.0, 2.0] and values[0, 0, :, 0].tolist() == [1.0, 3.0]


@pytest.mark.parametrize("kind", ["lean", "transformers"])
def test_a_shared_prefix_is_run_once(kind):
    """Prompts sharing a long prefix (a system prompt): the prefix runs on one row, then the rest of each
    prompt after it, and every row's logits still equal its prompt run alone, through decode too."""
    model = ARCHITECTURES["llama-tied"]()
    forward = lean_decoder(model) if kind == "lean" else TransformersForward(model)
    calls: list[tuple[int, int]] = []

    def counted(ids, mask, positions, cache):
        calls.append(tuple(ids.shape))
        return forward(ids, mask, positions, cache)

    system = list(range(40, 80))  # 40 tokens shared by 3 prompts: 80 token passes saved
    prompts = [system + [5, 6, 7], system + [8], system + [9, 10]]
    batch = DecodeBatch()
    new = prefill(counted, prompts, [2, 1, 1], model.device)
    assert calls == [(1, 40), (3, 3)]
    batch.add(new)
    rows = [prompts[0], prompts[0], prompts[1], prompts[2]]
    for row, ids in enumerate(rows):
        assert torch.allclose(new.logits[row], alone(model, ids), atol=1e-5)
    logits = batch.decode(counted, [1, 2, 3, 4], [len(r) for r in rows])
    for row, ids in enumerate(rows):
        assert torch.allclose(logits[row], alone(model, ids + [row + 1]), atol=1e-5)
    calls.clear()
    prefill(counted, [system + [5], [3] + system], [1, 1], model.device)  # nothing shared: one pass
    assert calls == [(2, 41)]
