"""The embedded engine's KV-cache budget (`inference.max_kv_tokens`, `looprl inference --max-kv-tokens`).

What it caps: the decode batch's cache (`batch.DecodeBatch`), one left-padded rectangle per layer, rows x
columns, where the columns are as many as the longest row spans. One token of the budget is one row at
one column: its keys and values in every layer (`kv_bytes_per_token`). So a batch costs its row count
times its longest span, however short the other rows are, and that is what the engine's admission
control counts (`Engine._admit`): a request joins the batch only if, with its rows, the row count times
the longest span any row can reach (its prefill's length plus the tokens it may still generate) stays
within the budget. Otherwise it waits, in arrival order, until rows finish; a request that could never
fit, not even alone, fails at once with `KVBudgetExceeded` (HTTP 400 `kv_budget_exceeded`). Then no
burst of requests can grow the cache past the budget: on a GPU it queues instead of running out of
memory. On the CPU the lean decoder's cache keeps up to `lean_decoder.GROWTH` spare columns beyond that.

The default, the same rule on every device: KV_MEMORY_SHARE of the memory the device has free once the
model is loaded (`free_memory`): on a GPU what the driver reports free, within this process's share
(`--gpu-memory-fraction`) less what torch's allocator already holds; on the CPU the system's available
memory. The rest is for the forward pass's activations, a prefill's cache before it joins the batch,
and the copy of one layer's cache while rows join or leave.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

KV_MEMORY_SHARE = 0.7
"""Share of the device's free memory (after loading the model) the default budget gives the KV cache."""


class KVBudgetExceeded(ValueError):
    """A request whose rows could not fit in the KV-cache budget even with the batch empty."""


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of one budget token: one row's keys and values at one position, in every layer."""
    config = model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * model.dtype.itemsize


def free_memory(device: torch.device) -> int:
    """Bytes this process may still allocate on `device`."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        allowed = int(torch.cuda.get_per_process_memory_fraction(device) * total) - torch.cuda.memory_reserved(device)
        return max(0, min(free, allowed))
    return _available_ram()


def default_max_kv_tokens(model: Any) -> int:
    """The budget for `model` on its device: KV_MEMORY_SHARE of its free memory, in tokens (at least one)."""
    return max(1, int(KV_MEMORY_SHARE * free_memory(model.device)) // kv_bytes_per_token(model))


def _available_ram() -> int:
    """The system's available memory (Linux's MemAvailable: free plus reclaimable caches), else free pages."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
