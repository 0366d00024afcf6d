"""Where the embedded engine computes: `--device auto|cpu|cuda`, and its share of a GPU it shares.

`auto` is CUDA when torch sees a device, else the CPU (as `trainer.device`). The launcher gives the
engine its GPUs with `CUDA_VISIBLE_DEVICES`, so the engine always uses `cuda:0`, the first it sees.
When the engine and the trainer share that GPU (`[deployment]`, the one-GPU default), the launcher
also sets `LOOPRL_GPU_MEMORY_FRACTION` (`deployment.inference_memory_fraction`), the default of
`--gpu-memory-fraction`: the engine's caching allocator then stops at that share of the GPU's memory
(`torch.cuda.set_per_process_memory_fraction`) and leaves the rest to the trainer. On the CPU the
fraction means nothing and is ignored.
"""

from __future__ import annotations

import torch

from looprl.errors import UserError


def engine_device(name: str) -> torch.device:
    """The device for `--device NAME` (`auto`, `cpu` or `cuda`)."""
    cuda = torch.cuda.is_available()
    if name == "cuda" and not cuda:
        raise UserError("--device cuda, but torch sees no CUDA device (use --device auto or cpu)")
    return torch.device("cuda", 0) if name == "cuda" or (name == "auto" and cuda) else torch.device("cpu")


def limit_memory(device: torch.device, fraction: float | None) -> None:
    """Cap this process's share of `device`'s memory at `fraction` (a no-op on the CPU or without one)."""
    if fraction is not None and not 0 < fraction <= 1:
        raise UserError(f"--gpu-memory-fraction must be in (0, 1], got {fraction}")
    if fraction is not None and device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(fraction, device)
