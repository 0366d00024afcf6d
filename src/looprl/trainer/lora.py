"""LoRA through peft: adapters on the policy, and restoring them from a checkpoint.

The embedded engine knows nothing about adapters: each broadcast is a full HF-format model with the
adapters merged in (`trainer.weight_files.merged`, computed from the gathered state dict, so training
goes on with the adapters separate). vLLM loads adapters at run time: its broadcasts hold the
adapters only (`adapter_model.safetensors` and `adapter_config.json`, a few MB), each loaded as a
new adapter name. Checkpoints keep the adapters only, which `load_adapters` restores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from looprl.config import LoraConfig


def add_lora(model: Any, cfg: LoraConfig) -> Any:
    """The peft model wrapping `model`: only the adapters require gradients."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    # peft annotates lora_alpha as int but scales by any number (alpha / rank)
    return get_peft_model(model, PeftLoraConfig(r=cfg.rank, lora_alpha=cfg.alpha,  # type: ignore[arg-type]
                                                lora_dropout=cfg.dropout, target_modules=cfg.target_modules,
                                                task_type="CAUSAL_LM"))


def is_lora(model: Any) -> bool:
    return hasattr(model, "peft_config")


def load_adapters(model: Any, checkpoint: Path) -> None:
    """Restore a peft model's adapters from a checkpoint directory it saved."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(model, load_file(Path(checkpoint) / "adapter_model.safetensors"))
