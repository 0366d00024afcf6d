"""The policy's weights as files: gathered whole on rank 0, written as Hugging Face safetensors.

`full_state_dict` is a collective under FSDP (every rank calls it; rank 0 gets the whole, CPU-resident
state dict, the others None); with one process it is the model's own state dict. With
`adapters_only` it holds the trainable parameters alone, each gathered by itself: a LoRA run whose
engine hot-loads adapters (vLLM) broadcasts and checkpoints the adapters alone, so the frozen base
model (a tied `lm_head` included, which torch's `ignore_frozen_params` still gathers) never is. From it:

- `save_model` writes `model.safetensors` + `config.json`: what transformers, vLLM and the embedded
  engine load. A tied `lm_head.weight` is left out (it follows the embeddings; `without_tied_head`, which
  the shared-memory handoff applies too, so the region holds exactly the file's tensors).
- `merged` folds LoRA adapters into their base weights (W + alpha/r * B @ A) under the base model's
  names, so the engine needs to know nothing about adapters.
- `save_adapters` writes peft's `adapter_model.safetensors` + `adapter_config.json`: a LoRA checkpoint,
  or a broadcast for an engine that hot-loads adapters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import save_file

from looprl.trainer.lora import is_lora
from looprl.trainer.parallel import Ranks

StateDict = dict[str, torch.Tensor]
MODEL_FILE = "model.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"


def full_state_dict(model: Any, ranks: Ranks, adapters_only: bool = False) -> StateDict | None:
    if adapters_only:
        return _trainable(model, ranks)
    if not ranks.distributed:
        return {k: v.detach() for k, v in model.state_dict().items()}
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
    )

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return cast(StateDict, state) if ranks.is_main else None  # full_state_dict=True: plain tensors


def _trainable(model: Any, ranks: Ranks) -> StateDict | None:
    """The trainable parameters, whole and on the CPU, on rank 0 (under FSDP2 one all-gather each, on every rank)."""
    state = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            whole = param.full_tensor() if hasattr(param, "full_tensor") else param
            state[name] = whole.detach().cpu()
    return state if ranks.is_main else None


def merged(model: Any, state: StateDict) -> StateDict:
    """The servable weights: `state` itself, or for a peft model its adapters merged in."""
    if not is_lora(model):
        return state
    cfg = model.peft_config["default"]
    scaling = cfg.lora_alpha / cfg.r
    out: StateDict = {}
    for name, tensor in state.items():
        if ".lora_" in name:
            continue
        base = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
        if ".base_layer.weight" in name:
            prefix = name.removesuffix("base_layer.weight")
            a, b = state[f"{prefix}lora_A.default.weight"], state[f"{prefix}lora_B.default.weight"]
            tensor = (tensor.float() + scaling * (b.float() @ a.float())).to(tensor.dtype)
        out[base] = tensor
    return out


def stores(path: Path, state: StateDict) -> bool:
    """Whether the safetensors file `path` exists and holds `state`'s tensors in their dtype (a broadcast in the
    engine's bfloat16 does not hold the float32 weights a checkpoint keeps)."""
    from safetensors import safe_open

    if not path.is_file():
        return False
    with safe_open(str(path), framework="pt") as f:
        name = next((n for n in f.keys() if n in state), None)  # noqa: SIM118 (a safetensors handle, not a dict)
        return name is not None and f.get_slice(name)[0:1].dtype == state[name].dtype


def without_tied_head(state: StateDict, config: Any) -> StateDict:
    """`state` as a model file holds it: a tied `lm_head.weight` left out (the engine's follows its embeddings)."""
    if getattr(config, "tie_word_embeddings", False):
        return {k: v for k, v in state.items() if k != "lm_head.weight"}
    return state


def save_model(target: Path, state: StateDict, config: Any) -> None:
    state = without_tied_head(state, config)
    target.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().cpu() for k, v in state.items()}, target / MODEL_FILE, metadata={"format": "pt"})
    config.save_pretrained(target)


def save_adapters(target: Path, model: Any, state: StateDict) -> None:
    from peft import get_peft_model_state_dict

    target.mkdir(parents=True, exist_ok=True)
    adapters = get_peft_model_state_dict(model, state_dict=state)
    save_file({k: v.contiguous().cpu() for k, v in adapters.items()}, target / ADAPTER_FILE, metadata={"format": "pt"})
    model.peft_config["default"].save_pretrained(target)
