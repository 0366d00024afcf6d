"""A lean forward pass for Llama-family decoders, used by the embedded engine on a CPU.

transformers' modules cost more than the arithmetic on a small model: a SmolLM2-135M decode step runs
about 35 small ops and a dozen module calls per layer, and its `DynamicCache` concatenates every
layer's keys and values on each step, copying the whole cache. Measured on one CPU thread (torch
2.13, float32, one decode step): 1 row 59 ms of which ~45 ms matmul, 32 rows 137 ms of which 29 ms
`torch.cat` on the cache. This module runs the same arithmetic on the model's own weights with fewer
ops:

- q, k and v in one matmul and gate and up in another (fused copies of the weights, on a CPU packed
  for oneDNN's matmul, the vocabulary projection too: 2.3x faster at one row than `F.linear`);
- the rotary angles from the model's own rotary module (every RoPE scaling it supports), once per pass;
- a key/value cache with spare columns on the right (`GrowingCache`): a step writes one column in
  place and the cache grows by `GROWTH` columns when full, instead of a copy per step;
- one `scaled_dot_product_attention` per layer with grouped heads, under a boolean mask, and each
  RMSNorm as one fused `rms_norm`.

The numerics are transformers' (same ops in the same dtype: RMSNorm in float32, `q*cos +
rotate_half(q)*sin`); logits agree to float32 summation order (tests/unit/inference/test_lean_decoder.py
checks prefill and decode against the model's own forward). Architectures outside `SUPPORTED` (or
with sliding-window attention, or an activation other than SiLU) keep transformers' forward.

The fused weights are copies: after the engine changes the model's weights in place it calls
`refresh` on its own thread, before the next forward, so no step mixes two weight versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from looprl.inference.packed_linear import pack_weight

SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM")
GROWTH = 128  # columns a full cache grows by: one copy of the cache every GROWTH decode steps


class _Columns:
    """A [rows, heads, time, dim] tensor whose first `length` time columns are used; the rest are spare."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.storage, self.length = tensor, tensor.shape[2]

    @property
    def used(self) -> torch.Tensor:
        return self.storage[:, :, : self.length]

    def append(self, tensor: torch.Tensor) -> None:
        new = tensor.shape[2]
        if self.length + new > self.storage.shape[2]:
            self.storage = F.pad(self.used, (0, 0, 0, max(GROWTH, new)))
        self.storage[:, :, self.length : self.length + new] = tensor
        self.length += new


class _UsedColumns:
    """A cache attribute (`keys`, `values`) that reads as the used columns of its `_Columns`; assigning a
    tensor replaces them (no spare columns)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = f"_{name}"

    def __get__(self, cache: Any, owner: type | None = None) -> torch.Tensor:
        columns: _Columns = getattr(cache, self.name)
        return columns.used

    def __set__(self, cache: Any, tensor: torch.Tensor) -> None:
        setattr(cache, self.name, _Columns(tensor))


class GrowingCache:
    """One layer's keys and values [rows, kv_heads, time, head_dim], with spare time columns to the right.

    `keys` and `values` are views of the used columns; assigning one (the decode batch does, to add,
    drop or trim rows) replaces its storage with no spare columns, and the next `append` grows it.
    """

    keys = _UsedColumns()
    values = _UsedColumns()
    _keys: _Columns
    _values: _Columns

    def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        self.keys, self.values = keys, values

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write `keys`/`values` [rows, kv_heads, new, head_dim] after the used columns; return all used ones."""
        self._keys.append(keys)
        self._values.append(values)
        return self.keys, self.values


@dataclass
class LeanCache:
    """The cache of every layer; `layers` has the shape of transformers' `DynamicCache.layers`."""

    layers: list[GrowingCache]


class _Layer:
    """One decoder layer's weights: fused qkv and gate_up (packed on a CPU), norms, attention shape."""

    def __init__(self, layer: Any) -> None:
        self.source = layer
        attention = layer.self_attn
        self.head_dim = attention.head_dim
        self.scaling = attention.scaling
        self.input_norm = _rms_norm(layer.input_layernorm)
        self.post_attention_norm = _rms_norm(layer.post_attention_layernorm)
        # Qwen3: RMSNorm over each head's q and k
        self.q_norm = _rms_norm(attention.q_norm) if hasattr(attention, "q_norm") else None
        self.k_norm = _rms_norm(attention.k_norm) if hasattr(attention, "k_norm") else None
        self.q_size = attention.q_proj.out_features
        self.kv_size = attention.k_proj.out_features
        self.qkv, self.o, self.gate_up, self.down = self.fused()

    def fused(self) -> tuple[_Linear, _Linear, _Linear, _Linear]:
        """Copies of the layer's current weights: q|k|v, o, gate|up, down."""
        attention, mlp = self.source.self_attn, self.source.mlp
        qkv = _Linear.fused([attention.q_proj, attention.k_proj, attention.v_proj])
        gate_up = _Linear.fused([mlp.gate_proj, mlp.up_proj])
        return qkv, _Linear.fused([attention.o_proj]), gate_up, _Linear.fused([mlp.down_proj])

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                 cache: GrowingCache) -> torch.Tensor:
        rows, time, _ = x.shape
        h = self.input_norm(x)
        q, k, v = self.qkv(h).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(rows, time, -1, self.head_dim)
        k = k.view(rows, time, -1, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = _rotate(q.transpose(1, 2), cos, sin), _rotate(k.transpose(1, 2), cos, sin)
        keys, values = cache.append(k, v.view(rows, time, -1, self.head_dim).transpose(1, 2))
        attended = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scaling,
                                                  enable_gqa=True)
        x = x + self.o(attended.transpose(1, 2).reshape(rows, time, -1))
        gate, up = self.gate_up(self.post_attention_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class _Linear:
    """A matmul on a (fused) copy of one or more linear layers' weights: packed for oneDNN on a CPU in float32."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        self.weight, self.bias = weight, bias
        self.packed = pack_weight(weight)

    @classmethod
    def fused(cls, linears: list[torch.nn.Linear]) -> _Linear:
        weight = torch.cat([m.weight for m in linears]) if len(linears) > 1 else linears[0].weight.detach()
        biases = [m.bias for m in linears]
        bias = None if all(b is None for b in biases) else torch.cat(
            [b if b is not None else m.weight.new_zeros(m.out_features) for m, b in zip(linears, biases)])
        return cls(weight, bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is None:
            return F.linear(x, self.weight, self.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")


class LeanDecoder:
    """`model`'s forward pass for the engine: `(ids, mask, positions, cache)` -> (last position's logits, cache)."""

    @torch.inference_mode()
    def __init__(self, model: Any) -> None:
        self.model = model
        self.layers = [_Layer(layer) for layer in model.model.layers]
        self.norm = _rms_norm(model.model.norm)
        self.head = _Linear.fused([model.lm_head])

    @torch.inference_mode()
    def refresh(self) -> None:
        """Copy (and pack) the model's current weights: call after changing them in place. All or none:
        if a copy fails (out of memory), every layer keeps its old copies and the error is raised."""
        layers = [layer.fused() for layer in self.layers]
        head = _Linear.fused([self.model.lm_head])
        for layer, linears in zip(self.layers, layers, strict=True):
            layer.qkv, layer.o, layer.gate_up, layer.down = linears
        self.head = head

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                 cache: LeanCache | None) -> tuple[torch.Tensor, LeanCache]:
        """Run `ids` [rows, time] at `positions` [rows, time]; `mask` [rows, cached + time] is 1 where a
        cached or new position is a real token. Returns the next-token logits after the last column."""
        rows, time = ids.shape
        x = self.model.model.embed_tokens(ids)
        cos, sin = self.model.model.rotary_emb(x, positions)
        cos, sin = cos[:, None], sin[:, None]
        attend = _attention_mask(mask.bool(), time)
        if cache is None:
            empty = [x.new_zeros(rows, layer.kv_size // layer.head_dim, 0, layer.head_dim) for layer in self.layers]
            cache = LeanCache([GrowingCache(e, e) for e in empty])
        for layer, layer_cache in zip(self.layers, cache.layers):
            x = layer(x, cos, sin, attend, layer_cache)
        last = self.norm(x[:, -1])
        return self.head(last), cache


def lean_decoder(model: Any) -> LeanDecoder | None:
    """A `LeanDecoder` for `model` on a CPU when this module implements its architecture; else None."""
    config = model.config
    if model.device.type != "cpu" or type(model).__name__ not in SUPPORTED:
        return None
    if getattr(config, "hidden_act", "silu") != "silu" or _sliding_window(config):
        return None
    return LeanDecoder(model)


def _sliding_window(config: Any) -> bool:
    layer_types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        return True
    window = getattr(config, "sliding_window", None)
    return bool(window) and getattr(config, "use_sliding_window", True) and window < config.max_position_embeddings


def _rms_norm(module: Any) -> Any:
    """transformers' RMSNorm `module` as one fused op on float32 weights (the same values in our tests, half the
    time of its five ops on one row); the module itself otherwise, which upcasts lower precisions."""
    if module.weight.dtype != torch.float32:
        return module
    return lambda x: F.rms_norm(x, module.weight.shape, module.weight, module.variance_epsilon)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE as transformers applies it: x*cos + rotate_half(x)*sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _attention_mask(mask: torch.Tensor, time: int) -> torch.Tensor:
    """[rows, 1, time, cached + time] booleans: a query sees the real keys up to its own column.

    A padding query sees itself too, so that no softmax row is empty (its output is never used, but
    a NaN there would reach the cache)."""
    columns = mask.shape[1]
    if time == 1:
        return mask[:, None, None, :]
    query_columns = torch.arange(columns - time, columns, device=mask.device)[:, None]
    key_columns = torch.arange(columns, device=mask.device)[None, :]
    causal = key_columns <= query_columns
    return ((causal[None] & mask[:, None, :]) | (key_columns == query_columns)[None])[:, None]
