"""Where the trainer computes, with how many ranks, and how the model is split among them.

One process (`python -m looprl.trainer`) or `world_size` ranks under torchrun, which sets `RANK`,
`WORLD_SIZE` and `LOCAL_RANK`: NCCL on GPUs (rank r on its `cuda:LOCAL_RANK`), gloo on the CPU. The
same code runs either way:

- `prepare` applies FSDP2 (`fully_shard`) to each decoder layer and then the root, with bfloat16
  layer parameters and float32 gradient reduction when the compute dtype is bfloat16 (the sharded
  master weights and AdamW state stay float32; the root, which holds the lm_head, computes in
  float32). Only rank 0 loads the weights (whole, on the CPU; `fully_shard` moves its shards to the
  GPU). Every other rank builds the model on the meta device (`Ranks.on_meta`) and, once it is sharded,
  receives rank 0's tensors one at a time, keeping its slice: no rank but 0 ever holds the whole model
  (a 7B model whole in fp32 is 28 GB per rank, 224 GB for 8 ranks on one node's host RAM). A single
  process in bfloat16 is a one-rank process group sharded the same way (`looprl.device.mixed_precision`):
  the policy, not autocast, applies the compute dtype, so q, k and v reach the attention kernel in one
  dtype; a single float32 process keeps its model whole.
- `assign` hands out a step's micro-batches by tokens (longest first, to the least loaded rank), so
  ranks finish together; every rank runs as many passes as the busiest (the others pad with
  zero-weight passes), since each FSDP pass is a collective.
- `all_sum` adds a step's metric totals over ranks; `gather_objects` collects a picklable value of
  each rank on rank 0 (the step's per-rollout logprobs).

The loss weights are computed over the whole step on every rank (`trainer.step`), and FSDP averages
gradients over ranks, so the step scales each rank's loss by `world_size`: the update equals the
single-process one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from looprl import device as devices
from looprl.config.deployment import MEMORY_FRACTION_ENV
from looprl.trainer.logprob_head import logprob_head

SHARED_GPU_MARGIN = 0.05
"""Share of a shared GPU left to neither process: the CUDA contexts, NCCL and cuBLAS workspaces live
outside both caching allocators' caps."""


@dataclass(frozen=True)
class Ranks:
    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    compute_dtype: torch.dtype = torch.float32
    distributed: bool = False
    """In a process group, the model sharded with FSDP2 (torchrun's ranks; or one rank: a bfloat16 process,
    as `bench/gpu_check.py`)."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def on_meta(self) -> bool:
        """Whether this rank builds its models on the meta device, reading no weights: every FSDP rank but 0,
        which alone loads them and hands each rank its shards when `prepare` shards the model."""
        return self.distributed and not self.is_main

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


def setup(device: str = "auto", dtype: str = "auto", timeout_s: float = 3600.0) -> Ranks:
    """This process's `Ranks`, joining torchrun's process group when there is one (its collectives time out
    after `timeout_s`, `trainer.dist_timeout_s`).

    On a GPU shared with the engine (the launcher then sets `LOOPRL_GPU_MEMORY_FRACTION` to the
    engine's share, `deployment.inference_memory_fraction`) the trainer caps its own allocator at the
    rest less `SHARED_GPU_MARGIN`: otherwise whichever process allocates second runs out of memory."""
    where = devices.resolve(device, int(os.environ.get("LOCAL_RANK", "0")))
    cuda = where.type == "cuda"
    if cuda:
        torch.cuda.set_device(where)
        engine_share = os.environ.get(MEMORY_FRACTION_ENV)
        if engine_share:
            devices.limit_memory(where, 1.0 - float(engine_share) - SHARED_GPU_MARGIN)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    compute = devices.compute_dtype(dtype, where)
    sharded = world_size > 1 or devices.mixed_precision(compute)
    if sharded and not dist.is_initialized():
        # one process: a one-rank group of its own (an in-memory store, no socket), so FSDP2 applies the
        # mixed-precision policy exactly as it does for torchrun's ranks
        alone = {} if world_size > 1 else {"store": dist.HashStore(), "rank": 0, "world_size": 1}
        dist.init_process_group("nccl" if cuda else "gloo", device_id=where if cuda else None,
                                timeout=timedelta(seconds=timeout_s), **alone)  # type: ignore[arg-type]
    return Ranks(dist.get_rank() if sharded else 0, world_size, where, compute, sharded)


def teardown(ranks: Ranks) -> None:
    if ranks.distributed and dist.is_initialized():
        dist.barrier()  # no rank leaves while another still uses the group
        dist.destroy_process_group()


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The model's transformer blocks (the classes transformers names in `_no_split_modules`)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def prepare(model: Any, ranks: Ranks, *, compile: bool = False, activation_checkpointing: bool = False) -> Any:
    """Move the (whole, loaded on the CPU) model to its device or, with several ranks, shard it there: rank 0's
    model holds the weights, the others' are on the meta device (`Ranks.on_meta`) and get rank 0's values."""
    if activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if hasattr(model, "enable_input_require_grads"):
            model.enable_input_require_grads()  # LoRA: frozen embeddings would cut the checkpointed graph
    logprob_head(model)  # in place of the lm_head before FSDP wraps the modules
    layers = decoder_layers(model)
    if compile:
        for layer in layers:
            layer.compile()
    if not ranks.distributed:
        if devices.mixed_precision(ranks.compute_dtype):
            raise ValueError(f"{ranks.compute_dtype} compute is FSDP2's mixed-precision policy: a process group of "
                             "one rank at least (parallel.setup makes one); unsharded, the model would run float32")
        return model.to(ranks.device)
    return _shard(model, layers, ranks)


def _shard(model: Any, layers: list[torch.nn.Module], ranks: Ranks) -> Any:
    """FSDP2 over the process group: each layer, then the root (embeddings, final norm, lm_head); then every
    rank gets rank 0's weights (`_from_rank0`).

    The model stays where it was loaded (the CPU; the meta device on every rank but 0): `fully_shard` moves each
    module's parameters to the mesh's device and keeps this rank's shard, one module at a time. The mesh is built
    on `ranks.device`'s type explicitly (torch's default is the accelerator, even for a CPU trainer)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(ranks.device.type, (dist.get_world_size(),))
    whole = _whole_state(model, ranks)
    layer_policy = MixedPrecisionPolicy(param_dtype=ranks.compute_dtype, reduce_dtype=torch.float32)
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=layer_policy)
    # the root (embeddings, final norm, the logprob head) computes in float32: a bfloat16 lm_head adds
    # logprob noise against the engine's; its cost is small next to the layers'
    fully_shard(model, mesh=mesh, mp_policy=MixedPrecisionPolicy(param_dtype=torch.float32))
    _from_rank0(model, whole, ranks)
    return model


def _whole_state(model: Any, ranks: Ranks) -> dict[str, Any]:
    """Rank 0's weights, taken before sharding (the model's tensors themselves, no copy); empty on the others."""
    whole: dict[str, Any] = dict(model.state_dict()) if ranks.is_main else {}
    if any(t.is_meta for t in whole.values()):
        raise ValueError("rank 0 must load the model's weights: its model is on the meta device")
    return whole


def _from_rank0(model: Any, whole: dict[str, Any], ranks: Ranks) -> None:
    """Give every rank's shards and buffers rank 0's values (`whole`, empty on the other ranks).

    A rank built on the meta device first gets storage for its shards and buffers (`to_empty`, values
    undefined). The weights then come one whole tensor at a time (`set_model_state_dict` with
    `broadcast_from_rank0`; each rank keeps its slice), so no rank but 0 ever holds the whole model. The
    buffers are broadcast as well: the non-persistent ones (rotary `inv_freq`) are in no state dict, and
    rank 0's are the ones transformers computed from the config."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
        model.to_empty(device=ranks.device)
    set_model_state_dict(model, whole, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for buffer in model.buffers():
        dist.broadcast(buffer, src=0)


def assign(token_counts: Sequence[int], world_size: int) -> list[list[int]]:
    """Micro-batch indices per rank, balanced by tokens (each rank's list in increasing order)."""
    loads, shares = [0] * world_size, [[] for _ in range(world_size)]  # type: list[int], list[list[int]]
    for i in sorted(range(len(token_counts)), key=lambda i: -token_counts[i]):
        lightest = loads.index(min(loads))
        loads[lightest] += token_counts[i]
        shares[lightest].append(i)
    return [sorted(s) for s in shares]


def all_sum(values: dict[str, float], ranks: Ranks) -> dict[str, float]:
    if not ranks.distributed:
        return values
    totals = torch.tensor(list(values.values()), dtype=torch.float64, device=ranks.device)
    dist.all_reduce(totals)
    return dict(zip(values, totals.tolist()))


def gather_objects(value: Any, ranks: Ranks) -> list[Any] | None:
    """Every rank's `value`, in rank order, on rank 0; None on the others (a collective)."""
    if not ranks.distributed:
        return [value]
    out: list[Any] | None = [None] * ranks.world_size if ranks.is_main else None
    dist.gather_object(value, out, dst=0)
    return out


def full_value(tensor: torch.Tensor) -> float:
    """A scalar that may be a DTensor (e.g. the grad norm of sharded parameters) as a float."""
    return float(tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor)
