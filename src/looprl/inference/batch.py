"""The decode batch: rows of different lengths sharing one left-padded KV cache.

Continuous batching on a forward pass (`Forward`): `lean_decoder` for Llama-family models on a CPU,
else the model's own forward and transformers' cache. Prompts admitted together are prefilled in one
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
from transformers import LlamaForCausalLM

from looprl.inference.lean_decoder import LeanDecoder, lean_decoder
from looprl.inference.packed_linear import pack_linears

MIN_SHARED_SAVING = 64  # token passes a shared prefix must save to be run on its own (see `_shared_prefix`)
# transformers 5.x renamed the forward argument `past_key_values` to `cache`.
_CACHE_ARG = "cache" if "cache" in inspect.signature(LlamaForCausalLM.forward).parameters else "past_key_values"


class TransformersForward:
    """The model's own forward pass, in the engine's calling convention (see `Forward`); on a CPU in
    float32 its linear layers run on prepacked oneDNN weights (`packed_linear`) unless `pack` is False."""

    def __init__(self, model: Any, pack: bool = True) -> None:
        self.model = model
        self.packed = pack_linears(model) if pack else None

    def refresh(self) -> None:
        """Repack the linear layers after their weights changed in place."""
        if self.packed is not None:
            self.packed.repack()

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
                 cache: Any) -> tuple[torch.Tensor, Any]:
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         logits_to_keep=1, **({_CACHE_ARG: cache} if cache is not None else {}))
        return out.logits[:, -1], out.cache if _CACHE_ARG == "cache" else out.past_key_values


Forward = LeanDecoder | TransformersForward
"""`forward(ids [rows, time], mask [rows, cached + time], positions [rows, time], cache or None)` ->
(next-token logits [rows, vocab], cache whose `layers` hold `keys` and `values` [rows, kv_heads, time, dim])."""


def model_forward(model: Any) -> Forward:
    """The lean forward where it implements `model` (Llama-family decoders on a CPU), else the model's own."""
    return lean_decoder(model) or TransformersForward(model)


@dataclass
class Prefill:
    """Prompts run together: their KV cache and mask (one row per copy) and next-token logits [rows, vocab]."""

    cache: Any
    mask: torch.Tensor
    logits: torch.Tensor


@torch.inference_mode()
def prefill(forward: Forward, prompts: list[list[int]], copies: list[int], device: torch.device) -> Prefill:
    """Run `prompts` together; prompt i gets `copies[i]` consecutive rows.

    Their longest common prefix (a chat template's system prompt, an environment's instructions) is
    run once, on one row, when that saves at least MIN_SHARED_SAVING token passes; its cache is copied
    to every prompt and the rest of each prompt runs in one left-padded pass after it, so a row reads
    [prefix, padding, rest of prompt], the padding hidden by the mask. On the generation bench's 32 chat
    prompts (38 tokens, 24 shared) that is 472 token passes instead of 1,216.
    """
    shared = _shared_prefix(prompts)
    cache, mask = None, torch.zeros(len(prompts), 0, dtype=torch.long, device=device)
    if shared:
        ids = torch.tensor([prompts[0][:shared]], device=device)
        _, cache = forward(ids, torch.ones_like(ids), torch.arange(shared, device=device)[None], None)
        first = torch.zeros(len(prompts), dtype=torch.long, device=device)
        for layer in cache.layers:
            layer.keys, layer.values = layer.keys[first], layer.values[first]
        mask = torch.ones(len(prompts), shared, dtype=torch.long, device=device)
    rests = [p[shared:] for p in prompts]
    length = max(len(r) for r in rests)
    ids = torch.tensor([[0] * (length - len(r)) + r for r in rests], device=device)
    rest_mask = torch.tensor([[0] * (length - len(r)) + [1] * len(r) for r in rests], device=device)
    positions = (shared + rest_mask.cumsum(dim=1) - 1).clamp(min=0)
    mask = torch.cat([mask, rest_mask], dim=1)
    logits, cache = forward(ids, mask, positions, cache)
    index = torch.repeat_interleave(torch.arange(len(prompts), device=device), torch.tensor(copies, device=device))
    padding = (mask[index] == 0)[:, None, :, None]
    for layer in cache.layers:
        layer.keys = layer.keys[index].masked_fill(padding, 0.0)
        layer.values = layer.values[index].masked_fill(padding, 0.0)
    return Prefill(cache, mask[index], logits[index])


def _shared_prefix(prompts: list[list[int]]) -> int:
    """How many leading tokens every prompt shares (leaving each at least one of its own), or 0 when
    running them once would save fewer than MIN_SHARED_SAVING token passes: the extra pass on one row
    reads every weight once, which costs about as much as that many tokens in a batch."""
    shortest = min(len(p) for p in prompts) - 1
    shared = 0
    while shared < shortest and all(p[shared] == prompts[0][shared] for p in prompts):
        shared += 1
    return shared if shared * (len(prompts) - 1) >= MIN_SHARED_SAVING else 0


class DecodeBatch:
    """KV cache ([rows, heads, time, dim] per layer) and attention mask ([rows, time]) of the running rows."""

    def __init__(self) -> None:
        self.cache: Any = None
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
        for mine, theirs in zip(self.cache.layers, new.cache.layers):
            mine.keys = torch.cat([_pad_left(mine.keys, length), _pad_left(theirs.keys, length)])
            mine.values = torch.cat([_pad_left(mine.values, length), _pad_left(theirs.values, length)])
        self.mask = torch.cat([_pad_left(self.mask, length), _pad_left(new.mask, length)])

    @torch.inference_mode()
    def decode(self, forward: Forward, input_ids: list[int], positions: list[int]) -> torch.Tensor:
        """Feed one token per row (at the given positions); return next-token logits [rows, vocab]."""
        device = self.mask.device
        self.mask = torch.cat([self.mask, self.mask.new_ones(self.size, 1)], dim=1)
        logits, self.cache = forward(torch.tensor(input_ids, device=device)[:, None], self.mask,
                                     torch.tensor(positions, device=device)[:, None], self.cache)
        return logits

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
        for layer in self.cache.layers:
            layer.keys = layer.keys[index, :, start:]
            layer.values = layer.values[index, :, start:]


def _pad_left(t: torch.Tensor, length: int) -> torch.Tensor:
    """Zero-pad the time axis (dim -2 for KV tensors [b, h, t, d]; dim -1 for masks [b, t])."""
    missing = length - (t.shape[-1] if t.dim() == 2 else t.shape[-2])
    if missing == 0:
        return t
    return F.pad(t, (missing, 0)) if t.dim() == 2 else F.pad(t, (0, 0, missing, 0))
