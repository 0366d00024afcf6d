"""vLLM worker extension: load a directory of safetensors into the running model, in place.

vLLM mixes this class into every worker (`--worker-extension-cls
looprl.inference.vllm.worker.WeightLoader`); `routes` reaches it through the engine's
`collective_rpc("looprl_load_weights", args=(path,))`, which every worker (each tensor-parallel rank)
runs between two scheduler steps. The worker's own `reload_weights` does the loading: the model's
`load_weights` maps HF names onto vLLM's fused layers (q/k/v into qkv_proj, gate/up into
gate_up_proj, a tied `lm_head` stays tied), and the layers are first restored to checkpoint format
and afterwards processed again, which the CPU build needs (it repacks linear weights for oneDNN and
drops the originals) and which keeps LoRA-wrapped layers loadable.

Imports only the standard library, torch and safetensors: it runs in vLLM's interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from safetensors import safe_open


class WeightLoader:
    reload_weights: Callable[..., None]  # the worker's, which vLLM provides

    def looprl_load_weights(self, path: str) -> int:
        """Load every tensor of `path/*.safetensors` into the model; returns how many were read."""
        files = sorted(Path(path).glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors files in {path}")
        tensors = list(_tensors(files))
        self.reload_weights(weights_iterator=iter(tensors), is_checkpoint_format=True)
        return len(tensors)


def _tensors(files: list[Path]) -> Iterator[tuple[str, torch.Tensor]]:
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (a safetensors handle, not a dict: it has no __iter__)
                yield name, f.get_tensor(name)
