"""Fixtures: a fresh tiny model and tokenizer per test."""

import pytest
from tests.support.tiny_model import tiny_model, tiny_tokenizer
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast


@pytest.fixture
def model() -> LlamaForCausalLM:
    return tiny_model()


@pytest.fixture
def tokenizer() -> PreTrainedTokenizerFast:
    return tiny_tokenizer()
