"""The decode batch: rows of different lengths sharing one left-padded KV cache.

Continuous batching on plain transformers: each new request is prefilled on its own (no padding,
so its prompt is processed exactly as in a teacher-forced pass), then its cache is left-padded to
the batch's length and concatenated on the batch axis. Every decode step feeds one token per row
with explicit position ids and an attention mask that hides the padding. Finished rows are removed
with an index select, and columns that became padding for every row are trimmed off the left.
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


@dataclass
class Prefill:
    """One prompt run on its own: its KV cache (repeated for `n` rows) and next-token logits [n, vocab]."""

    cache: DynamicCache
    logits: torch.Tensor
    length: int


@torch.inference_mode()
def prefill(model: Any, prompt_ids: list[int], copies: int) -> Prefill:
    """Run one prompt (no padding, exactly as a teacher-forced pass would) for `copies` rows."""
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True, logits_to_keep=1)
    cache = out.cache if _CACHE_ARG == "cache" else out.past_key_values
    if copies > 1:
        cache.batch_repeat_interleave(copies)
    return Prefill(cache, out.logits[:, -1].expand(copies, -1), len(prompt_ids))


class DecodeBatch:
    """KV cache ([rows, heads, time, dim] per layer) and attention mask ([rows, time]) of the running rows."""

    def __init__(self) -> None:
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)

    @property
    def size(self) -> int:
        return self.mask.shape[0]

    @torch.inference_mode()
    def add(self, prefills: list[Prefill]) -> torch.Tensor:
        """Append the rows of `prefills` (one concatenation per layer); return their logits [rows, vocab]."""
        parts = [(self.cache, self.mask)] if self.cache is not None else []
        parts += [(p.cache, torch.ones(p.logits.shape[0], p.length, dtype=torch.long)) for p in prefills]
        length = max(mask.shape[1] for _, mask in parts)
        merged = parts[0][0]
        for i, layer in enumerate(merged.layers):
            layer.keys = torch.cat([_pad_left(cache.layers[i].keys, length) for cache, _ in parts])
            layer.values = torch.cat([_pad_left(cache.layers[i].values, length) for cache, _ in parts])
        self.cache = merged
        self.mask = torch.cat([_pad_left(mask, length) for _, mask in parts])
        return torch.cat([p.logits for p in prefills])

    @torch.inference_mode()
    def decode(self, model: Any, input_ids: list[int], positions: list[int]) -> torch.Tensor:
        """Feed one token per row (at the given positions); return next-token logits [rows, vocab]."""
        self.mask = torch.cat([self.mask, torch.ones(self.size, 1, dtype=torch.long)], dim=1)
        out = model(
            input_ids=torch.tensor(input_ids)[:, None],
            attention_mask=self.mask,
            position_ids=torch.tensor(positions)[:, None],
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
        index = torch.tensor(rows)
        self.mask = self.mask[index]
        start = int(self.mask.any(dim=0).nonzero()[0])
        self.mask = self.mask[:, start:]
        for layer in self.cache.layers:
            layer.keys = layer.keys[index, :, start:]
            layer.values = layer.values[index, :, start:]


def _pad_left(t: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad the time axis (dim -2 for KV tensors [b, h, t, d]; dim -1 for masks [b, t])."""
    missing = length - (t.shape[-1] if t.dim() == 2 else t.shape[-2])
    if missing == 0:
        return t
    return F.pad(t, (missing, 0)) if t.dim() == 2 else F.pad(t, (0, 0, missing, 0))
