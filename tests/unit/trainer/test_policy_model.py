"""The trainer's policy: an architecture without flex_attention support still trains (sdpa, with a warning)."""

from unittest import mock

from tests.support.tiny_model import tiny_model, tiny_tokenizer
from transformers import LlamaForCausalLM

from looprl.trainer import model as policy_model


class _NoFlexLlama(LlamaForCausalLM):
    _supports_flex_attn = False


def test_a_model_without_flex_attention_falls_back_to_sdpa_with_a_warning(monkeypatch):
    no_flex = _NoFlexLlama(tiny_model().config)
    monkeypatch.setattr(policy_model, "load_model_and_tokenizer", lambda name, dtype: (no_flex, tiny_tokenizer()))
    logger = mock.Mock()
    monkeypatch.setattr(policy_model, "get_logger", lambda: logger)
    loaded, _ = policy_model.load_policy("any", attn_implementation="flex_attention")
    assert loaded.config._attn_implementation == "sdpa" and loaded.training
    assert "no flex_attention support" in logger.warning.call_args.args[0]
