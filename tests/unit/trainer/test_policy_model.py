"""The trainer's policy: an architecture without flex_attention support still trains (sdpa, with a warning)."""

from unittest import mock

from tests.support.tiny_model import tiny_model, tiny_tokenizer
from transformers import LlamaForCausalLM

from looprl.trainer import attention
from looprl.trainer import model as policy_model


class _NoFlexLlama(LlamaForCausalLM):
    _supports_flex_attn = False


def test_a_model_without_flex_attention_falls_back_to_sdpa_with_a_warning(monkeypatch):
    no_flex = _NoFlexLlama(tiny_model().config)
    monkeypatch.setattr(policy_model, "load_model_and_tokenizer",
                        lambda name, dtype, device: (no_flex, tiny_tokenizer()))
    logger = mock.Mock()
    monkeypatch.setattr(attention, "get_logger", lambda: logger)
    loaded, _ = policy_model.load_policy("any", kernel="flex_attention")
    assert loaded.config._attn_implementation == "sdpa" and loaded.training
    assert "no flex_attention support" in logger.warning.call_args.args[0]


def test_the_kl_reference_runs_in_train_mode_with_dropout_off():
    """GPU defect 4: a reference in eval mode flips `training` against the policy every micro-batch, and each
    flip makes transformers wrap its compiled flex_attention anew (recompiles up to torch's limit, then the
    unfused kernel). Train mode with every dropout off computes what eval mode would, without the flip."""
    import torch
    from transformers import LlamaConfig

    config = LlamaConfig(**{**tiny_model().config.to_dict(), "attention_dropout": 0.5})
    model = LlamaForCausalLM(config)
    model.model.layers[0].mlp.add_module("drop", torch.nn.Dropout(0.3))
    expected = model.eval()(torch.tensor([[3, 4, 5, 6]])).logits
    reference = policy_model.as_reference(model)
    assert reference.training and all(m.training for m in reference.modules())
    assert all(m.p == 0.0 for m in reference.modules() if isinstance(m, torch.nn.Dropout))
    assert not any(p.requires_grad for p in reference.parameters())
    with torch.no_grad():
        first, second = (reference(torch.tensor([[3, 4, 5, 6]])).logits for _ in range(2))
    assert torch.equal(first, second) and torch.allclose(first, expected, atol=1e-6)
