"""Prepacked oneDNN matmuls for the embedded engine's linear layers on a CPU.

`torch.nn.functional.linear` hands MKL the weight in its stored row-major layout on every call.
oneDNN can instead reorder each weight once into the blocked layout its matmul kernel reads, and
reuse it on every forward. On SmolLM2-135M in float32, one CPU thread, one decode step (CPU time,
median of four, a busy machine): 8 rows 107 -> 85 ms, 32 rows 228 -> 178 ms; a single row is
no faster (it only streams the weights once), so small inputs keep the plain path. Logits differ
from the plain matmul by under 1e-4 (summation order only).

The packed copies live beside the model's own parameters, which stay what the state dict, tied
embeddings and in-place weight updates use: after an update the engine calls `repack` on its own
thread, before the next forward, so no step ever mixes packed tensors of two weight versions. The
cost is a second copy of the linear weights in memory.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

MIN_PACKED_ROWS = 4  # below this many input rows the plain matmul is as fast (one pass over the weights)
PACKING_BATCH_HINT = 32  # the row count oneDNN tunes its packed layout for (the engine's typical decode batch)


class _PackedForward:
    """A Linear's forward that reads its prepacked weight (the module's own weight below MIN_PACKED_ROWS rows)."""

    def __init__(self, module: torch.nn.Linear) -> None:
        self.module = module
        self.packed = _pack(module.weight)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.numel() < MIN_PACKED_ROWS * x.shape[-1]:
            return F.linear(x, self.module.weight, self.module.bias)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.module.bias, "none", [], "")


class PackedLinears:
    """Every `nn.Linear` of a model running on prepacked weights; `repack` after changing the weights in place."""

    def __init__(self, model: Any) -> None:
        self.forwards: list[_PackedForward] = []
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                forward = _PackedForward(module)
                module.forward = forward  # type: ignore[method-assign,assignment]  # an instance attribute: the class is untouched
                self.forwards.append(forward)

    @torch.inference_mode()
    def repack(self) -> None:
        """Pack the (updated) weights anew, all or none: if packing fails, the layers go back to the plain
        matmul on their own, current weights (slower, never stale) and the error is raised."""
        try:
            packed = [_pack(forward.module.weight) for forward in self.forwards]
        except Exception:
            self.unpack()
            raise
        for forward, tensor in zip(self.forwards, packed, strict=True):
            forward.packed = tensor

    def unpack(self) -> None:
        """Every layer back on its class's own forward (the instance attribute removed)."""
        for forward in self.forwards:
            del forward.module.forward
        self.forwards = []


def pack_linears(model: Any) -> PackedLinears | None:
    """Pack `model`'s linear layers when it runs in float32 on a CPU with oneDNN; else None (the plain path)."""
    if not _packable(model.device, model.dtype):
        return None
    with torch.inference_mode():
        return PackedLinears(model)


def pack_weight(weight: torch.Tensor) -> torch.Tensor | None:
    """`weight` reordered for oneDNN's matmul when it is a float32 CPU tensor and oneDNN is there; else None."""
    if not _packable(weight.device, weight.dtype):
        return None
    return _pack(weight)


def _packable(device: torch.device, dtype: torch.dtype) -> bool:
    """oneDNN's packed matmul is used for float32 on a CPU, where torch has oneDNN."""
    return device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACKING_BATCH_HINT)
