"""The trainer's side of the shared-memory weight handoff (`looprl.handoff.shared_weights`): the weights the
engine would load from `model.safetensors` (same names, dtype and values), kept in the run's region.

Two ways the region gets them, chosen once (`attach`):

- **live**: one process whose parameters are exactly the servable tensors (full fine-tuning, on the CPU, in
  the engine's dtype: the CPU default, float32 on both sides) keeps its parameters *in* the region: the
  optimizer step writes the new weights there, holding the region's lock (an optimizer pre-step hook takes
  it, `Region.begin_change`), and a broadcast only marks the version. Nothing is copied on the trainer's side.
- **copy**: otherwise (parameters on a GPU, LoRA merged, another dtype, rank 0's gathered state under FSDP)
  each broadcast copies the servable state into the region under the lock.

Either way the engine copies from the region in place, between decode steps, after checking under the lock
that it holds the version it was asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from looprl.handoff.shared_weights import REGION_FILE, Region, SharedWeights, TensorEntry, layout
from looprl.trainer.lora import is_lora
from looprl.trainer.parallel import Ranks
from looprl.trainer.weight_files import StateDict, without_tied_head


class SharedWeightsWriter:
    def __init__(self, region_dir: Path) -> None:
        self.path = Path(region_dir) / REGION_FILE
        self.region: Region | None = None
        self.entries: list[TensorEntry] = []
        self.tensors: dict[str, torch.Tensor] = {}
        self.live = False

    def attach(self, model: Any, ranks: Ranks, dtype: torch.dtype) -> bool:
        """Move `model`'s parameters into the region when they are exactly its servable weights (live mode);
        False (copy mode) otherwise. Call it before the optimizer is built, after the model is on its device."""
        if ranks.distributed or is_lora(model):
            return False
        params = dict(model.named_parameters(remove_duplicate=False))
        servable = without_tied_head({k: v.detach() for k, v in model.state_dict().items()}, model.config)
        if any(name not in params or t.dtype != dtype or t.device.type != "cpu" for name, t in servable.items()):
            return False
        views = self._views(servable, dtype)
        with torch.no_grad():
            for name, view in views.items():
                view.copy_(params[name])
                params[name].data = view
        self.live = True
        return True

    def guard(self, optimizer: torch.optim.Optimizer) -> None:
        """Live mode: the optimizer step changes the region's weights, so it locks the region first."""
        if self.live:
            optimizer.register_step_pre_hook(lambda *_: self._locked().begin_change())

    def begin_change(self) -> None:
        """Live mode: the trainer is about to change the weights outside an optimizer step (a rollback)."""
        if self.live:
            self._locked().begin_change()

    def republish(self, version: int) -> None:
        """Live mode: mark the region as holding `version` again after optimizer steps that changed no weight.
        torch's distributed checkpoint initialises an empty optimizer state (no step trained yet) with a step
        at learning rate 0; the guard's hook cannot tell it from a real step and leaves the region changing,
        so the engine would refuse the version it was just sent."""
        if self.live:
            self._locked().publish(version)

    def publish(self, state: StateDict, version: int, dtype: torch.dtype) -> SharedWeights:
        """Put `state` (the servable weights: the model file's names and values) in the region as `version`,
        its floating-point tensors in `dtype` (cast as they are copied in: no cast copy of the weights
        first); the message that names it."""
        if not self.live:
            views = self._views(state, dtype)
            self._locked().begin_change()
            with torch.no_grad():
                for name, tensor in state.items():
                    views[name].copy_(tensor)
        region = self._locked()
        region.publish(version)
        return SharedWeights(region=str(self.path), version=version, nbytes=region.nbytes, tensors=self.entries)

    def _views(self, state: StateDict, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """The region's tensors for `state`'s (floating-point ones in `dtype`), the region made on the first
        call (the layout never changes)."""
        if self.region is None:
            dtypes = {name: dtype if t.is_floating_point() else t.dtype for name, t in state.items()}
            self.entries, nbytes = layout((name, str(dtypes[name]).removeprefix("torch."), list(t.shape),
                                           t.numel() * dtypes[name].itemsize) for name, t in state.items())
            self.region = Region(self.path, nbytes, create=True)
            self.tensors = self.region.views(self.entries)
        if list(self.tensors) != list(state):
            differ = sorted(set(state) ^ set(self.tensors))
            raise ValueError(f"the weights to publish are not the region's: {differ[:3]}")
        return self.tensors

    def _locked(self) -> Region:
        assert self.region is not None, "attach() or publish() makes the region"
        return self.region
