"""LoRA through peft: adapters on the policy, and the merged weights the inference engine loads.

The embedded engine knows nothing about adapters: its broadcasts are full HF-format models with the
adapters merged in (a merged copy, so training goes on with the adapters separate). vLLM loads
adapters at run time: its broadcasts hold the adapters only (peft's `adapter_model.safetensors` and
`adapter_config.json`, a few MB), each loaded as a new adapter name. Checkpoints keep the adapters
only (`save_pretrained` of the peft model), which `load_adapters` restores.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from looprl.trainer.config import LoraConfig


def add_lora(model: Any, cfg: LoraConfig) -> Any:
    """The peft model wrapping `model`: only the adapters require gradients."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    return get_peft_model(model, PeftLoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                                                target_modules=cfg.target_modules, task_type="CAUSAL_LM"))


def is_lora(model: Any) -> bool:
    return hasattr(model, "peft_config")


def servable(model: Any, adapters_only: bool = False) -> Any:
    """What to broadcast: the model itself; for a peft model, a copy with its adapters merged in, or with
    `adapters_only` the peft model itself (whose `save_pretrained` writes the adapters alone)."""
    return copy.deepcopy(model).merge_and_unload() if is_lora(model) and not adapters_only else model


def load_adapters(model: Any, checkpoint: Path) -> None:
    """Restore a peft model's adapters from a checkpoint directory it saved."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(model, load_file(Path(checkpoint) / "adapter_model.safetensors"))
