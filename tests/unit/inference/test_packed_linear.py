"""Prepacked CPU matmuls: the same logits as the plain model, and weight updates seen only after a repack."""

import torch

from looprl.inference.packed_linear import MIN_PACKED_ROWS, pack_linears
from looprl.model_loading import load_model_and_tokenizer


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


def test_a_failed_repack_falls_back_to_the_current_weights(tiny_model_dir, monkeypatch):
    """All or none: when packing the updated weights fails, every layer computes on its own (new) weights."""
    import pytest

    from looprl.inference import packed_linear

    plain, _ = load_model_and_tokenizer(str(tiny_model_dir))
    model, _ = load_model_and_tokenizer(str(tiny_model_dir))
    packed = pack_linears(model)
    assert packed is not None
    ids = torch.arange(3, 3 + 2 * MIN_PACKED_ROWS).reshape(2, MIN_PACKED_ROWS)
    calls = iter(range(1000))

    def failing_pack(weight):
        if next(calls) == 3:
            raise RuntimeError("oneDNN out of memory")
        return original(weight)

    original = packed_linear._pack
    monkeypatch.setattr(packed_linear, "_pack", failing_pack)
    with torch.inference_mode():
        for m in (model, plain):
            m.model.layers[0].mlp.down_proj.weight.mul_(1.5)
        with pytest.raises(RuntimeError, match="oneDNN"):
            packed.repack()
        assert torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-4) and not packed.forwards
