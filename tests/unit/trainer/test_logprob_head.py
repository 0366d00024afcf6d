"""The trainer's logprob head: chunks of tokens give the full computation's logprobs, entropies and
gradients (to 1e-5, the entropy's too when asked) with a bounded peak memory, and the projection stays
float32 under bfloat16 autocast."""

from functools import partial

import pytest
import torch
from tests.support.memory import peak_rss_growth_mib
from tests.support.tiny_model import tiny_model
from transformers import LlamaConfig, LlamaForCausalLM

from looprl.trainer import logprob_head
from looprl.trainer.logprob_head import chunked_logprobs
from looprl.trainer.logprobs import token_logprobs


def test_chunks_equal_the_full_computation():
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(37, 16, generator=gen, requires_grad=True)
    weight = torch.randn(53, 16, generator=gen, requires_grad=True)
    targets = torch.randint(0, 53, (37,), generator=gen)
    upstream = torch.randn(37, generator=gen)

    full = torch.log_softmax(hidden @ weight.T, dim=-1)
    expected = full.gather(1, targets[:, None]).squeeze(1)
    expected_entropy = -(full.exp() * full).sum(-1)
    expected_grads = torch.autograd.grad((expected * upstream).sum(), (hidden, weight))

    logprobs, entropy = chunked_logprobs(hidden, weight, targets, chunk=5)  # 8 chunks, the last of 2
    grads = torch.autograd.grad((logprobs * upstream).sum(), (hidden, weight))
    torch.testing.assert_close(logprobs, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy, atol=1e-5, rtol=1e-5)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_the_entropy_gradient_equals_the_full_computation():
    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(23, 8, generator=gen, requires_grad=True)
    weight = torch.randn(31, 8, generator=gen, requires_grad=True)
    targets = torch.randint(0, 31, (23,), generator=gen)
    up_logprobs, up_entropy = torch.randn(23, generator=gen), torch.randn(23, generator=gen)

    full = torch.log_softmax(hidden @ weight.T, dim=-1)
    expected = (full.gather(1, targets[:, None]).squeeze(1) * up_logprobs - (full.exp() * full).sum(-1) * up_entropy)
    expected_grads = torch.autograd.grad(expected.sum(), (hidden, weight))

    logprobs, entropy = chunked_logprobs(hidden, weight, targets, chunk=6, entropy_grad=True)
    grads = torch.autograd.grad((logprobs * up_logprobs + entropy * up_entropy).sum(), (hidden, weight))
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_without_entropy_grad_the_entropy_is_a_constant():
    hidden, weight = torch.randn(4, 8, requires_grad=True), torch.randn(11, 8, requires_grad=True)
    _, entropy = chunked_logprobs(hidden, weight, torch.zeros(4, dtype=torch.long))
    assert not entropy.requires_grad


def test_peak_memory_is_a_chunk_of_logits_not_all_of_them(monkeypatch):
    """2048 loss tokens x 65536 vocabulary: all logits in float32 are 512 MiB a copy."""
    monkeypatch.setattr(logprob_head, "CHUNK_TOKENS", 128)  # 32 MiB a copy
    model = LlamaForCausalLM(LlamaConfig(vocab_size=65536, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True))
    ids = torch.randint(0, 65536, (2049,))
    token_logprobs(model, ids[:8], torch.arange(8))  # the head in place, allocator warm

    def forward_and_backward(entropy_grad: bool) -> None:
        logprobs, entropy = token_logprobs(model, ids, torch.arange(2049), with_entropy=True,
                                           entropy_grad=entropy_grad)
        assert entropy is not None
        (logprobs + entropy).sum().backward()

    for entropy_grad in (False, True):  # the entropy bonus's gradient takes no more than the logprobs'
        growth = peak_rss_growth_mib(partial(forward_and_backward, entropy_grad))
        assert growth < 256, f"{growth:.0f} MiB"


def test_the_head_is_float32_under_bfloat16_autocast():
    model = tiny_model()
    ids, pos = torch.tensor([5, 9, 3, 7, 2, 11, 4]), torch.arange(7)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logprobs, _ = token_logprobs(model, ids, pos)
        hidden = model.model(input_ids=ids[None], position_ids=pos[None]).last_hidden_state[0, :-1]
    expected = torch.log_softmax(hidden.float() @ model.model.embed_tokens.weight.float().T, -1)
    torch.testing.assert_close(logprobs[1:], expected.gather(1, ids[1:, None]).squeeze(1), atol=1e-5, rtol=1e-5)
    assert logprobs.dtype == torch.float32


@pytest.mark.parametrize("config", [{"final_logit_softcapping": 30.0}])
def test_models_that_change_logits_after_the_head_are_refused(config):
    from looprl.errors import UserError

    model = tiny_model()
    model.config.final_logit_softcapping = config["final_logit_softcapping"]
    with pytest.raises(UserError, match="soft-caps"):
        logprob_head.logprob_head(model)
