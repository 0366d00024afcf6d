"""The trainer's attention: one function registered with transformers, its kernel chosen by the mask.

`use(model, kernel)` sets the model's attention implementation: `sdpa` is transformers' own; for
`flex_attention` the model gets `FLEX` (`looprl_flex`), this module's function, which runs flex_attention
(`looprl.device.flex_attention`, compiled once with dynamic shapes) when a pass hands it a `BlockMask`
and sdpa when it hands it a dense mask or none. `trainer.logprobs` builds the mask of each pass for the
kernel `looprl.device.pass_kernel` picks, so one loaded model serves both kinds of pass: on a GPU every
pass is flex; on the CPU the passes with gradients are sdpa (torch has no flex_attention backward there)
and the others flex, with no reload and no flag flipped on the model.

transformers' own flex_attention is not used: it compiles flex_attention anew whenever a module's
`training` flag differs from the previous call's, and with static shapes first, so grad and no-grad
passes over rows of varied lengths reach torch's recompile limit (8) within a step or two. Models that
need a score modification (attention soft-capping, sinks, position bias) take transformers' flex path,
as does attention dropout (which it refuses: flex_attention has none).
"""

from __future__ import annotations

from typing import Any

import torch

from looprl import device
from looprl.device import Kernel
from looprl.utils.logger import get_logger

FLEX = "looprl_flex"
"""The attention implementation name a flex_attention model carries."""


def kernel(model: Any) -> Kernel:
    """The kernel `use` gave `model` (sdpa unless flex_attention)."""
    return "flex_attention" if getattr(model.config, "_attn_implementation", None) == FLEX else "sdpa"


def use(model: Any, chosen: Kernel) -> Any:
    """Give `model` the `chosen` kernel; an architecture without flex_attention support in transformers
    keeps sdpa, with a warning."""
    if chosen == "flex_attention" and not getattr(model, "_supports_flex_attn", False):
        get_logger().warning("{} has no flex_attention support in transformers: the trainer uses sdpa, with a "
                             "dense T x T mask for prompt trees (long packed rows need much more memory)",
                             type(model).__name__)
        chosen = "sdpa"
    _register()
    model.set_attn_implementation(FLEX if chosen == "flex_attention" else "sdpa")
    return model


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(FLEX, attend)
    # a pass without a mask (one plain sequence, run by sdpa) gets sdpa's: `is_causal`, no tensor
    AttentionMaskInterface.register(FLEX, sdpa_mask)


def attend(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attention_mask: Any, scaling: float | None = None, dropout: float = 0.0,
           **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' attention signature: `[batch, heads, T, dim]` in, `([batch, T, heads, dim], None)` out."""
    from torch.nn.attention.flex_attention import BlockMask
    from transformers.integrations.flex_attention import flex_attention_forward
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not isinstance(attention_mask, BlockMask):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    if dropout or any(kwargs.get(name) is not None for name in ("softcap", "s_aux", "position_bias")):
        return flex_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    heads, kv_heads = query.shape[1], key.shape[1]
    gqa = heads & (heads - 1) == 0  # flex's grouped-query kernels want a power-of-two head count
    if not gqa:
        key, value = (x.repeat_interleave(heads // kv_heads, dim=1) for x in (key, value))
    out = device.flex_attention(query, key, value, attention_mask, scaling, gqa)
    return out.transpose(1, 2).contiguous(), None
