"""What differs by device, decided in one place for the trainer and the embedded engine.

Every other line of the trainer and the engine is the same on the CPU and on a GPU; the choices that
depend on the device (or on the dtype a user picked) are these functions:

- `resolve`: `auto|cpu|cuda` to a `torch.device` (CUDA when torch sees it).
- `compute_dtype`: `auto` is bfloat16 on CUDA, float32 on the CPU (`config.engine_dtype`'s rule, shared
  with the engine's `inference.dtype`).
- `mixed_precision`: how a compute dtype narrower than the float32 master weights is applied. Always
  FSDP2's `MixedPrecisionPolicy` (layer parameters cast to the compute dtype for forward and backward,
  gradients reduced and stored in float32), on a one-rank process group when there is a single trainer
  process: the field's way (prime-rl shards even one GPU), and the only one that sends q, k and v to the
  attention kernel in one dtype. Autocast over float32 weights does not: transformers' rotary embedding
  multiplies autocast's bfloat16 q and k by float32 cos/sin and hands the kernel float32 q and k next to a
  bfloat16 v (flex_attention, which autocast does not cover, fails on it).
- `attention_kernel`: `trainer.attention`; `auto` is flex_attention (block masks for prompt trees) on
  CUDA, sdpa elsewhere.
- `pass_kernel`: the one concession the CPU makes. torch has no flex_attention backward on the CPU, so a
  pass that needs gradients runs sdpa there (with the same tree mask, dense); passes without gradients
  (the KL reference's) run flex_attention exactly as on a GPU.
- `limit_memory`: the cap on a GPU's caching allocator (a no-op on the CPU). When the engine and the
  trainer share a GPU (`[deployment]`, the one-GPU default), the launcher sets `LOOPRL_GPU_MEMORY_FRACTION`
  (`deployment.inference_memory_fraction`): the engine stops at that share, the trainer at the rest less a
  margin. The launcher gives the engine its GPUs with `CUDA_VISIBLE_DEVICES`, so it always uses `cuda:0`.

`flex_attention` is the trainer's flex kernel, compiled once with dynamic shapes so rows of every length
share one graph per grad mode. `kernel_contract` is a check for tests and debugging: within it, every
call of sdpa and of `flex_attention` must get q, k and v in one dtype, the configured compute dtype. The
trainer and the embedded engine enter it when `LOOPRL_KERNEL_CONTRACT=1` is set (`make gpu-path` does).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch

from looprl.config.run import engine_dtype
from looprl.errors import UserError

Kernel = Literal["sdpa", "flex_attention"]
KERNEL_CONTRACT_ENV = "LOOPRL_KERNEL_CONTRACT"


def resolve(name: str, index: int = 0) -> torch.device:
    """The device for `auto|cpu|cuda` (CUDA device `index`: the trainer's `LOCAL_RANK`, the engine's 0)."""
    cuda = torch.cuda.is_available()
    if name == "cuda" and not cuda:
        raise UserError("device cuda, but torch sees no CUDA device (use auto or cpu)")
    return torch.device("cuda", index) if name == "cuda" or (name == "auto" and cuda) else torch.device("cpu")


def compute_dtype(name: str, device: torch.device) -> torch.dtype:
    """`auto|float32|bfloat16|float16` resolved: `auto` is bfloat16 on CUDA, float32 on the CPU."""
    return getattr(torch, engine_dtype(name, gpu=device.type == "cuda"))  # type: ignore[no-any-return]


def mixed_precision(dtype: torch.dtype) -> bool:
    """Whether the trainer shards with FSDP2 even as one process: its `MixedPrecisionPolicy` is how a compute
    dtype narrower than the float32 master weights is applied (see the module docstring)."""
    return dtype != torch.float32


def attention_kernel(name: str, device: torch.device) -> Kernel:
    """`trainer.attention` resolved: `auto` is flex_attention on CUDA, sdpa elsewhere."""
    if name == "auto":
        return "flex_attention" if device.type == "cuda" else "sdpa"
    return "flex_attention" if name == "flex_attention" else "sdpa"


def pass_kernel(kernel: Kernel, device: torch.device, grad: bool) -> Kernel:
    """The kernel of one pass: `kernel`, except that the CPU has no flex_attention backward, so there a pass
    with gradients runs sdpa. This is the only line where the CPU takes another path than a GPU."""
    return "sdpa" if kernel == "flex_attention" and grad and device.type == "cpu" else kernel


def limit_memory(device: torch.device, fraction: float | None) -> None:
    """Cap this process's share of `device`'s memory at `fraction` (a no-op on the CPU or without one)."""
    if fraction is not None and not 0 < fraction <= 1:
        raise UserError(f"the GPU memory fraction (--gpu-memory-fraction) must be in (0, 1], got {fraction}")
    if fraction is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(fraction, device)


@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    from torch.nn.attention.flex_attention import flex_attention as flex

    # dynamic=True from the first call: without it the first row length is baked in and the second
    # recompiles; with it, one graph per grad mode serves every length (transformers' own wrapper also
    # recompiles whenever a module's `training` flag flips)
    return torch.compile(flex, dynamic=True)


def flex_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, block_mask: Any,
                   scale: float | None, enable_gqa: bool) -> torch.Tensor:
    """flex_attention under `block_mask`, compiled once (see `_compiled_flex`)."""
    return _compiled_flex()(query, key, value, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa)


@contextlib.contextmanager
def kernel_contract(dtype: torch.dtype, on_first: Callable[[str], None] | None = None) -> Iterator[Counter[str]]:
    """Within it, every call of `torch.nn.functional.scaled_dot_product_attention` and of `flex_attention`
    checks that q, k and v share `dtype` and raises otherwise; yields the count of checked calls per kernel.
    `on_first(kernel)` runs after each kernel's first checked call."""
    import torch.nn.functional as F

    calls: Counter[str] = Counter()
    real_sdpa, real_flex = F.scaled_dot_product_attention, globals()["flex_attention"]

    def checked(kernel: str, real: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        def call(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            dtypes = (query.dtype, key.dtype, value.dtype)
            if dtypes != (dtype, dtype, dtype):
                raise AssertionError(f"{kernel} got q, k, v as {', '.join(map(str, dtypes))}; the compute "
                                     f"dtype is {dtype}")
            calls[kernel] += 1
            if calls[kernel] == 1 and on_first is not None:
                on_first(kernel)
            return real(query, key, value, *args, **kwargs)

        return call

    F.scaled_dot_product_attention = checked("sdpa", real_sdpa)  # type: ignore[assignment]
    globals()["flex_attention"] = checked("flex_attention", real_flex)
    try:
        yield calls
    finally:
        F.scaled_dot_product_attention = real_sdpa
        globals()["flex_attention"] = real_flex


_process_checks = contextlib.ExitStack()


def kernel_contract_from_env(dtype: torch.dtype, process: str) -> None:
    """With `LOOPRL_KERNEL_CONTRACT=1`, put the rest of this process (`process`: trainer or inference) under
    `kernel_contract(dtype)`, logging each kernel's first checked call (so a test sees that the check ran)."""
    if os.environ.get(KERNEL_CONTRACT_ENV) != "1":
        return
    from looprl.utils.logger import get_logger

    def first(kernel: str) -> None:
        get_logger().info("kernel contract: {} {} got q, k, v in {}", process, kernel, dtype)

    _process_checks.enter_context(kernel_contract(dtype, first))
