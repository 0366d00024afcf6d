"""The decode batch: rows of different lengths sharing one left-padded KV cache.

Continuous batching on plain transformers. Prompts admitted together are prefilled in one
left-padded forward pass (as `generate` does: on a CPU, one pass over many rows costs far less than
many passes over one row each). Their cache is then left-padded to the running batch's length and
concatenated on the batch axis. Every decode step feeds one token per row with explicit position
ids and an attention mask that hides the padding. Finished rows are removed with an index select,
and columns that became padding for every row are trimmed off the left. Cache entries at padded
positions are zeroed, so nothing computed for padding can leak into real rows.

Every tensor lives on the model's device (`model.device`: the CPU, or the GPU of `--device`); the
ones made here from Python lists are created there, so a decode step copies only token ids in.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import DynamicCache, LlamaForCausalLM

# transformers 5.x renamed the forward argument `past_key_values` to `cache`.
_CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"



def _kv_layers(cache: DynamicCache) -> list[Any]:
    """The cache's layers, each with filled `keys` and `values` tensors. transformers types them as any
    layer kind (linear-attention layers have none) with tensors that are None until the first forward."""
    return cache.layers


@dataclass
class Prefill:
    """Prompts run together: their KV cache and mask (one row per copy) and next-token logits [rows, vocab]."""

    cache: DynamicCache
    mask: torch.Tensor
    logits: torch.Tensor


@torch.inference_mode()
def prefill(model: Any, prompts: list[list[int]], copies: list[int]) -> Prefill:
    """Run `prompts` in one left-padded pass; prompt i gets `copies[i]` consecutive rows."""
    device = model.device
    length = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (length - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (length - len(p)) + [1] * len(p) for p in prompts], device=device)
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache = out.cache if _CACHE_ARG == "cache" else out.past_key_values
    index = torch.repeat_interleave(torch.arange(len(prompts), device=device), torch.tensor(copies, device=device))
    padding = (mask[index] == 0)[:, None, :, None]
    for layer in cache.layers:
        layer.keys = layer.keys[index].masked_fill(padding, 0.0)
        layer.values = layer.values[index].masked_fill(padding, 0.0)
    return Prefill(cache, mask[index], out.logits[index, -1])


class DecodeBatch:
    """KV cache ([rows, heads, time, dim] per layer) and attention mask ([rows, time]) of the running rows."""

    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)

    @property
    def size(self) -> int:
        return self.mask.shape[0]

    @torch.inference_mode()
    def add(self, new: Prefill) -> None:
        """Append the rows of `new` after the running ones."""
        if self.cache is None:
            self.cache, self.mask = new.cache, new.mask
            return
        length = max(self.mask.shape[1], new.mask.shape[1])
        for mine, theirs in zip(_kv_layers(self.cache), _kv_layers(new.cache)):
            mine.keys = torch.cat([_pad_left(mine.keys, length), _pad_left(theirs.keys, length)])
            mine.values = torch.cat([_pad_left(mine.values, length), _pad_left(theirs.values, length)])
        self.mask = torch.cat([_pad_left(self.mask, length), _pad_left(new.mask, length)])

    @torch.inference_mode()
    def decode(self, model: Any, input_ids: list[int], positions: list[int]) -> torch.Tensor:
        """Feed one token per row (at the given positions); return next-token logits [rows, vocab]."""
        device = self.mask.device
        self.mask = torch.cat([self.mask, self.mask.new_ones(self.size, 1)], dim=1)
        out = model(
            input_ids=torch.tensor(input_ids, device=device)[:, None],
            attention_mask=self.mask,
            position_ids=torch.tensor(positions, device=device)[:, None],
            use_cache=True,
            **{_CACHE_ARG: self.cache},
        )
        return out.logits[:, -1]

    @torch.inference_mode()
    def keep(self, rows: list[int]) -> None:
        """Keep only `rows` (in this order), then trim columns that are padding in every row."""
        if not rows:
            self.cache, self.mask = None, torch.zeros(0, 0, dtype=torch.long)
            return
        assert self.cache is not None
        index = torch.tensor(rows, device=self.mask.device)
        self.mask = self.mask[index]
        start = int(self.mask.any(dim=0).nonzero()[0])
        self.mask = self.mask[:, start:]
        for layer in _kv_layers(self.cache):
            layer.keys = layer.keys[index, :, start:]
            layer.values = layer.values[index, :, start:]


def _pad_left(t: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad the time axis (dim -2 for KV tensors [b, h, t, d]; dim -1 for masks [b, t])."""
    missing = length - (t.shape[-1] if t.dim() == 2 else t.shape[-2])
    if missing == 0:
        return t
    return F.pad(t, (missing, 0)) if t.dim() == 2 else F.pad(t, (0, 0, missing, 0))
