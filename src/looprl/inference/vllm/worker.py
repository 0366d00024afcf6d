"""vLLM worker extension: load a directory of safetensors into the running model, in place.

vLLM mixes this class into every worker (`--worker-extension-cls
looprl.inference.vllm.worker.WeightLoader`); `routes` reaches it through the engine's
`collective_rpc("looprl_load_weights", args=(path,))`, which every worker (each tensor-parallel rank)
runs between two scheduler steps. The worker's own `reload_weights` does the loading: the model's
`load_weights` maps HF names onto vLLM's fused layers (q/k/v into qkv_proj, gate/up into
gate_up_proj, a tied `lm_head` stays tied), and the layers are first restored to checkpoint format
and afterwards processed again, which the CPU build needs (it repacks linear weights for oneDNN and
drops the originals) and which keeps LoRA-wrapped layers loadable.

A directory may hold some of the model's tensors only (the embedded engine copies in what it is given), but
never part of a fused layer: vLLM rebuilds a fused layer whole from what it is given, and the parts not
given (`gate_proj` when only `up_proj` came) would be left as uninitialised memory, which decodes garbage
or NaN. Such a directory is refused before anything is loaded (`fused_parts_missing`).

Imports only the standard library, torch and safetensors: it runs in vLLM's interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from safetensors import safe_open


class WeightLoader:
    reload_weights: Callable[..., None]  # the worker's, which vLLM provides
    get_model: Callable[[], torch.nn.Module]

    def looprl_load_weights(self, path: str) -> int:
        """Load every tensor of `path/*.safetensors` into the model; returns how many were read."""
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors files in {path}")
        tensors = list(_tensors(files))
        fused = getattr(self.get_model(), "packed_modules_mapping", {})
        if missing := fused_parts_missing([name for name, _ in tensors], fused):
            raise ValueError(f"{path} holds part of a fused layer only (vLLM would fill the rest with "
                             f"uninitialised memory); missing: {', '.join(missing[:5])}"
                             + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
        self.reload_weights(weights_iterator=iter(tensors), is_checkpoint_format=True)
        return len(tensors)


def fused_parts_missing(names: list[str], fused: dict[str, list[str]]) -> list[str]:
    """The tensors `names` lacks to load whole every fused layer it touches. `fused` is the model's
    `packed_modules_mapping` (`{"gate_up_proj": ["gate_proj", "up_proj"], ...}`); `names` are HF names
    (`model.layers.0.mlp.up_proj.weight`)."""
    given = set(names)
    missing: set[str] = set()
    for name in names:
        module, _, kind = name.rpartition(".")
        parent, dot, part = module.rpartition(".")
        for parts in fused.values():
            if part in parts:
                missing |= {f"{parent}{dot}{sibling}.{kind}" for sibling in parts} - given
    return sorted(missing)


def _tensors(files: list[Path]) -> Iterator[tuple[str, torch.Tensor]]:
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (a safetensors handle, not a dict: it has no __iter__)
                yield name, f.get_tensor(name)
