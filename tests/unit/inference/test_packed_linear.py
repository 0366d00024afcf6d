"""Prepacked CPU matmuls: the same logits as the plain model, and weight updates seen only after a repack."""

import torch

from looprl.inference.packed_linear import MIN_PACKED_ROWS, pack_linears
from looprl.models import load_model_and_tokenizer


def test_packed_logits_match_and_follow_repacked_weights(tiny_model_dir):
    plain, _ = load_model_and_tokenizer(str(tiny_model_dir))
    model, _ = load_model_and_tokenizer(str(tiny_model_dir))
    packed = pack_linears(model)
    assert packed is not None and len(packed.forwards) == 2 * 7 + 1  # q k v o gate up down per layer, lm_head
    ids = torch.arange(3, 3 + 2 * MIN_PACKED_ROWS).reshape(2, MIN_PACKED_ROWS)
    with torch.inference_mode():
        assert torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-4)
        for m in (model, plain):
            m.model.layers[0].mlp.down_proj.weight.mul_(1.5)
        assert not torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-3)  # still the old packed weights
        packed.repack()
        assert torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-4)
        assert torch.allclose(model(ids[:1, :1]).logits, plain(ids[:1, :1]).logits, atol=1e-4)  # the plain path


def test_only_float32_cpu_models_are_packed(tiny_model_dir):
    model, _ = load_model_and_tokenizer(str(tiny_model_dir), dtype="bfloat16")
    assert pack_linears(model) is None
