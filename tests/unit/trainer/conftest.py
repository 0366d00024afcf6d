"""Fixtures: a fresh tiny model and tokenizer per test."""

import pytest
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from tests.support.tiny_model import tiny_model, tiny_tokenizer


@pytest.fixture
def model() -> LlamaForCausalLM:
    return tiny_model()


@pytest.fixture
def tokenizer() -> PreTrainedTokenizerFast:
    return tiny_tokenizer()
